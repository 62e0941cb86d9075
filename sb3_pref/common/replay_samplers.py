"""
Stand-ins for an off-policy algorithm's replay buffer during one ``train`` call: SAC samples its batches from them,
everything else is the buffer's.

- :class:`EntropyRewardSampler` (pretraining): each batch is rewarded with its state entropy (PEBBLE).
- :class:`RecentHalfSampler` (QPA's hybrid replay): half of each batch comes from the newest transitions, those of the
  last few episodes, so the critic learns most where the queries are drawn.
"""

from typing import Any, Optional, Protocol, Union

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pref.core.entropy import StateEntropyReward

Observation = Union[np.ndarray, dict[str, np.ndarray]]


class EntropySource(Protocol):
    """What the entropy sampler reads of the algorithm: the pretraining's k-NN set and the reward features."""

    @property
    def entropy_reward(self) -> Optional[StateEntropyReward]: ...

    def _reward_features(self, raw_obs: Union[np.ndarray, dict]) -> np.ndarray: ...


def _to_numpy(value: Union[th.Tensor, dict[str, th.Tensor]]) -> Observation:
    if isinstance(value, dict):
        return {key: item.cpu().numpy() for key, item in value.items()}
    return value.cpu().numpy()


class EntropyRewardSampler:
    """
    Stands in for the replay buffer inside ``train`` during pretraining: each sampled batch gets the
    state-entropy reward of its raw observations. Everything else is delegated to the buffer.
    """

    def __init__(self, buffer: ReplayBuffer, algorithm: "EntropySource") -> None:
        self.buffer = buffer
        self.algorithm = algorithm
        self.rewards: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.buffer, name)

    def sample(self, batch_size: int, env: Optional[VecNormalize] = None) -> Any:
        # Raw samples: the k-NN reward must see raw observations, and VecNormalize's reward scale must not apply.
        data, rows = self._sample_raw(batch_size)
        algorithm = self.algorithm
        entropy = algorithm.entropy_reward
        assert entropy is not None, "the sampler stands in for the buffer during pretraining only"
        raw_obs = _to_numpy(data.observations)
        features = algorithm._reward_features(raw_obs)
        if rows is not None and rows.max() < entropy.size and np.array_equal(entropy.buffer[rows].cpu().numpy(), features):
            # The k-NN set holds the buffer's rows in the same order: look the distances up.
            intrinsic = entropy.score_rows(rows)
        else:
            intrinsic = entropy.score(features)
        self.rewards.append(float(intrinsic.mean()))
        if env is not None:
            device = data.rewards.device
            data = data._replace(
                observations=_normalized(env, raw_obs, device),
                next_observations=_normalized(env, _to_numpy(data.next_observations), device),
            )
        return data._replace(rewards=th.as_tensor(intrinsic, device=data.rewards.device).reshape(data.rewards.shape))

    def _sample_raw(self, batch_size: int) -> tuple[Any, Optional[np.ndarray]]:
        """
        The buffer's own sample without normalisation, and the rows it drew where they map onto the k-NN set's
        (one env, a plain ``ReplayBuffer``: transition ``i`` is the set's row ``i``), else None. SB3 draws the
        rows as always (a run samples the batches SAC would); they are read on their way to ``_get_samples``.
        """
        buffer = self.buffer
        if type(buffer) is not ReplayBuffer or buffer.optimize_memory_usage or buffer.n_envs != 1:
            return buffer.sample(batch_size, env=None), None
        drawn: list[np.ndarray] = []
        get_samples = buffer._get_samples

        def read_rows(batch_inds: np.ndarray, env: Optional[VecNormalize] = None) -> Any:
            drawn.append(batch_inds)
            return get_samples(batch_inds, env=env)

        buffer._get_samples = read_rows  # type: ignore[method-assign]  # this call only; the class's method is restored
        try:
            data = buffer.sample(batch_size, env=None)
        finally:
            del buffer._get_samples
        return data, drawn[0]


def _normalized(env: VecNormalize, obs: Observation, device: th.device) -> Union[th.Tensor, dict[str, th.Tensor]]:
    normalized = env.normalize_obs(obs)
    if isinstance(normalized, dict):
        return {key: th.as_tensor(value, device=device) for key, value in normalized.items()}
    return th.as_tensor(normalized, device=device)


class RecentHalfSampler:
    """
    Stands in for the replay buffer inside ``train`` while QPA's hybrid replay is on: half of each batch (rounded
    down) is SAC's usual uniform draw, the other half is drawn uniformly from the newest ``recent_rows`` rows of the
    buffer (every env of a row counts). Everything else is delegated to the buffer.

    :param buffer: the replay buffer
    :param recent_rows: how many of the newest rows the recent half is drawn from (at most the filled rows)
    :param rng: the generator of the recent half's rows (SB3 draws its own half and the env index of each row)
    """

    def __init__(self, buffer: ReplayBuffer, recent_rows: int, rng: np.random.Generator) -> None:
        if recent_rows < 1:
            raise ValueError(f"recent_rows must be >= 1, got {recent_rows}")
        self.buffer = buffer
        self.recent_rows = int(recent_rows)
        self.rng = rng

    def __getattr__(self, name: str) -> Any:
        return getattr(self.buffer, name)

    def recent_indices(self, n: int) -> np.ndarray:
        """:param n: how many; :return: ``n`` row indices among the newest ``recent_rows`` filled rows"""
        buffer = self.buffer
        filled = buffer.buffer_size if buffer.full else buffer.pos
        # With optimize_memory_usage the row at pos holds no full transition once the buffer is full.
        usable = filled - 1 if buffer.full and buffer.optimize_memory_usage else filled
        rows = max(1, min(self.recent_rows, usable))
        return (buffer.pos - 1 - self.rng.integers(rows, size=n)) % buffer.buffer_size

    def sample(self, batch_size: int, env: Optional[VecNormalize] = None) -> Any:
        n_recent = batch_size // 2
        uniform = self.buffer.sample(batch_size - n_recent, env=env)
        if n_recent == 0:
            return uniform
        recent = self.buffer._get_samples(self.recent_indices(n_recent), env=env)
        return type(uniform)(*(_concatenate(a, b) for a, b in zip(uniform, recent)))


def _concatenate(first: Any, second: Any) -> Any:
    if first is None:  # a field SB3 leaves unset (e.g. ``discounts`` without n-step returns)
        return None
    if isinstance(first, dict):
        return {key: th.cat([first[key], second[key]]) for key in first}
    return th.cat([first, second])
