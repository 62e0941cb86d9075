"""
What the studies' write-ups say about the machine a figure was measured on. Seven probes read the CPU's name; they
read it here, in one way.
"""

import platform


def cpu_name() -> str:
    """
    The CPU's model name: ``/proc/cpuinfo``'s where there is one (Linux), else what :mod:`platform` knows.

    :return: the name ('?' when nothing names it)
    """
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass  # no /proc (macOS, Windows): the platform's own name
    return platform.processor() or platform.machine() or "?"
