"""
Argument checks shared by the preference core and the algorithms that use it.

Every check raises before any training starts, with a message that names the argument, the value
received and what to pass instead: a wrong type raises ``TypeError``, an impossible value ``ValueError``.
"""

import os
import zipfile
from typing import Any, Optional

from sb3_pref.common.checks import _type_name, check_bool, check_int, check_optional_int, check_positive_float
from sb3_pref.common.query import resolve_query_method
from sb3_pref.common.reward_model import RewardModel
from sb3_pref.common.teachers import BaseTeacher, ScriptedTeacher


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


def validate_preference_args(
    reward_model: Any,
    teacher: Any,
    num_interaction: Any,
    feed_type: Any,
    re_update: Any,
    max_feed: Any,
    unsuper_step: Any,
    unsuper_n_epochs: Any,
    size_segment: Any,
    max_ep_len: Any,
    unsuper_flag: Any,
    normalize_reward: Any,
    anneal_reward_lr: Any,
    segment_capacity: Any,
    entropy_k: Any,
) -> dict[str, Any]:
    """
    Check the preference arguments of :class:`~sb3_pref.common.sb3_glue.PreferenceRewardMixin`
    (same names, same meaning) and return them normalised (ints as ``int``, flags as ``bool``,
    ``feed_type`` as given). Nothing is modified, the reward model included.

    :return: the checked values by argument name
    """
    if reward_model is not None and not isinstance(reward_model, RewardModel):
        raise ValueError(f"reward_model must be a sb3_pref.RewardModel or None, got {_type_name(reward_model)}")
    check_teacher("teacher", teacher)
    if unsuper_flag is not None and (isinstance(unsuper_flag, bool) or unsuper_flag not in (0, 1, 2)):
        raise ValueError(f"unsuper_flag must be 0 (no pretraining), 1 or 2, got {unsuper_flag!r}")
    resolve_query_method(feed_type)
    checked = {
        "num_interaction": check_int("num_interaction", num_interaction, 1, 16000),
        "re_update": check_int("re_update", re_update, 1, 100),
        "max_feed": check_int("max_feed", max_feed, 0, 1400),
        "unsuper_step": check_int("unsuper_step", unsuper_step, 0, 32000),
        "unsuper_n_epochs": check_optional_int("unsuper_n_epochs", unsuper_n_epochs, 1, 50),
        "size_segment": check_optional_int("size_segment", size_segment, 1, 50),
        "max_ep_len": check_optional_int("max_ep_len", max_ep_len, 1, 1000),
        "segment_capacity": check_int("segment_capacity", segment_capacity, 1, 100_000),
        "entropy_k": check_int("entropy_k", entropy_k, 1, 5),
        "normalize_reward": check_bool("normalize_reward", normalize_reward),
        "anneal_reward_lr": check_bool("anneal_reward_lr", anneal_reward_lr),
    }
    size_segment, max_ep_len = checked["size_segment"], checked["max_ep_len"]
    if size_segment is not None and max_ep_len is not None and size_segment > max_ep_len:
        raise ValueError(f"size_segment={size_segment} is longer than max_ep_len={max_ep_len}: lower size_segment")
    if reward_model is not None:
        # (max_feed against mb_size is checked by the learner, after the spaces: the more basic mistake first.)
        segment = size_segment if size_segment is not None else reward_model.size_segment
        if max_ep_len is not None and segment > max_ep_len:
            raise ValueError(f"reward_model.size_segment={segment} is longer than max_ep_len={max_ep_len}: lower size_segment")
    return checked


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


def check_saved_model_file(path: Any) -> None:
    """
    Before SB3 reads a saved model: a truncated or corrupted ``.zip`` raises one clear ``ValueError``
    naming the file (instead of SB3's assertion on missing data). Open file objects are left to SB3.

    :param path: what was passed to ``load()``
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


__all__ = [
    "ARCHITECTURE_KEYS",
    "check_bool",
    "check_int",
    "check_optional_int",
    "check_positive_float",
    "check_same_reward_model",
    "check_saved_model_file",
    "check_segment_fits",
    "check_teacher",
    "episode_step_limits",
    "validate_preference_args",
]
