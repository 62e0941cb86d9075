"""
The rollout side of the SB3 glue: the recorder, a callback that copies each step's raw transition (for on-policy
and off-policy algorithms alike), and the function that writes new rewards into a finished on-policy rollout buffer.

The recorder works for any algorithm whose ``collect_rollouts`` calls the callbacks once per step (PPO, A2C,
RecurrentPPO, SAC); the algorithm sides live in :mod:`sb3_pref.common.onpolicy` and :mod:`sb3_pref.common.offpolicy`.
"""

from typing import Any, Optional, Protocol, Union, cast, runtime_checkable

import numpy as np
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize


def relabel_rollout(buffer: RolloutBuffer, new_rewards: np.ndarray, seen_rewards: np.ndarray) -> None:
    """
    Replace the rewards of a finished rollout and update its advantages and returns.

    The buffer's rewards are ``seen + bootstrap``, where SB3 added ``gamma * V(terminal_obs)`` at
    time-limit truncations; that bootstrap is kept, once, on top of the new rewards. GAE is linear
    in the rewards, so the advantages move by the discounted sum of the reward change within each
    episode: no last value is needed, and the same code serves recurrent buffers.

    :param buffer: a filled rollout buffer (advantages already computed by the algorithm)
    :param new_rewards: ``(n_steps, n_envs)`` rewards to train on
    :param seen_rewards: ``(n_steps, n_envs)`` rewards the env returned to the algorithm
    """
    bootstrap = buffer.rewards - seen_rewards.astype(np.float32)
    rewards = new_rewards.astype(np.float32) + bootstrap
    delta = rewards - buffer.rewards
    decay = buffer.gamma * buffer.gae_lambda
    correction = np.zeros_like(delta)
    running = np.zeros(delta.shape[1], dtype=np.float32)
    for step in reversed(range(delta.shape[0])):
        if step + 1 < delta.shape[0]:
            running *= decay * (1.0 - buffer.episode_starts[step + 1])
        running = delta[step] + running
        correction[step] = running
    buffer.rewards = rewards
    buffer.advantages = buffer.advantages + correction
    buffer.returns = buffer.advantages + buffer.values


@runtime_checkable
class RolloutHost(Protocol):
    """
    What :class:`RolloutRecorder` may use of the algorithm it records for: the one seam between SB3's rollout
    loop and the preference glue, which :class:`~sb3_pref.common.algorithm.PreferenceAlgorithmMixin` implements.
    """

    _last_obs: Any  # SB3's: the observations the next actions are taken in (VecNormalize-d if wrapped)

    def get_vec_normalize_env(self) -> Optional[VecNormalize]: ...

    def _begin_rollout(self) -> None: ...

    def _segment_info_keys(self) -> tuple[str, ...]: ...

    def _reward_features(self, raw_obs: Union[np.ndarray, dict]) -> np.ndarray: ...

    def _reward_actions(self, actions: np.ndarray) -> np.ndarray: ...

    def _segment_ends(self, dones: np.ndarray, infos: list[dict[str, Any]]) -> np.ndarray: ...

    def _finish_rollout(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        true: np.ndarray,
        seen: np.ndarray,
        dones: np.ndarray,
        extras: Optional[dict[str, np.ndarray]] = None,
    ) -> None: ...


class RolloutRecorder(BaseCallback):
    """
    Copies each step's raw transition during ``collect_rollouts`` (a few array copies, no model
    call) and hands the finished rollout, encoded as reward-model features in one call, to the algorithm at
    ``on_rollout_end``.
    """

    @property
    def host(self) -> RolloutHost:
        """The algorithm recorded for (SB3's ``self.model``), through the only members the recorder uses."""
        return cast(RolloutHost, self.model)

    def _on_rollout_start(self) -> None:
        host = self.host
        host._begin_rollout()
        # Raw arrays per step, encoded once at the rollout's end: one encoder call per rollout, not two per step
        # (the encoding is row by row, so the features are the same).
        self._records: dict[str, list[Any]] = {key: [] for key in ("obs", "actions", "true", "seen", "dones")}
        self._info_keys = host._segment_info_keys()
        self._extras: dict[str, list[np.ndarray]] = {key: [] for key in self._info_keys}
        vec_normalize = host.get_vec_normalize_env()
        self._prev_obs = _snapshot(vec_normalize.get_original_obs() if vec_normalize is not None else host._last_obs)

    def _on_step(self) -> bool:
        host = self.host
        vec_normalize = host.get_vec_normalize_env()
        rewards, dones = self.locals["rewards"], self.locals["dones"]
        true_rewards = vec_normalize.get_original_reward() if vec_normalize is not None else rewards
        raw_next = vec_normalize.get_original_obs() if vec_normalize is not None else self.locals["new_obs"]
        records = self._records
        records["obs"].append(self._prev_obs)
        records["actions"].append(np.array(self.locals.get("clipped_actions", self.locals["actions"])))
        records["true"].append(np.asarray(true_rewards, dtype=np.float32).copy())
        # Copied now: SB3 adds the time-limit bootstrap to this array in place right after the callbacks.
        records["seen"].append(np.asarray(rewards, dtype=np.float32).copy())
        records["dones"].append(np.asarray(host._segment_ends(dones, self.locals["infos"]), dtype=bool).copy())
        for key in self._info_keys:
            self._extras[key].append(
                np.stack([np.asarray(info[key], dtype=np.float64).ravel() for info in self.locals["infos"]])
            )
        self._prev_obs = _snapshot(raw_next)
        return True

    def _on_rollout_end(self) -> None:
        records, extras_lists = self._records, self._extras
        self._records, self._extras = {}, {}
        if not records.get("obs"):  # no step since the last end (SB3 calls the end once per start; be safe anyway)
            return
        host = self.host
        n_steps, n_envs = len(records["obs"]), len(records["seen"][0])
        obs = _stack_rows(records.pop("obs"))
        actions = cast(np.ndarray, _stack_rows(records.pop("actions")))  # actions are arrays, never dicts
        stacked = {key: np.stack(values) for key, values in records.items()}
        stacked["obs"] = host._reward_features(obs).reshape(n_steps, n_envs, -1)
        stacked["actions"] = host._reward_actions(actions).reshape(n_steps, n_envs, -1)
        extras = {key: np.stack(values) for key, values in extras_lists.items() if values}
        host._finish_rollout(**stacked, extras=extras or None)


def _snapshot(obs: Union[np.ndarray, dict]) -> Union[np.ndarray, dict]:
    """A copy of a batch of observations (a dict's arrays each), safe from a wrapper that reuses its buffers."""
    if isinstance(obs, dict):
        return {key: np.array(value) for key, value in obs.items()}
    return np.array(obs)


def _stack_rows(batches: list[Any]) -> Union[np.ndarray, dict]:
    """``T`` batches of ``n`` observations or actions (arrays, or dicts of arrays) as one batch of ``T * n`` rows."""
    if isinstance(batches[0], dict):
        return {key: _stack_rows([batch[key] for batch in batches]) for key in batches[0]}
    stacked = np.stack(batches)
    return stacked.reshape(-1, *stacked.shape[2:])
