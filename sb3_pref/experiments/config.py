"""
A grid config (YAML or a dict) and its expansion into runs.

A config names the algorithms, tasks, teachers, feedback budgets and seeds of a grid, plus
hyperparameters on top of the per-task defaults (:mod:`sb3_pref.experiments.defaults`). Settings
apply from the least to the most specific: task defaults < ``hyperparameters`` < ``algorithms.<algo>``
< ``tasks.<task>`` < ``tasks.<task>.<algo>``; a task's own ``budgets`` and ``teachers`` replace the grid's.
A config may ``extends: other.yaml`` to take its keys. Every run is checked when the config is loaded,
with the same checks as the example scripts' flags, so a typo fails before the first run starts.
"""

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from sb3_pref.experiments.axes import (
    Budget,
    ConfigError,
    _as_mapping,
    _check_keys,
    _check_task_name,
    _parse_seeds,
    _parse_teachers,
    _preset,
    _suggest,
    parse_budget,
)
from sb3_pref.experiments.registry import RunKind, kind_names, run_kind
from sb3_pref.experiments.spec import EVAL_EPISODES, RunSpec

TOP_LEVEL_KEYS = (
    "extends",
    "name",
    "description",
    "output_dir",
    "algorithms",
    "tasks",
    "teachers",
    "budgets",
    "seeds",
    "hyperparameters",
    "checkpoint_every",
    "keep_checkpoints",
    "eval_episodes",
)


@dataclass
class GridConfig:
    """A parsed grid config; :meth:`runs` expands it. Build it with :func:`load_config`."""

    name: str
    output_dir: str
    algorithms: dict[str, dict[str, Any]]
    tasks: dict[str, dict[str, Any]]
    seeds: list[int]
    teachers: dict[str, dict[str, float]] = field(default_factory=dict)
    budgets: list[Budget] = field(default_factory=list)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    checkpoint_every: Optional[int] = None
    keep_checkpoints: bool = False
    eval_episodes: int = EVAL_EPISODES

    def runs(self) -> list[RunSpec]:
        """Every run of the grid, ordered seed by seed (an interrupted grid has whole seeds done first)."""
        runs = []
        for seed in self.seeds:
            for task, task_settings in self.tasks.items():
                for algo in self.algorithms:
                    if run_kind(algo).runs_on(task):
                        runs += self._runs_of(algo, task, task_settings, seed)
        return runs

    def _runs_of(self, algo: str, task: str, task_settings: dict[str, Any], seed: int) -> list[RunSpec]:
        kind = run_kind(algo)
        try:
            settings = kind.defaults(task)
        except ValueError as error:
            raise ConfigError(f"tasks.{task}: {error}") from None
        layers = (self.hyperparameters, self.algorithms[algo], task_settings, task_settings.get(algo, {}))
        if kind.preset is not None:  # a named preset replaces the defaults; the layers' own keys still override it
            preset = next((layer["preset"] for layer in reversed(layers) if "preset" in layer), settings["preset"])
            try:
                settings = kind.preset(preset)
            except ValueError as error:
                raise ConfigError(f"{algo} on {task}: {error}") from None
        for layer in layers:
            settings.update({k: v for k, v in layer.items() if k in kind.keys})
        try:  # numbers as the flags (or the kind's checks) convert them: ``3e-4`` (a string to YAML) is 0.0003
            settings = kind.check(task, settings)
        except (ValueError, ImportError) as error:
            raise ConfigError(f"{algo} on {task}: {error}") from None
        total = int(settings["total_timesteps"])
        common: dict[str, Any] = dict(
            algo=algo,
            task=task,
            seed=seed,
            checkpoint_every=int(self.checkpoint_every or max(1, total // 10)),
            keep_checkpoints=self.keep_checkpoints,
            eval_episodes=self.eval_episodes,
        )
        if not kind.learns_preferences:
            return [RunSpec(hyperparameters=dict(settings), **common)]
        budgets = [parse_budget(b) for b in task_settings["budgets"]] if "budgets" in task_settings else self.budgets
        budgets = budgets or [parse_budget(b) for b in kind.budgets(task)]
        if not budgets:  # e.g. a pebble run on a task B-Pref has no PEBBLE script for: no default to fall back on
            raise ConfigError(
                f"tasks.{task}: {algo} needs budgets on {task!r} (B-Pref has none for it): give budgets, e.g. "
                f'budgets: ["1000x100"] at the top level or under tasks.{task}'
            )
        return [
            RunSpec(hyperparameters=dict(settings), teacher=name, teacher_params=params, budget=budget, **common)
            for budget in budgets
            for name, params in (task_settings.get("teachers") or self.teachers or {"oracle": _preset("oracle")}).items()
        ]


def _validate_run(run: RunSpec) -> None:
    """Check a whole run with its kind's last check (ppo / prefppo: the flags against each other, as the scripts do)."""
    validate = run_kind(run.algo).validate
    if validate is None:
        return
    try:
        validate(run)
    except (ValueError, ImportError) as error:
        raise ConfigError(f"run {run.run_id}: {error}") from None


def _kinds_on(kinds: Mapping[str, RunKind], task: str) -> list[str]:
    """The names of the kinds that run on ``task``."""
    return [name for name, kind in kinds.items() if kind.runs_on(task)]


def _parse_run_settings(data: Mapping[str, Any]) -> tuple[Optional[int], int]:
    """:return: the config's ``checkpoint_every`` (None: a tenth of each run) and ``eval_episodes``, checked"""
    checkpoint_every = data.get("checkpoint_every")
    if checkpoint_every is not None and (not isinstance(checkpoint_every, int) or checkpoint_every < 1):
        raise ConfigError(f"checkpoint_every: expected env steps >= 1, got {checkpoint_every!r}")
    eval_episodes = data.get("eval_episodes", EVAL_EPISODES)
    if isinstance(eval_episodes, bool) or not isinstance(eval_episodes, int) or eval_episodes < 0:
        raise ConfigError(f"eval_episodes: expected a number of episodes >= 0 (0 skips the evaluation), got {eval_episodes!r}")
    return checkpoint_every, eval_episodes


def load_config(source: Union[str, os.PathLike, Mapping[str, Any]], output_dir: Optional[str] = None) -> GridConfig:
    """
    Read and check a grid config.

    :param source: a YAML (or JSON) file, or the config as a dict
    :param output_dir: overrides the config's ``output_dir`` (default: ``runs/<name>``)
    :return: the config; every run it expands to has been checked
    :raises ConfigError: naming the setting to change
    """
    data, default_name = _source_data(source)
    unknown = set(data) - set(TOP_LEVEL_KEYS)
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(f"{key}: unknown config key{_suggest(key, TOP_LEVEL_KEYS)}")
    for required in ("algorithms", "tasks", "seeds"):
        if data.get(required) is None:
            raise ConfigError(f"{required}: required")
        if required != "seeds" and not data[required]:
            raise ConfigError(f"{required}: empty; list at least one")
    algorithms = _as_mapping(data["algorithms"], "algorithms")
    known = kind_names()
    for algo, settings in algorithms.items():
        if algo not in known:
            raise ConfigError(f"algorithms.{algo}: unknown algorithm{_suggest(algo, known)}; expected {', '.join(known)}")
        _check_keys(settings, run_kind(algo).keys, f"algorithms.{algo}")
    kinds = {algo: run_kind(algo) for algo in algorithms}
    every_key = frozenset().union(*(kind.keys for kind in kinds.values()))
    hyperparameters = dict(data.get("hyperparameters") or {})
    _check_keys(hyperparameters, every_key, "hyperparameters")
    tasks = _as_mapping(data["tasks"], "tasks")
    for task, settings in tasks.items():
        _check_task_name(task)
        takers = _kinds_on(kinds, task)
        if not takers:
            reasons = "; ".join(f"{kind.why_not(task)}" for kind in kinds.values())
            raise ConfigError(f"tasks.{task}: none of the algorithms {list(algorithms)} runs on it ({reasons})")
        task_keys = frozenset().union(*(kinds[algo].keys for algo in takers))
        _check_keys(settings, task_keys, f"tasks.{task}", extra=("budgets", "teachers", *takers))
        if "teachers" in settings:  # this task's teachers replace the grid's
            settings["teachers"] = _parse_teachers(settings["teachers"])
        for algo in takers:
            if algo in settings:
                _check_keys(settings[algo], kinds[algo].keys, f"tasks.{task}.{algo}")
    checkpoint_every, eval_episodes = _parse_run_settings(data)
    config = GridConfig(
        name=str(data.get("name") or default_name),
        description=str(data.get("description") or "").strip(),
        output_dir=output_dir or str(data.get("output_dir") or os.path.join("runs", str(data.get("name") or default_name))),
        algorithms=algorithms,
        tasks=tasks,
        seeds=_parse_seeds(data["seeds"]),
        teachers=_parse_teachers(data.get("teachers")),
        budgets=[parse_budget(b) for b in (data.get("budgets") or [])],
        hyperparameters=hyperparameters,
        checkpoint_every=checkpoint_every,
        keep_checkpoints=bool(data.get("keep_checkpoints", False)),
        eval_episodes=eval_episodes,
    )
    runs = config.runs()
    seen: dict[str, RunSpec] = {}
    for run in runs:
        if run.run_id in seen:
            raise ConfigError(f"two runs share the folder {run.run_id}: give the budgets distinct names")
        seen[run.run_id] = run
        _validate_run(run)
    return config


def _source_data(source: Union[str, os.PathLike, Mapping[str, Any]]) -> tuple[dict[str, Any], str]:
    """The config's keys (with those of the config it ``extends``) and the grid's default name."""
    if isinstance(source, Mapping):
        data, default_name, folder = dict(source), "grid", None
    else:
        path = os.fspath(source)
        data, default_name, folder = _read_file(path), os.path.splitext(os.path.basename(path))[0], os.path.dirname(path)
    return (_extend(data, folder) if "extends" in data else data), default_name


def _extend(data: dict[str, Any], folder: Optional[str]) -> dict[str, Any]:
    """
    A config that ``extends`` another: the other's top-level keys, each replaced whole by this one's
    (a grid of extra runs that shares a grid's settings and output folder without repeating them).
    """
    base_path = str(data.pop("extends"))
    if folder is not None and not os.path.isabs(base_path):
        base_path = os.path.join(folder, base_path)
    if not os.path.exists(base_path):
        raise ConfigError(f"extends: {base_path} does not exist (a path relative to the config's folder)")
    base = _read_file(base_path)
    if "extends" in base:
        raise ConfigError(f"extends: {base_path} extends another config itself; extend that one")
    return {**base, **data}


def _read_file(path: str) -> dict[str, Any]:
    with open(path) as handle:
        text = handle.read()
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path}: not valid JSON: {error}") from None
    else:
        try:
            import yaml
        except ImportError as error:
            from sb3_pref.envs.optional import install_hint

            raise ImportError(f"reading YAML configs needs PyYAML: {install_hint('experiments')}") from error
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


__all__ = [
    "Budget",
    "ConfigError",
    "GridConfig",
    "RunSpec",
    "load_config",
    "parse_budget",
]
