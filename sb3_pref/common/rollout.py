"""
The rollout side of the SB3 glue: a callback that copies each step's raw transition, and the
function that writes new rewards into a finished rollout buffer.

Both work for any on-policy algorithm whose ``collect_rollouts`` calls the callbacks once per step
(PPO, A2C, RecurrentPPO); the algorithm side lives in :mod:`sb3_pref.common.sb3_glue`.
"""

from typing import TYPE_CHECKING, Union, cast

import numpy as np
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback

from sb3_pref.common.preprocessing import FeatureEncoder

if TYPE_CHECKING:
    from sb3_pref.common.sb3_glue import PreferenceRewardMixin

# Values logged as ``reward/phase``.
PHASE_PRETRAIN, PHASE_PREFERENCE, PHASE_TRUE_REWARD = 0, 1, 2


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


def _single(obs: Union[np.ndarray, dict]) -> Union[np.ndarray, dict]:
    """One observation as a batch of one."""
    if isinstance(obs, dict):
        return {key: np.asarray(value)[None] for key, value in obs.items()}
    return np.asarray(obs)[None]


class RolloutRecorder(BaseCallback):
    """
    Copies each step's raw transition during ``collect_rollouts`` (a few array copies, no model
    call) and hands the finished rollout to the algorithm at ``on_rollout_end``.
    """

    model: "PreferenceRewardMixin"  # for type checkers: the algorithm it records for

    def _on_rollout_start(self) -> None:
        self.model._begin_rollout()
        self._records: dict[str, list[np.ndarray]] = {key: [] for key in ("obs", "actions", "true", "seen", "dones", "next")}
        self._info_keys = self.model._segment_info_keys()
        self._extras: dict[str, list[np.ndarray]] = {key: [] for key in self._info_keys}
        vec_normalize = self.model.get_vec_normalize_env()
        self._prev_obs = self._encode(vec_normalize.get_original_obs() if vec_normalize is not None else self.model._last_obs)  # type: ignore[arg-type]

    def _encode(self, raw_obs: Union[np.ndarray, dict]) -> np.ndarray:
        """Flat features of the part of a batch of raw observations the reward model sees."""
        return cast(FeatureEncoder, self.model._pref_encoder).encode_obs(self.model._reward_observation(raw_obs))

    def _on_step(self) -> bool:
        encoder = cast(FeatureEncoder, self.model._pref_encoder)  # set up before the first rollout
        vec_normalize = self.model.get_vec_normalize_env()
        rewards, dones = self.locals["rewards"], self.locals["dones"]
        true_rewards = vec_normalize.get_original_reward() if vec_normalize is not None else rewards
        next_obs = self._encode(vec_normalize.get_original_obs() if vec_normalize is not None else self.locals["new_obs"])
        records = self._records
        records["obs"].append(self._prev_obs)
        records["actions"].append(encoder.encode_actions(self.locals.get("clipped_actions", self.locals["actions"])))
        records["true"].append(np.asarray(true_rewards, dtype=np.float32).copy())
        # Copied now: SB3 adds the time-limit bootstrap to this array in place right after the callbacks.
        records["seen"].append(np.asarray(rewards, dtype=np.float32).copy())
        records["dones"].append(np.asarray(self.model._segment_ends(dones, self.locals["infos"]), dtype=bool).copy())
        for key in self._info_keys:
            self._extras[key].append(
                np.stack([np.asarray(info[key], dtype=np.float64).ravel() for info in self.locals["infos"]])
            )
        if self.model._rollout_phase == PHASE_PRETRAIN:
            reached = next_obs.copy()
            for env_index in np.flatnonzero(dones):
                terminal = self.locals["infos"][env_index].get("terminal_observation")
                if terminal is not None:
                    terminal = vec_normalize.unnormalize_obs(terminal) if vec_normalize is not None else terminal
                    reached[env_index] = self._encode(_single(terminal))[0]
            records["next"].append(reached)
        self._prev_obs = next_obs
        return True

    def _on_rollout_end(self) -> None:
        stacked = {key: np.stack(values) for key, values in self._records.items() if values}
        extras = {key: np.stack(values) for key, values in self._extras.items() if values}
        self._records, self._extras = {}, {}
        if stacked:
            self.model._finish_rollout(**stacked, extras=extras or None)
