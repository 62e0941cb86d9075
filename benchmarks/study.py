"""
The studies under ``benchmarks/`` and their probes, behind one command line (``python -m benchmarks``).

A study is a folder of ``benchmarks/``: its grid configs (YAML, run by ``python -m sb3_pref.experiments run``), its
write-up (``README.md``), its results, and the modules that declare its probes. A probe is a measurement that is not
a grid of training runs (a timing, a diagnostic, a table read from committed results), declared once with
:func:`probe`: its name, a one-line help and its options. Options that several studies take (``--seeds``,
``--workers``, ``--output-dir`` ...) are declared here once, in :data:`SHARED`, and a probe takes them with
:func:`shared`, changing only its default::

    @probe("iqm", "the issue's table of a finished grid", Option("run_dir"), shared("seed", default=3))
    def iqm(args: argparse.Namespace) -> None: ...

The command line imports only the study it is asked about, and of it only the modules that declare a probe, so a
study's heavy imports (torch, dm_control) are paid by that study alone. A script that jobs (or a write-up) still run
by path ends with a shim to its probe, ``if __name__ == "__main__": run_script(probe_function)``, which takes the
same options.
"""

import argparse
import importlib
import inspect
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Union

#: the ``benchmarks/`` folder: one study per folder in it
ROOT = os.path.dirname(os.path.abspath(__file__))
#: folders of ``benchmarks/`` that are not studies (the top-level grids' results)
NOT_STUDIES = ("results",)
#: the text that marks a module declaring probes (read before importing it, see :func:`probe_modules`)
MARK = "@probe("


class UsageError(Exception):
    """Options of a probe that do not go together; the command line prints it as a usage error (exit status 2)."""


@dataclass(frozen=True)
class Option:
    """
    One command-line option of a probe, as :meth:`argparse.ArgumentParser.add_argument` takes it.

    :param flag: ``--name`` for an option, a bare name for a positional argument
    :param help: what it sets
    :param type: turns the text into the value (``int``, ``float``); None: the text
    :param default: its value when not given (None: argparse's own, ``False`` for a ``store_true`` flag)
    :param nargs: how many values it takes (``"+"``, ``"*"``); None: one
    :param choices: the values it accepts; None: any
    :param action: an argparse action (``"store_true"``, ``"append"``); None: store the value
    :param required: an option (``--name``) that must be given
    :param metavar: its value's name in the help
    """

    flag: str
    help: str = ""
    type: Optional[Callable[[str], Any]] = None
    default: Any = None
    nargs: Union[int, str, None] = None
    choices: Optional[Sequence[Any]] = None
    action: Optional[str] = None
    required: bool = False
    metavar: Optional[str] = None

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """
        Add the option to ``parser``.

        :param parser: a probe's parser
        """
        settings = {
            "help": self.help or None,
            "type": self.type,
            "default": self.default,
            "nargs": self.nargs,
            "choices": self.choices,
            "action": self.action,
            "metavar": self.metavar,
        }
        # Only what is set goes to argparse: a None default would replace a store_true flag's False.
        kwargs = {key: value for key, value in settings.items() if value is not None}
        if self.required:
            kwargs["required"] = True
        parser.add_argument(self.flag, **kwargs)


#: options that several studies' probes take, declared once; a probe takes one with :func:`shared`
SHARED: dict[str, Option] = {
    "seed": Option("--seed", "the run's seed", type=int, default=0),
    "seeds": Option("--seeds", "seeds, one run each", type=int, nargs="+"),
    "seed_group": Option(
        "--seeds",
        "which seeds: dev (0-4, where the choices were made) or report (100 and up, what the write-up reports)",
        choices=("report", "dev"),
        default="report",
    ),
    "workers": Option("--workers", "runs at once, one process each", type=int, default=2),
    "output_dir": Option("--output-dir", "folder for the run's files"),
    "output": Option("--output", "Markdown file for the table (printed either way)"),
    "threads": Option("--threads", "torch threads", type=int, default=1),
    "repeats": Option("--repeats", "interleaved measurements per setting", type=int, default=3),
    "env": Option("--env", "the task"),
    "total_timesteps": Option("--total-timesteps", "env steps to train", type=int),
}


def parse(options: Sequence[Option], argv: Sequence[str], prog: Optional[str] = None) -> argparse.Namespace:
    """
    Parse a command line against options outside a probe's run, as a probe that reuses another's settings does.

    :param options: the options
    :param argv: the command line
    :param prog: the program's name in a usage error (None: argparse's)
    :return: the parsed options
    """
    parser = argparse.ArgumentParser(prog=prog)
    for option in options:
        option.add_to(parser)
    return parser.parse_args(list(argv))


def shared(name: str, **changes: Any) -> Option:
    """
    A shared option, as a probe takes it.

    :param name: a key of :data:`SHARED`
    :param changes: fields of :class:`Option` that differ for this probe (its ``default``, a closer ``help``)
    :return: the option
    """
    if name not in SHARED:
        raise KeyError(f"no shared option {name!r}; the shared ones: {sorted(SHARED)}")
    return replace(SHARED[name], **changes)


@dataclass(frozen=True)
class Probe:
    """
    A probe of a study, as :func:`probe` declared it.

    :param study: the study's folder under ``benchmarks/``
    :param name: the name the command line takes after the study's
    :param help: one line: what it measures
    :param run: the probe; takes the parsed options
    :param options: its options, in the order of its usage line
    :param environ: environment variables it sets (when not set already) before it runs
    """

    study: str
    name: str
    help: str
    run: Callable[[argparse.Namespace], Any]
    options: tuple[Option, ...]
    environ: tuple[tuple[str, str], ...] = ()

    def parser(self) -> argparse.ArgumentParser:
        """The probe's parser; its description is the probe's help and its docstring's text."""
        text = inspect.cleandoc(self.run.__doc__ or "").split("\n:param")[0].strip()
        parser = argparse.ArgumentParser(
            prog=f"python -m benchmarks {self.study} {self.name}",
            description=f"{self.help}\n\n{text}" if text else self.help,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        for option in self.options:
            option.add_to(parser)
        return parser

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """
        Parse the probe's options (without running it), as another probe that reuses its settings needs.

        :param argv: the command line after the probe's name
        :return: the options
        """
        return self.parser().parse_args(list(argv))

    def __call__(self, argv: Sequence[str]) -> Any:
        """
        Parse ``argv`` and run the probe.

        :param argv: the command line after the probe's name
        :return: what the probe returns
        """
        parser = self.parser()
        args = parser.parse_args(list(argv))
        for key, value in self.environ:
            os.environ.setdefault(key, value)
        try:
            return self.run(args)
        except UsageError as error:
            parser.error(str(error))


_PROBES: dict[tuple[str, str], Probe] = {}
#: probes of a study's file loaded under another name than its package's (run by path, or imported by a sibling
#: script through ``sys.path``): not on the command line, which imports the file by its package name; its shim runs them
_COPIES: dict[Callable[[argparse.Namespace], Any], Probe] = {}


def _home(run: Callable[..., Any]) -> tuple[str, str]:
    """
    Where a probe lives.

    :param run: the probe's function
    :return: its study and module, from its file's place, ``benchmarks/<study>/<module>.py``
    """
    path = inspect.getsourcefile(run) or ""
    parts = os.path.relpath(os.path.abspath(path), ROOT).split(os.sep)
    if len(parts) != 2 or parts[0] == os.pardir or not parts[1].endswith(".py"):
        raise ValueError(f"{path}: a probe lives in a study's module, benchmarks/<study>/<module>.py")
    return parts[0], parts[1][:-3]


def probe(
    name: str, help: str, *options: Option, environ: Optional[dict[str, str]] = None
) -> Callable[[Callable[[argparse.Namespace], Any]], Callable[[argparse.Namespace], Any]]:
    """
    Declare a probe of the study whose folder holds the decorated function's module.

    :param name: the probe's name on the command line (unique in its study)
    :param help: one line: what it measures
    :param options: its options (:class:`Option`, or :func:`shared` for one of :data:`SHARED`)
    :param environ: environment variables to set, when not set already, before it runs (``MUJOCO_GL``)
    :return: the decorator; it returns the function unchanged
    """

    def register(run: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], Any]:
        study, module = _home(run)
        found = Probe(study, name, help, run, tuple(options), tuple(sorted((environ or {}).items())))
        if run.__module__ != f"benchmarks.{study}.{module}":
            _COPIES[run] = found
            return run
        key = (study, name)
        if key in _PROBES and _PROBES[key].run.__qualname__ != run.__qualname__:
            raise ValueError(f"study {study!r} has two probes named {name!r}")
        _PROBES[key] = found
        return run

    return register


def run_script(run: Callable[[argparse.Namespace], Any], argv: Optional[Sequence[str]] = None) -> Any:
    """
    Run a probe from its file's ``if __name__ == "__main__":`` shim, for a script that jobs still invoke by path
    (``python benchmarks/defaults/run.py --phase ...``): the same options and run as ``python -m benchmarks``.

    :param run: the probe's function, as the script defines it
    :param argv: the command line after the script's name (None: ``sys.argv[1:]``)
    :return: what the probe returns
    """
    found = _COPIES.get(run) or next((p for p in _PROBES.values() if p.run is run), None)
    if found is None:
        raise KeyError(f"{run.__qualname__} is not a probe")
    return found(sys.argv[1:] if argv is None else argv)


def write_json(path: Union[str, "os.PathLike[str]"], data: Any) -> None:
    """
    Write a run's result as JSON through a temporary file, so a stopped run leaves no half-written result (a study
    that resumes skips the runs whose file exists).

    :param path: the result file; its folder is made
    :param data: what JSON can hold
    """
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    tmp = os.fspath(path) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=1))
    os.replace(tmp, path)


def studies() -> list[str]:
    """The studies: the folders of ``benchmarks/``, sorted."""
    return sorted(
        name
        for name in os.listdir(ROOT)
        if os.path.isdir(os.path.join(ROOT, name)) and not name.startswith((".", "_")) and name not in NOT_STUDIES
    )


def probe_modules(study: str) -> list[str]:
    """
    The modules of a study that declare probes, found by their text so that the others (scripts a running job
    still uses as they are) are never imported.

    :param study: a study's folder name
    :return: their import names, sorted
    """
    folder = os.path.join(ROOT, study)
    modules = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and not name.startswith("_"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                if MARK in handle.read():
                    modules.append(f"benchmarks.{study}.{name[:-3]}")
    return modules


def load(study: str) -> dict[str, Probe]:
    """
    Import a study's probe modules.

    :param study: a study's folder name
    :return: its probes by name, in the order the modules declare them
    """
    if study not in studies():
        raise KeyError(f"no study {study!r}; the studies: {', '.join(studies())}")
    for module in probe_modules(study):
        importlib.import_module(module)
    return {name: found for (owner, name), found in _PROBES.items() if owner == study}


def get(study: str, name: str) -> Probe:
    """
    One probe.

    :param study: a study's folder name
    :param name: the probe's name
    :return: the probe
    """
    probes = load(study)
    if name not in probes:
        raise KeyError(f"study {study!r} has no probe {name!r}; its probes: {', '.join(probes) or 'none'}")
    return probes[name]


def configs(study: Optional[str] = None) -> list[str]:
    """
    The grid configs of a study, for ``python -m sb3_pref.experiments run``.

    :param study: a study's folder name; None: the configs at the top of ``benchmarks/``
    :return: their paths from the repository's root, sorted
    """
    folder = os.path.join(ROOT, study) if study else ROOT
    return [
        os.path.join("benchmarks", study or "", name)
        for name in sorted(os.listdir(folder))
        if name.endswith((".yaml", ".yml"))
    ]


def title(study: str) -> str:
    """
    A study's title: the first heading of its write-up (``README.md``, else its first Markdown file).

    :param study: a study's folder name
    :return: the heading's text ('' without a write-up)
    """
    folder = os.path.join(ROOT, study)
    pages = sorted(name for name in os.listdir(folder) if name.endswith(".md"))
    for page in ["README.md", *pages] if "README.md" in pages else pages:
        with open(os.path.join(folder, page), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("# "):
                    return line[2:].strip()
    return ""
