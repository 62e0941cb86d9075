"""
The run kinds a grid knows (``ppo``, ``prefppo``, ``pebble``, ``sac``, ``rl2``, ``ad``, and any a user adds),
each declared in one place: a :class:`RunKind` names the settings its runs take, their per-task defaults and
checks, how a run's model is built (new or from a checkpoint) and how a finished run is saved and summed up,
plus what the report needs to know about its runs.

This module sits at the bottom of the grid runner: it imports none of it. The config, the runner and the
report ask it for a kind by name; :mod:`sb3_pref.experiments.kinds` registers the built-in kinds, and the
package imports that module first, so they are here whichever part of the package is imported.

    from sb3_pref.experiments.registry import RunKind, register

    register(RunKind(name="a2c", keys=frozenset({"total_timesteps", "lr"}), ...))  # then ``algorithms: [a2c]``

A grid's runs execute in fresh processes (local workers, Ray tasks), which know the built-in kinds only. A run of a
kind declared elsewhere records the module that defines its ``build`` (:func:`defining_module`), and the worker
imports that module before it asks for the kind (:func:`import_kind`), so the module must be importable there (on
``PYTHONPATH``, or installed): a kind declared in the script being run (``__main__``) is refused before any run
starts (:func:`check_importable`).
"""

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv

    from sb3_pref.common.callbacks import Checkpoint
    from sb3_pref.experiments.spec import RunSpec

#: the closing evaluation's env is seeded the run's seed plus this: episodes the training envs never started from
EVAL_SEED_OFFSET = 10_000


def _no_budgets(task: str) -> list[str]:
    return []


@dataclass(frozen=True)
class RunKind:
    """
    Everything the grid runner knows about one kind of run. Functions raise ``ValueError`` naming the setting
    (the config turns it into a :class:`~sb3_pref.experiments.axes.ConfigError` saying where it came from).

    :param name: the name a config lists under ``algorithms`` (the first part of every run id)
    :param keys: the settings a config may give its runs (``hyperparameters``, ``algorithms.<name>``, ``tasks.<task>``)
    :param defaults: ``task -> settings`` the run starts from, a new dict (raises for a task the kind does not take)
    :param check: ``(task, settings) -> settings`` with numbers as numbers; raises for a bad value
    :param build: ``(spec, monitor_dir, checkpoint) -> model``: a new model with its env, or the checkpoint's
    :param finish: ``(model, spec, run_dir) -> summary``: save the run's outputs, :return: numbers for ``run.json``
    :param why_not: ``task -> None`` when the kind runs on the task, else why not (for the config's error)
    :param variant: ``spec -> the line name of the run in the report`` (e.g. the teacher for PrefPPO)
    :param learns_preferences: its runs learn from a teacher's labels: each gets a teacher and a feedback budget
    :param budgets: ``task -> default budgets`` (``"1000x100"``) when the config gives none (preference kinds)
    :param preset: ``name -> settings``: a config's ``preset`` key picks the settings the run starts from
        (they replace the task's defaults; the config's own keys still override them), None: no presets
    :param validate: ``spec -> anything``: a last check of a whole run (settings that conflict); None: none
    :param eval_env: ``spec -> VecEnv``: one fresh env seeded ``seed + EVAL_SEED_OFFSET``, on which the runner
        closes each run with a deterministic evaluation (``eval_return``); None: ``finish`` evaluates, if anything
    :param baseline: the kind on the true reward that the report normalises this kind's scores by (its own name
        for a baseline); None: none
    :param adapts: a meta-RL kind, scored on held-out tasks (``adaptation.csv``) rather than by its final return
    """

    name: str
    keys: frozenset[str]
    defaults: Callable[[str], dict[str, Any]]
    check: Callable[[str, dict[str, Any]], dict[str, Any]]
    build: Callable[["RunSpec", str, Optional["Checkpoint"]], "BaseAlgorithm"]
    finish: Callable[["BaseAlgorithm", "RunSpec", str], dict[str, Any]]
    why_not: Callable[[str], Optional[str]]
    variant: Callable[["RunSpec"], str]
    learns_preferences: bool = False
    budgets: Callable[[str], list[str]] = _no_budgets
    preset: Optional[Callable[[Any], dict[str, Any]]] = None
    validate: Optional[Callable[["RunSpec"], Any]] = None
    eval_env: Optional[Callable[["RunSpec"], "VecEnv"]] = None
    baseline: Optional[str] = None
    adapts: bool = False

    def runs_on(self, task: str) -> bool:
        """Whether the kind takes ``task``."""
        return self.why_not(task) is None

    @property
    def is_baseline(self) -> bool:
        """A run on the true reward that other kinds' scores are normalised by (PPO, SAC)."""
        return self.baseline == self.name


_KINDS: dict[str, RunKind] = {}


def declaration_errors(kind: RunKind) -> list[str]:
    """
    What a kind declares wrongly, as far as can be told without running it.

    :param kind: the kind
    :return: one message per problem (empty: none)
    """
    errors = []
    if not kind.name or not kind.name.replace("_", "").isalnum() or not kind.name.islower():
        errors.append(f"name {kind.name!r}: a run id part, lowercase letters, digits and '_'")
    if "total_timesteps" not in kind.keys:
        errors.append("keys: needs total_timesteps (every run trains to a step count)")
    if kind.preset is not None and "preset" not in kind.keys:
        errors.append("keys: a kind with presets takes the key 'preset'")
    for field in ("defaults", "check", "build", "finish", "why_not", "variant", "budgets"):
        if not callable(getattr(kind, field)):
            errors.append(f"{field}: expected a function")
    for field in ("preset", "validate", "eval_env"):
        if getattr(kind, field) is not None and not callable(getattr(kind, field)):
            errors.append(f"{field}: expected a function or None")
    if kind.adapts and kind.baseline is not None:
        errors.append("baseline: a kind scored by adaptation has no true-reward baseline")
    return errors


def register(kind: RunKind, replace: bool = False) -> RunKind:
    """
    Make a kind of run available to grid configs (``algorithms: [<kind.name>]``).

    :param kind: the kind
    :param replace: replace a kind of the same name (otherwise that is an error)
    :return: the kind
    :raises ValueError: for a name already registered, or a declaration that cannot work
    """
    errors = declaration_errors(kind)
    if errors:
        raise ValueError(f"run kind {kind.name!r}: " + "; ".join(errors))
    if kind.name in _KINDS and not replace:
        raise ValueError(f"run kind {kind.name!r} is already registered (replace=True to replace it)")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Forget a kind (a test's, a plugin's); unknown names are ignored."""
    _KINDS.pop(name, None)


def run_kind(name: str) -> RunKind:
    """
    :param name: a registered kind's name
    :return: its declaration
    :raises ValueError: naming the registered kinds
    """
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}: expected one of {', '.join(_KINDS)}") from None


def defining_module(name: str) -> Optional[str]:
    """
    :param name: a registered kind's name
    :return: the module a fresh process must import to know the kind (that of its ``build``), or None for a kind
        the package registers itself
    """
    module = getattr(run_kind(name).build, "__module__", None) or "__main__"
    return None if module == "sb3_pref" or module.startswith("sb3_pref.") else module


def check_importable(name: str) -> None:
    """
    :param name: a registered kind's name
    :raises ValueError: when a worker process could not import the kind's module (it is the running script)
    """
    if defining_module(name) == "__main__":
        raise ValueError(
            f"run kind {name!r} is declared in the script being run (__main__), which the grid's worker processes "
            "cannot import: move its RunKind and register() call into a module on PYTHONPATH (e.g. my_kinds.py) "
            "and import that module from the script"
        )


def import_kind(name: str, module: Optional[str]) -> RunKind:
    """
    The kind of a run, importing the module that registers it first when this process does not know it yet.

    :param name: the kind's name
    :param module: the module ``run.json`` recorded for it (None: a built-in kind)
    :return: its declaration
    :raises ValueError: when the kind is still unknown after the import
    """
    if name not in _KINDS and module is not None:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(
                f"run kind {name!r} is registered by module {module!r}, which this process cannot import ({error}): "
                "put it on PYTHONPATH (or install it) where the runs execute"
            ) from error
    return run_kind(name)


def kind_names() -> tuple[str, ...]:
    """The registered kinds' names, in the order they were registered."""
    return tuple(_KINDS)


def registered_kinds() -> Mapping[str, RunKind]:
    """The registered kinds by name (a read-only view)."""
    from types import MappingProxyType

    return MappingProxyType(_KINDS)
