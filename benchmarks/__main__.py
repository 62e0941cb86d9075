"""
One command line for every study's probes::

    python -m benchmarks                         # the studies
    python -m benchmarks STUDY                   # its probes and grid configs
    python -m benchmarks STUDY PROBE [options]   # run a probe (--help: its options)

Grids of training runs are configs, run by ``python -m sb3_pref.experiments run CONFIG``; the listing names them.
"""

import sys
from collections.abc import Sequence
from typing import Optional

from benchmarks import study as registry

USAGE = "usage: python -m benchmarks [STUDY [PROBE [options]]]"


def list_studies() -> None:
    """Print the studies with their titles, then the grid configs at the top of ``benchmarks/``."""
    names = registry.studies()
    width = max(map(len, names))
    print(USAGE + "\n\nstudies:")
    for name in names:
        print(f"  {name:{width}}  {registry.title(name)}")
    grids = registry.configs()
    if grids:
        print("\ngrid configs (python -m sb3_pref.experiments run CONFIG):")
        print("\n".join(f"  {path}" for path in grids))


def list_probes(study: str) -> None:
    """
    Print a study's probes with their help, and its grid configs.

    :param study: a study's folder name
    """
    probes = registry.load(study)
    print(f"{study}: {registry.title(study)}\n")
    if probes:
        width = max(map(len, probes))
        print(f"probes (python -m benchmarks {study} PROBE --help):")
        print("\n".join(f"  {name:{width}}  {found.help}" for name, found in probes.items()))
    grids = registry.configs(study)
    if grids:
        print("\ngrid configs (python -m sb3_pref.experiments run CONFIG):")
        print("\n".join(f"  {path}" for path in grids))
    if not probes and not grids:
        print("no probes and no grid configs: its results are committed, its write-up says where they came from")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """
    The command line.

    :param argv: the arguments after ``python -m benchmarks``; None: ``sys.argv[1:]``
    :return: the exit status
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        list_studies()
        return 0
    try:
        if len(argv) == 1 or argv[1] in ("-h", "--help"):
            list_probes(argv[0])
            return 0
        found = registry.get(argv[0], argv[1])
    except KeyError as error:
        print(f"{USAGE}\nerror: {error.args[0]}", file=sys.stderr)
        return 2
    found(argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
