"""
The axes of a grid config, each read and checked on its own: hyperparameter names, feedback budgets,
teachers, task names and seeds. :mod:`sb3_pref.experiments.config` combines them into runs.
"""

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from sb3_pref.core.teachers import ScriptedTeacher
from sb3_pref.envs.factory import task_family

# Set by the grid's axes or by the runner, never as hyperparameters.
RESERVED = {
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
    # B-Pref's --teacher-* flags and train_PEBBLE.py keys, one per ScriptedTeacher argument
    **{f"teacher_{name}": "define a teacher under teachers" for name in ScriptedTeacher.PRESETS["oracle"]},
}


class ConfigError(ValueError):
    """A config that cannot run, with where in the config the problem is."""


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
        if key in RESERVED:
            raise ConfigError(f"{where}.{key}: not a hyperparameter: {RESERVED[key]}")
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
