"""
What the studies' write-ups say about the machine a figure was measured on. Seven probes read the CPU's name; they
read it here, in one way.
"""

import platform


def cpu_name() -> str:
    """
    The CPU's model name and its widest vector instructions: ``/proc/cpuinfo``'s where there is one (Linux), else
    what :mod:`platform` knows. Why the instructions: two cloud machines both named "AMD EPYC" ran this project's
    studies, one with AVX2 only and one with AVX512-BF16, and the second trains the same runs in about half the
    CPU seconds, so a figure without them cannot be compared.

    :return: e.g. ``"AMD EPYC (AVX512-BF16)"`` ('?' when nothing names it)
    """
    name, flags = "", set()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name") and not name:
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass  # no /proc (macOS, Windows): the platform's own name
    name = name or platform.processor() or platform.machine() or "?"
    for flag, label in (("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX512"), ("avx2", "AVX2 only")):
        if flag in flags:
            return f"{name} ({label})"
    return name


#: what runs written before the name carried the CPU's instructions record (``platform.processor()``): every one of
#: them ran on the AVX2-only AMD EPYC of the sessions before 2026-11-28 (the write-ups say so)
LEGACY_CPU = "x86_64"


def machine(run: dict) -> str:
    """:return: the short name of the machine a run's JSON says it trained on (its ``cpu_model``), e.g. ``"AVX512-BF16"``"""
    name = run.get("cpu_model", LEGACY_CPU)
    return "AVX2 only" if name == LEGACY_CPU else name.rsplit("(", 1)[-1].rstrip(")")
