"""
Argument checks shared by the preference core and the algorithms that use it.

Every check raises before any training starts, with a message that names the argument, the value
received and what to pass instead: a wrong type raises ``TypeError``, an impossible value ``ValueError``.
The ``(name, value) -> value`` checks are those of the preference options (:mod:`sb3_pref.common.options`).
"""

import json
import math
import os
import re
import zipfile
from typing import Any, Optional, Union

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import BasePolicy

from sb3_pref.core.checks import _type_name, check_bool, check_int, check_optional_int, check_positive_float
from sb3_pref.core.query import resolve_query_method
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.reward_training import check_schedule
from sb3_pref.core.teachers import BaseTeacher, ScriptedTeacher


def check_teacher(name: str, teacher: Any) -> None:
    """None, a :class:`BaseTeacher` or the name of a B-Pref preset."""
    if teacher is None or isinstance(teacher, BaseTeacher):
        return
    presets = ", ".join(ScriptedTeacher.PRESETS)
    if isinstance(teacher, str):
        if teacher not in ScriptedTeacher.PRESETS:
            raise ValueError(f"{name}={teacher!r} is not a teacher preset: choose one of {presets}, or pass a BaseTeacher")
        return
    raise TypeError(f"{name} must be a BaseTeacher, a preset name ({presets}) or None, got a {_type_name(teacher)}")


def check_reward_model(name: str, value: Any) -> Optional[RewardModel]:
    """None or a :class:`RewardModel`."""
    if value is not None and not isinstance(value, RewardModel):
        raise ValueError(f"{name} must be a sb3_pref.RewardModel or None, got {_type_name(value)}")
    return value


def check_teacher_option(name: str, value: Any) -> Union[BaseTeacher, str, None]:
    """:func:`check_teacher`, returning the value."""
    check_teacher(name, value)
    return value


def check_feed_type(name: str, value: Any) -> Union[int, str, None]:
    """None (chosen by ``feedback_schedule``) or a query method: 0-5 or a name."""
    if value is not None:
        resolve_query_method(value)  # raises for an unknown method; the value is kept as given (0-5 or a name)
    return value


def check_unsuper_flag(name: str, value: Any) -> Optional[int]:
    """None (the class's default) or 0, 1, 2 (a bool is refused: it would read as 0 or 1)."""
    if value is not None and (isinstance(value, bool) or value not in (0, 1, 2)):
        raise ValueError(f"{name} must be 0 (no pretraining), 1 or 2, got {value!r}")
    return value


def check_reference_source(name: str, value: Any) -> Any:
    """None, ``"initial"``, an SB3 policy or model, or the path of a saved model that exists."""
    if not (value is None or isinstance(value, (BasePolicy, BaseAlgorithm, os.PathLike, str))):
        raise ValueError(
            f"{name} must be None, 'initial', an SB3 policy or model, or the path of a saved model, got {type(value).__name__}"
        )
    if isinstance(value, (str, os.PathLike)) and value != "initial":
        path = os.fspath(value)
        if not (os.path.isfile(path) or os.path.isfile(path + ".zip")):
            raise ValueError(f"{name}={path!r} is neither 'initial' nor an existing file: pass the path given to model.save()")
    return value


def check_kl_coef(name: str, value: Any) -> float:
    """A KL coefficient >= 0, as a float."""
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return float(value)


def check_rune_beta(name: str, value: Any) -> float:
    """RUNE's bonus weight: a finite number >= 0 (0: no bonus)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (e.g. 0.05, RUNE's for PEBBLE; 0 turns it off), got {value!r}")
    return float(value)


def check_rune_decay(name: str, value: Any) -> float:
    """RUNE's decay per env step: in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1) (e.g. 1e-5, RUNE's for PEBBLE; 0 keeps beta constant), got {value!r}")
    return float(value)


def check_kl_target(name: str, value: Any) -> Optional[float]:
    """None (fixed coefficient) or a target KL > 0."""
    if value is not None and value <= 0:
        raise ValueError(f"{name} must be > 0 nats per step (or None for a fixed kl_coef), got {value}")
    return value


def check_kl_horizon(name: str, value: Any) -> int:
    """A horizon of at least one env step, as an int."""
    if value < 1:
        raise ValueError(f"{name} must be a positive number of env steps, got {value}")
    return int(value)


def check_samples(name: str, value: Any) -> str:
    """What the reward's gain/bias are fitted on: ``"recent"`` or ``"reference"``."""
    if value not in ("recent", "reference"):
        raise ValueError(f"{name} must be 'recent' or 'reference', got {value!r}")
    return value


def check_count(name: str, value: Any, minimum: int) -> int:
    """An int >= ``minimum`` (numpy ints too), with the off-policy options' message."""
    if not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def check_schedule_option(name: str, value: Any) -> str:
    """One of the reward-training schedules (:func:`~sb3_pref.core.reward_training.check_schedule`)."""
    return check_schedule(value, name)


def episode_step_limits(env: Any) -> list[Optional[int]]:
    """
    :param env: a VecEnv
    :return: each env's ``spec.max_episode_steps`` (None where unknown)
    """
    try:
        specs = env.get_attr("spec")
    except AttributeError:
        return [None] * env.num_envs
    return [getattr(spec, "max_episode_steps", None) for spec in specs]


def check_segment_fits(size_segment: int, env: Any, segment_capacity: int) -> None:
    """
    Catch, before training, a segment length that can never be cut from the env's episodes or from
    the segment store (the query rounds would otherwise wait for data forever).

    :param size_segment: the segment length in use
    :param env: the training VecEnv (None: only the store is checked)
    :param segment_capacity: transitions the segment store keeps over all envs
    """
    if env is not None:
        limits = [limit for limit in episode_step_limits(env) if limit is not None]
        if limits and size_segment > min(limits):
            raise ValueError(
                f"size_segment={size_segment} is longer than the env's episodes (spec.max_episode_steps={min(limits)}): "
                f"no segment can be cut from them; pass size_segment <= {min(limits)}"
            )
        per_env = max(1, segment_capacity // env.num_envs)
        if per_env < size_segment:
            raise ValueError(
                f"segment_capacity={segment_capacity} keeps {per_env} steps per env ({env.num_envs} envs), fewer "
                f"than size_segment={size_segment}: pass segment_capacity >= {size_segment * env.num_envs}"
            )


#: Reward-model settings that decide the shape of its weights or of its stored segments: a model
#: handed to ``load()`` must agree with the saved one on all of them.
ARCHITECTURE_KEYS = ("obs_space", "act_space", "size_segment", "ensemble_size", "hidden_dim", "n_layers", "activation")


def check_same_reward_model(saved: dict[str, Any], given: dict[str, Any]) -> None:
    """
    :param saved: ``get_config()`` of the reward model the file was saved with
    :param given: ``get_config()`` of the reward model passed to ``load()``
    """
    differ = [key for key in ARCHITECTURE_KEYS if saved.get(key) != given.get(key)]
    if differ:
        details = ", ".join(f"{key}: saved {saved.get(key)!r}, given {given.get(key)!r}" for key in differ)
        raise ValueError(
            f"reward_model passed to load() differs from the saved one ({details}): leave reward_model out "
            "to rebuild the saved one, or build it with the saved settings"
        )


#: where the library's own policies live -> the algorithm whose saved files hold them
_SAVED_BY = {
    "stable_baselines3.common.policies": "PPO_REWARD (or SB3's PPO)",
    "stable_baselines3.sac.policies": "SAC_REWARD (or SB3's SAC)",
    "sb3_pref.rl2.policies": "RL2",
}


def check_env_kind(env: Any) -> None:
    """
    Before SB3 wraps the env: a raw dm_control ``Environment`` gets an error naming the ids that build it as a
    gymnasium env (SB3's own message speaks of OpenAI Gym). Anything else is left to SB3's checks.

    :param env: the ``env`` argument of the algorithm
    """
    module = type(env).__module__
    if not module.startswith("dm_control."):
        return
    from sb3_pref.envs.registration import DMC_TASKS, dmc_env_id

    domain = type(getattr(env, "task", None)).__module__.rsplit(".", 1)[-1]
    ids = [dmc_env_id(d, t) for d, t in DMC_TASKS if d == domain] or [dmc_env_id("cartpole", "balance")]
    raise TypeError(
        f"env is a raw dm_control {type(env).__name__}, not a gymnasium env: build it by id with "
        f"sb3_pref.envs.make_vec_dmcontrol_env({ids[0]!r}, n_envs=8) or gymnasium.make({ids[0]!r}) after "
        f"import sb3_pref.envs (this domain's ids: {', '.join(ids)})"
    )


def check_saved_model_file(path: Any, algorithm: Optional[type] = None) -> None:
    """
    Before SB3 reads a saved model: a truncated or corrupted ``.zip`` raises one clear ``ValueError``
    naming the file (instead of SB3's assertion on missing data), and so does a file another algorithm saved
    (instead of an ``AttributeError`` from deep inside SB3). Open file objects are left to SB3.

    :param path: what was passed to ``load()``
    :param algorithm: the class whose ``load`` was called
    """
    if not isinstance(path, (str, os.PathLike)):
        return
    path = os.fspath(path)
    if not os.path.exists(path) and os.path.exists(path + ".zip"):
        path += ".zip"  # SB3 adds the suffix the same way
    if not os.path.exists(path):
        raise FileNotFoundError(f"path={path!r} does not exist: pass the .zip written by model.save()")
    try:
        with zipfile.ZipFile(path) as archive:
            missing = {"data", "policy.pth"} - set(archive.namelist())
            damaged = archive.testzip()
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        raise ValueError(
            f"path={path!r} is not a readable saved model ({error}): the file is truncated or corrupted; "
            "load an older checkpoint (AtomicCheckpointCallback never leaves a torn one)"
        ) from error
    if missing or damaged is not None:
        what = f"lacks {sorted(missing)}" if missing else f"has a damaged member {damaged!r}"
        raise ValueError(f"path={path!r} {what}: it is not a complete model saved by model.save(); load an older checkpoint")
    if algorithm is not None:
        check_saved_by(path, algorithm)


def check_saved_by(path: str, algorithm: type) -> None:
    """
    A file saved by another algorithm of the library (its policy is one of the library's and not one of
    ``algorithm``'s) raises a ``ValueError`` naming the class to load it with. Custom policy classes are left to SB3.

    :param path: a readable saved model
    :param algorithm: the class whose ``load`` was called
    """
    with zipfile.ZipFile(path) as archive:
        try:
            saved = json.loads(archive.read("data")).get("policy_class", {})
        except ValueError:
            return  # SB3 reports what it cannot parse
    module = saved.get("__module__") if isinstance(saved, dict) else None
    # SB3 stores the class as pickled bytes plus its attributes as text; the constructor's text names the class.
    name = re.match(r"<function (\w+)\.__init__", str(saved.get("__init__", ""))) if module else None
    if module not in _SAVED_BY or name is None:
        return
    own = {(policy.__module__, policy.__name__) for policy in getattr(algorithm, "policy_aliases", {}).values()}
    if not own or (module, name.group(1)) in own:
        return
    raise ValueError(
        f"path={path!r} was saved by {_SAVED_BY[module]} (its policy is {name.group(1)}), not by {algorithm.__name__}: "
        f"load it with {_SAVED_BY[module].split(' ')[0]}.load()"
    )


def check_reward_model_arguments(
    reward_model: Optional[RewardModel],
    reward_model_kwargs: Optional[dict[str, Any]],
    arguments: dict[str, Any],
    defaults: dict[str, Any],
) -> None:
    """
    A reward model is given once, as an object or as ``RewardModel`` arguments; without one, no option that only
    applies to preference learning may differ from its default (a config would silently train on the env's reward).

    :param reward_model: the ``reward_model`` argument
    :param reward_model_kwargs: the ``reward_model_kwargs`` argument
    :param arguments: the preference options given, by name
    :param defaults: the options that only apply with a reward model, and their defaults
    """
    if reward_model is not None and reward_model_kwargs is not None:
        raise ValueError("reward_model and reward_model_kwargs were both given: pass one of them")
    if reward_model_kwargs is not None and not isinstance(reward_model_kwargs, dict):
        raise ValueError(f"reward_model_kwargs must be a dict of RewardModel arguments, got {reward_model_kwargs!r}")
    for key in ("obs_dim", "act_dim"):
        if key in (reward_model_kwargs or {}):
            raise ValueError(f"reward_model_kwargs must not contain {key!r}: the env's spaces are used")
    if reward_model is not None or reward_model_kwargs is not None:
        return
    given = [name for name, default in defaults.items() if name in arguments and arguments[name] != default]
    if given:
        raise ValueError(
            f"{', '.join(given)} given without a reward model: they only apply to preference learning. Pass "
            "reward_model=RewardModel(env.observation_space, env.action_space, ...) or reward_model_kwargs={...} "
            "(e.g. in a YAML config), or remove them to train on the env's reward"
        )


def check_reward_model_fits(model: RewardModel, obs_dim: int, act_dim: int, space_hint: str, note: str = "") -> None:
    """
    The reward model must see the algorithm's reward features.

    :param model: the reward model given or rebuilt
    :param obs_dim: the width of the observation features the algorithm computes
    :param act_dim: the width of its action features
    :param space_hint: the first argument of ``RewardModel`` in the error's fix (a Python expression)
    :param note: why, appended to the error (empty: nothing)
    """
    if (model.obs_dim, model.act_dim) != (obs_dim, act_dim):
        raise ValueError(
            f"reward_model was built for obs_dim={model.obs_dim}, act_dim={model.act_dim}, but it must see "
            f"obs_dim={obs_dim}, act_dim={act_dim}: build it with RewardModel({space_hint}, env.action_space, ...){note}"
        )


def check_teacher_class(saved_class: Optional[str], teacher: Any, given_at_load: Union[bool, str]) -> str:
    """
    A loaded model continues with a teacher of the class it was trained with, unless one is given to ``load()``
    (then the caller's teacher is used: its settings win over the saved ones, and where its class differs none of
    the saved teacher state applies to it).

    :param saved_class: the teacher class saved with the model (None: none saved, or a new model)
    :param teacher: the teacher the run goes on with
    :param given_at_load: whether (and how) a teacher was given to ``load()``
    :return: the class name to save from now on
    """
    if not given_at_load and saved_class not in (None, type(teacher).__name__):
        raise ValueError(
            f"this model was trained with a teacher of class {saved_class}, which is not saved with it: pass one to "
            f"load(), e.g. load(path, env=env, teacher={saved_class}(...))"
        )
    return type(teacher).__name__


__all__ = [
    "ARCHITECTURE_KEYS",
    "check_bool",
    "check_count",
    "check_feed_type",
    "check_int",
    "check_kl_coef",
    "check_kl_horizon",
    "check_kl_target",
    "check_optional_int",
    "check_positive_float",
    "check_reference_source",
    "check_reward_model",
    "check_reward_model_arguments",
    "check_reward_model_fits",
    "check_same_reward_model",
    "check_samples",
    "check_saved_model_file",
    "check_schedule_option",
    "check_segment_fits",
    "check_teacher",
    "check_teacher_class",
    "check_teacher_option",
    "check_unsuper_flag",
    "episode_step_limits",
]
