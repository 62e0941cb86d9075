"""
A grid config (YAML or a dict) and its expansion into runs.

A config names the algorithms, tasks, teachers, feedback budgets and seeds of a grid, plus
hyperparameters on top of the per-task defaults (:mod:`sb3_pref.experiments.defaults`). Settings
apply from the least to the most specific: task defaults < ``hyperparameters`` < ``algorithms.<algo>``
< ``tasks.<task>`` < ``tasks.<task>.<algo>``. Every run is checked when the config is loaded, with
the same checks as the example scripts' flags, so a typo fails before the first run starts.
"""

import argparse
import difflib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any, Optional, Union, cast

from sb3_pref.common.teachers import ScriptedTeacher
from sb3_pref.experiments.defaults import (
    AD_KEYS,
    ALGORITHMS,
    RL2_KEYS,
    ad_preset,
    algorithm_runs_on,
    default_budgets,
    task_defaults,
    why_not,
)
from sb3_pref.experiments.flags import TEACHER_FLAGS, args_from_mapping, flag_names, typed_flags

TOP_LEVEL_KEYS = (
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
# Set by the grid's axes or by the runner, never as hyperparameters.
_RESERVED = {
    "env": "list the task under tasks",
    "seed": "list it under seeds",
    "tensorboard_log": "the runner chooses the run folders",
    "output_dir": "set output_dir at the top level",
    "teacher": "list teachers under teachers",
    "re_max_feed": "set budgets",
    "re_batch": "set budgets",
    # B-Pref's train_PEBBLE.py names (pebble and sac runs)
    "num_train_steps": "set total_timesteps",
    "max_feedback": "set budgets",
    "reward_batch": "set budgets",
    "device": "grid runs train on the CPU",
    **{name: "define a teacher under teachers" for name in TEACHER_FLAGS},
}
# Flags a PPO run on the true reward ignores: left out of its settings so that they cannot make it differ.
_PPO_IGNORED_PREFIXES = ("re_", "teacher", "unsuper_")


class ConfigError(ValueError):
    """A config that cannot run, with where in the config the problem is."""


@cache
def _bpref_keys() -> frozenset:
    return frozenset(flag_names()) - set(_RESERVED)


#: the algorithms that learn from preferences: their runs have a teacher and a budget
PREFERENCE_ALGORITHMS = ("prefppo", "pebble")


def valid_keys(algo: str) -> frozenset:
    """The hyperparameter names ``algo`` takes."""
    if algo in ("pebble", "sac"):
        from sb3_pref.experiments.pebble_runs import PEBBLE_KEYS, SAC_KEYS

        return frozenset(PEBBLE_KEYS if algo == "pebble" else SAC_KEYS)
    if algo == "ad":
        return frozenset(AD_KEYS)
    return frozenset(RL2_KEYS) if algo == "rl2" else _bpref_keys()


@dataclass(frozen=True)
class Budget:
    """A feedback budget: ``max_feed`` labels in all, ``re_batch`` per query round."""

    max_feed: int
    re_batch: int
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or f"{self.max_feed}x{self.re_batch}"


def parse_budget(value: Union[str, int, Mapping[str, Any]]) -> Budget:
    """
    :param value: ``"1000x100"``, ``1000`` (``re_batch`` = a tenth) or ``{max_feed: 1000, re_batch: 100, name: small}``
    :return: the budget
    """
    try:
        if isinstance(value, Mapping):
            unknown = set(value) - {"max_feed", "re_batch", "name"}
            if unknown:
                raise ValueError(f"unknown budget keys {sorted(unknown)}")
            max_feed = int(value["max_feed"])
            budget = Budget(max_feed, int(value.get("re_batch", max(1, max_feed // 10))), str(value.get("name", "")))
        elif isinstance(value, str) and "x" in value:
            feed_text, batch_text = value.lower().split("x")
            budget = Budget(int(feed_text), int(batch_text))
        else:
            budget = Budget(int(value), max(1, int(value) // 10))
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"budget {value!r}: expected '1000x100', 1000 or {{max_feed: 1000, re_batch: 100}} ({error})"
        ) from None
    if budget.max_feed < 1 or not 1 <= budget.re_batch <= budget.max_feed:
        raise ConfigError(f"budget {value!r}: need max_feed >= re_batch >= 1")
    return budget


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
        return [
            RunSpec(hyperparameters=dict(settings), teacher=name, teacher_params=params, budget=budget, **common)
            for budget in budgets
            for name, params in (self.teachers or {"oracle": _preset("oracle")}).items()
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


def _preset(name: str) -> dict[str, float]:
    return {key: float(value) for key, value in ScriptedTeacher.PRESETS[name].items()}


def _suggest(name: str, known: Any) -> str:
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _as_mapping(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """A list of names or a mapping name -> settings, as a mapping (None settings become {})."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return {str(item): {} for item in value}
    if isinstance(value, Mapping):
        result = {}
        for key, settings in value.items():
            if settings is not None and not isinstance(settings, Mapping):
                raise ConfigError(f"{where}.{key}: expected a mapping of settings, got {settings!r}")
            result[str(key)] = dict(settings or {})
        return result
    raise ConfigError(f"{where}: expected a list or a mapping, got {value!r}")


def _check_keys(settings: Mapping[str, Any], allowed: frozenset, where: str, extra: tuple[str, ...] = ()) -> None:
    for key in settings:
        if key in extra:
            continue
        if key in _RESERVED:
            raise ConfigError(f"{where}.{key}: not a hyperparameter: {_RESERVED[key]}")
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown hyperparameter{_suggest(key, allowed)}")


def _parse_teachers(value: Any) -> dict[str, dict[str, float]]:
    teachers = {}
    for name, settings in _as_mapping(value or [], "teachers").items():
        if not settings:
            if name not in ScriptedTeacher.PRESETS:
                hint = _suggest(name, ScriptedTeacher.PRESETS)
                raise ConfigError(f"teachers.{name}: not a preset{hint}; define it as {{beta: ..., eps_mistake: ...}}")
            teachers[name] = _preset(name)
            continue
        base = _preset(settings.pop("preset", "oracle"))
        unknown = set(settings) - set(base)
        if unknown:
            raise ConfigError(f"teachers.{name}: unknown keys {sorted(unknown)} (known: {', '.join(base)})")
        teachers[name] = {**base, **{key: float(v) for key, v in settings.items()}}
    return teachers


def _check_task_name(task: str) -> None:
    """An unknown task is a config error now, not a failed run later (skipped when the suite is not installed)."""
    from sb3_pref.experiments.defaults import task_family

    family = task_family(task)
    try:
        if family == "dmc":
            from sb3_pref.envs.dmc import parse_dmcontrol_name

            parse_dmcontrol_name(task)
        elif family == "metaworld":
            from sb3_pref.envs.metaworld import resolve_metaworld_name

            resolve_metaworld_name(task)
    except ImportError:
        return
    except ValueError as error:
        raise ConfigError(f"tasks.{task}: unknown task: {error}") from None


def _parse_seeds(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool) and value < 1:
        raise ConfigError(f"seeds: {value!r} runs nothing; give a count >= 1 (seeds: 3) or a list of seeds (seeds: [0, 1])")
    seeds = list(range(value)) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise ConfigError(f"seeds: expected a count or a list of integers >= 0, got {value!r}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds: {seeds} has duplicates")
    return seeds


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
    if isinstance(source, Mapping):
        data, default_name = dict(source), "grid"
    else:
        data, default_name = _read_file(os.fspath(source)), os.path.splitext(os.path.basename(source))[0]
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
        _check_keys(settings, task_keys, f"tasks.{task}", extra=("budgets", *takers))
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
            raise ImportError("reading YAML configs needs PyYAML: pip install 'sb3_pref[experiments]'") from error
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data
