"""
A grid config (YAML or a dict) and its expansion into runs.

A config names the algorithms, tasks, teachers, feedback budgets and seeds of a grid, plus
hyperparameters on top of the per-task defaults (:mod:`sb3_pref.experiments.defaults`). Settings
apply from the least to the most specific: task defaults < ``hyperparameters`` < ``algorithms.<algo>``
< ``tasks.<task>`` < ``tasks.<task>.<algo>``; a task's own ``budgets`` and ``teachers`` replace the grid's.
A config may ``extends: other.yaml`` to take its keys. Every run is checked when the config is loaded,
with the same checks as the example scripts' flags, so a typo fails before the first run starts.
"""

import argparse
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Union, cast

from sb3_pref.experiments.axes import (
    PREFERENCE_ALGORITHMS,
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
    valid_keys,
)
from sb3_pref.experiments.defaults import (
    ALGORITHMS,
    ad_preset,
    algorithm_runs_on,
    default_budgets,
    task_defaults,
    why_not,
)
from sb3_pref.experiments.flags import TEACHER_FLAGS, args_from_mapping, typed_flags

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
)
# Flags a PPO run on the true reward ignores: left out of its settings so that they cannot make it differ.
_PPO_IGNORED_PREFIXES = ("re_", "teacher", "unsuper_")


@dataclass(frozen=True)
class RunSpec:
    """
    One run of a grid, fully resolved: everything it needs to start, or to resume, on any machine.

    :param algo: ``"ppo"``, ``"prefppo"``, ``"pebble"``, ``"sac"``, ``"rl2"`` or ``"ad"``
    :param task: the task name as written in the config
    :param seed: seed of the envs, the networks and the teacher
    :param hyperparameters: the run's settings (B-Pref flag names; B-Pref's ``train_PEBBLE.py`` names for
        pebble / sac; or :data:`~sb3_pref.experiments.defaults.RL2_KEYS`)
    :param teacher: the teacher's name (prefppo and pebble only)
    :param teacher_params: the teacher's ``beta, gamma, eps_mistake, eps_skip, eps_equal`` (prefppo and pebble only)
    :param budget: the feedback budget (prefppo and pebble only)
    :param checkpoint_every: env steps between checkpoints
    :param keep_checkpoints: keep the checkpoints once the run has finished
    """

    algo: str
    task: str
    seed: int
    hyperparameters: dict[str, Any]
    teacher: Optional[str] = None
    teacher_params: Optional[dict[str, float]] = None
    budget: Optional[Budget] = None
    checkpoint_every: int = 100_000
    keep_checkpoints: bool = False

    @property
    def run_id(self) -> str:
        """The run's folder inside the grid's output folder, e.g. ``prefppo/walker_walk/oracle/1000x100/seed0``."""
        parts = [self.algo, self.task]
        if self.algo in PREFERENCE_ALGORITHMS:
            # a prefppo / pebble spec carries a teacher and a budget (RunGrid.expand sets both)
            parts += [cast(str, self.teacher), cast(Budget, self.budget).label]
        return "/".join([*parts, f"seed{self.seed}"])

    @property
    def total_timesteps(self) -> int:
        return int(self.hyperparameters["total_timesteps"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunSpec":
        data = dict(data)
        if data.get("budget") is not None:
            data["budget"] = Budget(**data["budget"])
        return cls(**data)

    def fingerprint(self) -> str:
        """A hash of what decides the run's results (not of its checkpoint settings)."""
        content = {key: value for key, value in self.to_dict().items() if key not in ("checkpoint_every", "keep_checkpoints")}
        content.pop("budget", None)
        if self.budget is not None:
            content["budget"] = [self.budget.max_feed, self.budget.re_batch]
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


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

    def runs(self) -> list[RunSpec]:
        """Every run of the grid, ordered seed by seed (an interrupted grid has whole seeds done first)."""
        runs = []
        for seed in self.seeds:
            for task, task_settings in self.tasks.items():
                for algo in self.algorithms:
                    if algorithm_runs_on(algo, task):
                        runs += self._runs_of(algo, task, task_settings, seed)
        return runs

    def _runs_of(self, algo: str, task: str, task_settings: dict[str, Any], seed: int) -> list[RunSpec]:
        keys = valid_keys(algo)
        settings = _task_defaults(algo, task)
        layers = (self.hyperparameters, self.algorithms[algo], task_settings, task_settings.get(algo, {}))
        if algo == "ad":  # a named preset replaces the defaults; the layers' own keys still override it
            preset = next((layer["preset"] for layer in reversed(layers) if "preset" in layer), settings["preset"])
            try:
                settings = ad_preset(preset)
            except ValueError as error:
                raise ConfigError(f"ad on {task}: {error}") from None
        for layer in layers:
            settings.update({k: v for k, v in layer.items() if k in keys})
        if algo == "ppo":
            settings = {k: v for k, v in settings.items() if not k.startswith(_PPO_IGNORED_PREFIXES)}
        settings = _typed(algo, task, settings)
        total = int(settings["total_timesteps"])
        common: dict[str, Any] = dict(
            algo=algo,
            task=task,
            seed=seed,
            checkpoint_every=int(self.checkpoint_every or max(1, total // 10)),
            keep_checkpoints=self.keep_checkpoints,
        )
        if algo not in PREFERENCE_ALGORITHMS:
            return [RunSpec(hyperparameters=dict(settings), **common)]
        budgets = [parse_budget(b) for b in task_settings["budgets"]] if "budgets" in task_settings else self.budgets
        budgets = budgets or [parse_budget(b) for b in _default_budgets(algo, task)]
        if not budgets:  # a pebble run on a task B-Pref has no PEBBLE script for: no default to fall back on
            raise ConfigError(
                f"tasks.{task}: {algo} needs budgets on {task!r} (B-Pref has none for it): give budgets, e.g. "
                f'budgets: ["1000x100"] at the top level or under tasks.{task}'
            )
        return [
            RunSpec(hyperparameters=dict(settings), teacher=name, teacher_params=params, budget=budget, **common)
            for budget in budgets
            for name, params in (task_settings.get("teachers") or self.teachers or {"oracle": _preset("oracle")}).items()
        ]


def _task_defaults(algo: str, task: str) -> dict[str, Any]:
    if algo in ("pebble", "sac"):
        from sb3_pref.experiments.pebble_runs import pebble_task_defaults

        try:
            return pebble_task_defaults(algo, task)
        except ValueError as error:
            raise ConfigError(f"tasks.{task}: {error}") from None
    return task_defaults(algo, task)


def _default_budgets(algo: str, task: str) -> list[str]:
    if algo == "pebble":
        from sb3_pref.experiments.pebble_runs import pebble_budgets

        return pebble_budgets(task)
    return default_budgets(task)


def _typed(algo: str, task: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Settings converted as the flags (or RL2's checks) convert them: ``3e-4`` (a string to YAML) is 0.0003."""
    try:
        if algo in ("pebble", "sac"):
            from sb3_pref.experiments.pebble_runs import check_pebble_settings

            return check_pebble_settings(algo, task, settings)
        if algo == "rl2":
            from sb3_pref.experiments.rl2_runs import check_rl2_settings

            return check_rl2_settings(task, settings)
        if algo == "ad":
            from sb3_pref.experiments.ad_runs import check_ad_settings

            return check_ad_settings(task, settings)
        return typed_flags(settings)
    except (ValueError, ImportError) as error:
        raise ConfigError(f"{algo} on {task}: {error}") from None


def bpref_args(run: RunSpec) -> argparse.Namespace:
    """
    The flags of a ppo / prefppo run, as ``examples/train_PrefPPO.py`` would parse them.

    :raises ValueError: for a setting the scripts would reject
    """
    values = dict(run.hyperparameters, env=run.task, seed=run.seed)
    if run.algo == "prefppo":
        budget, teacher_params = cast(Budget, run.budget), cast(dict[str, float], run.teacher_params)
        values.update(re_max_feed=budget.max_feed, re_batch=budget.re_batch)
        values.update({option: teacher_params[key] for option, key in TEACHER_FLAGS.items()})
    return args_from_mapping(values, learns_reward=run.algo == "prefppo")


def _validate_run(run: RunSpec) -> None:
    """Check a ppo / prefppo run against each other's flags, as the scripts would (others were checked when built)."""
    if run.algo in ("rl2", "ad", "pebble", "sac"):
        return
    try:
        bpref_args(run)
    except (ValueError, ImportError) as error:
        raise ConfigError(f"run {run.run_id}: {error}") from None


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
    for algo, settings in algorithms.items():
        if algo not in ALGORITHMS:
            raise ConfigError(
                f"algorithms.{algo}: unknown algorithm{_suggest(algo, ALGORITHMS)}; expected {', '.join(ALGORITHMS)}"
            )
        _check_keys(settings, valid_keys(algo), f"algorithms.{algo}")
    every_key = frozenset().union(*(valid_keys(algo) for algo in algorithms))
    hyperparameters = dict(data.get("hyperparameters") or {})
    _check_keys(hyperparameters, every_key, "hyperparameters")
    tasks = _as_mapping(data["tasks"], "tasks")
    for task, settings in tasks.items():
        _check_task_name(task)
        takers = [algo for algo in algorithms if algorithm_runs_on(algo, task)]
        if not takers:
            reasons = "; ".join(why_not(algo, task) for algo in algorithms)
            raise ConfigError(f"tasks.{task}: none of the algorithms {list(algorithms)} runs on it ({reasons})")
        task_keys = frozenset().union(*(valid_keys(algo) for algo in takers))
        _check_keys(settings, task_keys, f"tasks.{task}", extra=("budgets", "teachers", *takers))
        if "teachers" in settings:  # this task's teachers replace the grid's
            settings["teachers"] = _parse_teachers(settings["teachers"])
        for algo in takers:
            if algo in settings:
                _check_keys(settings[algo], valid_keys(algo), f"tasks.{task}.{algo}")
    checkpoint_every = data.get("checkpoint_every")
    if checkpoint_every is not None and (not isinstance(checkpoint_every, int) or checkpoint_every < 1):
        raise ConfigError(f"checkpoint_every: expected env steps >= 1, got {checkpoint_every!r}")
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
    "PREFERENCE_ALGORITHMS",
    "Budget",
    "ConfigError",
    "GridConfig",
    "RunSpec",
    "bpref_args",
    "load_config",
    "parse_budget",
]
