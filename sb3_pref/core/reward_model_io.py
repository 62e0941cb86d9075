"""
The reward model's file format: its constructor arguments as plain data, and the weights and optimizer
state written with ``th.save`` (loadable with ``weights_only=True``).

Separate from :mod:`sb3_pref.core.reward_model` so the model's maths (prediction, Bradley-Terry
training) and the format of what is written to disk change independently; ``RewardModel.get_config``,
``from_config``, ``save`` and ``load`` call these functions and remain the API.
"""

import os
from typing import Any, Optional, Union

import torch as th

from sb3_pref.core.preprocessing import describe_space, space_from_description
from sb3_pref.core.teachers import BaseTeacher

# The functions take the model (or its class) as ``Any``: importing RewardModel here, even for type checkers only,
# would close a circle with reward_model.py, whose typed methods (get_config, from_config, save, load) are the API.


def reward_model_config(model: Any) -> dict[str, Any]:
    """:return: the model's plain-data constructor arguments (the teacher is not part of the model's file)"""
    return {
        "obs_space": describe_space(model.encoder.observation_space),
        "act_space": describe_space(model.encoder.action_space),
        "size_segment": model.size_segment,
        "activation": model.activation,
        "lr": model.lr,
        "mb_size": model.mb_size,
        "initial_mb_size": model.initial_mb_size,
        "large_batch": model.large_batch,
        "ensemble_size": model.ensemble_size,
        "hidden_dim": model.hidden_dim,
        "n_layers": model.n_layers,
        "train_batch_size": model.train_batch_size,
        "label_margin": model.label_margin,
        "train_dtype": model.requested_train_dtype,
        "input_norm": model.input_norm,
    }


def reward_model_from_config(
    cls: Any,
    config: dict[str, Any],
    teacher: Optional[BaseTeacher] = None,
    device: Union[str, th.device] = "auto",
) -> Any:
    """:return: a new ``cls`` built from :func:`reward_model_config`'s output (fresh weights)"""
    # ``cls`` is the class the method was called on: a subclass of RewardModel is rebuilt as that subclass.
    kwargs = dict(config)
    obs_space = space_from_description(kwargs.pop("obs_space"))
    act_space = space_from_description(kwargs.pop("act_space"))
    return cls(obs_space, act_space, teacher=teacher, device=device, **kwargs)


def save_reward_model(model: Any, path: Union[str, os.PathLike]) -> None:
    """Write config, weights and optimizer state, atomically (a crash leaves the previous file whole)."""
    tmp_path = f"{os.fspath(path)}.tmp"
    state = {
        "config": model.get_config(),
        "ensemble": model.ensemble.state_dict(),
        "optimizer": model.optimizer.state_dict(),
        "n_updates": model.n_updates,
    }
    th.save(state, tmp_path)
    os.replace(tmp_path, path)


def load_reward_model(
    cls: Any,
    path: Union[str, os.PathLike],
    teacher: Optional[BaseTeacher] = None,
    device: Union[str, th.device] = "auto",
) -> Any:
    """:return: the ``cls`` written by :func:`save_reward_model`, weights and optimizer restored"""
    state = th.load(path, map_location="cpu", weights_only=True)
    model = cls.from_config(state["config"], teacher=teacher, device=device)
    model.ensemble.load_state_dict(state["ensemble"])
    model.optimizer.load_state_dict(state["optimizer"])
    model.n_updates = int(state["n_updates"])
    return model


__all__ = ["load_reward_model", "reward_model_config", "reward_model_from_config", "save_reward_model"]
