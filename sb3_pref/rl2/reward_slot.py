"""
The previous-reward input of an RL^2 policy, when the reward is learned.

A trial observation carries the previous step's reward (see :class:`sb3_pref.envs.trial.TrialObservationLayout`).
The trial wrapper writes the env's reward there; when an agent learns from preferences that true
reward must never reach the policy, so :class:`LearnedRewardObservation` overwrites the slot with the
reward model's prediction for the previous step. The policy needs that value at the very next step,
so this one input is predicted per env step, batched over the envs (the training rewards are still
predicted once per rollout).

The reward model was trained on raw observations: when a ``VecNormalize`` sits below this wrapper
(``LearnedRewardObservation(VecNormalize(...))``, as the Meta-World ML1 preset builds it), the
prediction is made from ``VecNormalize.get_original_obs()``, never from the normalised observations
this wrapper passes on. The predicted value is written as is (the model's output is already bounded
by its output activation).
"""

from typing import Callable, Optional, cast

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize, unwrap_vec_normalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from sb3_pref.envs.trial import TrialObservationLayout

# (inner observations (n, obs_dim), encoded actions (n, act_dim)) -> predicted rewards (n,)
RewardFunction = Callable[[np.ndarray, np.ndarray], np.ndarray]


class LearnedRewardObservation(VecEnvWrapper):
    """
    Replaces the previous-reward slot of trial observations with a learned reward.

    :param venv: a VecEnv of :class:`~sb3_pref.envs.trial.TrialWrapper` envs, possibly normalised by a
        ``VecNormalize`` (the reward model then sees the raw observations)
    :param reward_fn: predicted reward of a batch of (inner observation, encoded action)
    :param encode_actions: turns the VecEnv's actions into the reward model's action features
    :param layout: where each part of a trial observation sits
    :param fill: what the slot holds: ``"predicted"``, ``"zero"`` (nothing known yet, e.g. during
        entropy pretraining) or ``"true"`` (leave the env's reward)
    """

    def __init__(
        self,
        venv: VecEnv,
        reward_fn: RewardFunction,
        encode_actions: Callable[[np.ndarray], np.ndarray],
        layout: TrialObservationLayout,
        fill: str = "predicted",
    ) -> None:
        super().__init__(venv)
        self.reward_fn = reward_fn
        self.encode_actions = encode_actions
        self.layout = layout
        self.fill = fill
        self._last_obs: Optional[np.ndarray] = None
        self._actions: Optional[np.ndarray] = None
        self._vec_normalize: Optional[VecNormalize] = unwrap_vec_normalize(venv)

    def _raw(self, obs: np.ndarray) -> np.ndarray:
        """The raw observations behind ``obs`` (the observations the reward model was trained on)."""
        if self._vec_normalize is None:
            return np.array(obs, copy=True)
        return np.array(self._vec_normalize.get_original_obs(), copy=True)

    @property
    def fill(self) -> str:
        return self._fill

    @fill.setter
    def fill(self, value: str) -> None:
        if value not in ("predicted", "zero", "true"):
            raise ValueError(f"fill must be 'predicted', 'zero' or 'true', got {value!r}")
        self._fill = value

    def reset(self) -> np.ndarray:
        obs = cast(np.ndarray, self.venv.reset())  # trial observations are flat arrays (Box)
        # A trial's first observation has no previous reward: the wrapper already wrote 0 there.
        self._last_obs = self._raw(obs)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.array(actions, copy=True)
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        step_obs, rewards, dones, infos = self.venv.step_wait()
        obs = cast(np.ndarray, step_obs)  # trial observations are flat arrays (Box)
        if self._fill != "true":
            # Envs whose trial just ended show a new trial's first observation, whose slot stays 0.
            continuing = ~np.asarray(dones, dtype=bool)
            slot = self.layout.prev_reward_index
            if self._fill == "predicted":
                # both set before any step: reset() and step_async() run first
                features = cast(np.ndarray, self._last_obs)[:, self.layout.obs]
                predicted = self.reward_fn(features, self.encode_actions(cast(np.ndarray, self._actions)))
                obs[continuing, slot] = predicted[continuing]
            else:
                obs[continuing, slot] = 0.0
        self._last_obs = self._raw(obs)
        return obs, rewards, dones, infos
