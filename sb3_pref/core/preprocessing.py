"""Turn observations and actions of any supported gymnasium space into flat float32 feature rows."""

from typing import Union

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.preprocessing import is_image_space

SpaceOrDim = Union[spaces.Space, int]


def _check_space(space: spaces.Space, argument: str) -> None:
    if isinstance(space, spaces.Box) and is_image_space(space, check_channels=False):
        raise ValueError(
            f"{argument} is an image space {space.shape}: the reward model takes flat vectors for now. "
            "Pass a flat (state) observation, or wrap the env to emit low-dimensional features."
        )
    if isinstance(space, spaces.Dict):
        for key, sub_space in space.spaces.items():
            _check_space(sub_space, f"{argument}['{key}']")
    elif not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        raise ValueError(f"{argument} of type {type(space).__name__} is not supported: use Box, Discrete or Dict.")


def describe_space(space: spaces.Space) -> dict:
    """
    A plain-data description of a space, enough to rebuild the encoding (bounds are not needed), so
    reward models can be saved with ``torch.save`` and loaded with ``weights_only=True``.
    """
    if isinstance(space, spaces.Dict):
        return {"type": "dict", "spaces": {key: describe_space(sub) for key, sub in space.spaces.items()}}
    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "multidiscrete",
            "nvec": [int(n) for n in space.nvec.reshape(-1)],
            "start": [int(n) for n in space.start.reshape(-1)],
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "multibinary", "n": [int(n) for n in np.atleast_1d(space.n)]}
    return {"type": "box", "shape": [int(n) for n in space.shape]}  # type: ignore[union-attr]  # a Box has a shape


def space_from_description(description: dict) -> spaces.Space:
    """Inverse of :func:`describe_space` (Box bounds come back as (-inf, inf))."""
    kind = description["type"]
    if kind == "dict":
        return spaces.Dict({key: space_from_description(sub) for key, sub in description["spaces"].items()})
    if kind == "discrete":
        return spaces.Discrete(description["n"], start=description["start"])
    if kind == "multidiscrete":
        return spaces.MultiDiscrete(description["nvec"], start=description.get("start"))
    if kind == "multibinary":
        return spaces.MultiBinary(description["n"])
    return spaces.Box(-np.inf, np.inf, shape=tuple(description["shape"]), dtype=np.float32)


class FeatureEncoder:
    """
    Flattens observations and one-hot encodes discrete actions, so that a reward model sees
    ``concat(obs, action)`` rows of a fixed width whatever the spaces are.

    :param observation_space: the observation space, or the flat observation size as an int
    :param action_space: the action space, or the flat (continuous) action size as an int
    """

    def __init__(self, observation_space: SpaceOrDim, action_space: SpaceOrDim) -> None:
        self.observation_space = self._as_space(observation_space, "observation_space")
        self.action_space = self._as_space(action_space, "action_space")
        _check_space(self.observation_space, "observation_space")
        _check_space(self.action_space, "action_space")
        self.obs_dim = int(spaces.flatdim(self.observation_space))
        self.act_dim = int(spaces.flatdim(self.action_space))

    @staticmethod
    def _as_space(space: SpaceOrDim, argument: str) -> spaces.Space:
        if isinstance(space, spaces.Space):
            return space
        if isinstance(space, (int, np.integer)) and space > 0:
            return spaces.Box(-np.inf, np.inf, shape=(int(space),), dtype=np.float32)
        raise ValueError(f"{argument} must be a gymnasium space or a positive int, got {space!r}")

    @property
    def input_dim(self) -> int:
        return self.obs_dim + self.act_dim

    def encode_obs(self, obs: Union[np.ndarray, dict]) -> np.ndarray:
        """
        :param obs: a batch of observations, shape ``(n, *obs_shape)`` (a dict of such arrays for Dict spaces)
        :return: float32 array ``(n, obs_dim)``
        """
        return self._encode(self.observation_space, obs, "obs")

    def encode_actions(self, actions: np.ndarray) -> np.ndarray:
        """
        :param actions: a batch of actions, shape ``(n, *action_shape)`` (``(n,)`` or ``(n, 1)`` for Discrete)
        :return: float32 array ``(n, act_dim)``, one-hot for discrete actions
        """
        return self._encode(self.action_space, actions, "actions")

    def encode(self, obs: Union[np.ndarray, dict], actions: np.ndarray) -> np.ndarray:
        """:return: ``concat(encode_obs(obs), encode_actions(actions))``, shape ``(n, input_dim)``"""
        return np.concatenate([self.encode_obs(obs), self.encode_actions(actions)], axis=1)

    @staticmethod
    def _encode(space: spaces.Space, values: Union[np.ndarray, dict], name: str) -> np.ndarray:
        if isinstance(space, spaces.Dict):
            # The space's key order (sorted, as gymnasium.spaces.flatten uses), so the layout is stable across runs;
            # recursive, since _check_space accepts nested Dicts.
            parts = [FeatureEncoder._encode(sub, values[key], f"{name}['{key}']") for key, sub in space.spaces.items()]
            return np.concatenate(parts, axis=1)
        values = np.asarray(values)
        if isinstance(space, spaces.Discrete):
            index = values.reshape(-1).astype(np.int64) - int(space.start)
            return np.eye(int(space.n), dtype=np.float32)[index]
        if isinstance(space, spaces.MultiDiscrete):
            nvec = space.nvec.reshape(-1)
            index = values.reshape(len(values), -1).astype(np.int64) - space.start.reshape(1, -1)
            return np.concatenate([np.eye(int(n), dtype=np.float32)[index[:, i]] for i, n in enumerate(nvec)], axis=1)
        width = int(np.prod(space.shape))  # type: ignore[arg-type]  # a Box has a shape
        if values.size % max(width, 1) != 0 or (values.ndim > 1 and int(np.prod(values.shape[1:])) != width):
            raise ValueError(f"{name} has shape {values.shape}, which does not match the space's {space.shape}")
        return values.reshape(-1, width).astype(np.float32, copy=False)
