"""
The rollout buffer's reward writer (PPO, A2C, RecurrentPPO): the :class:`~sb3_pref.common.controller.RewardWriter`
of the on-policy family, with RLHF's reference policy and KL penalty (see :mod:`sb3_pref.common.rlhf`).

- a pretraining rollout trains on the k-NN state-entropy reward of the states its actions were taken in;
- a preference rollout trains on the learned reward, less ``kl_coef`` times the KL to the reference policy and
  whitened if asked, written with :func:`~sb3_pref.common.rollout.relabel_rollout`;
- the value head is re-initialised when pretraining ends (and zeroed before fine-tuning with ``zero_value_head``).

Persistence: the reference policy's weights are saved inside the model's zip (a ``reference_policy`` state dict)
with its class and constructor arguments, so a loaded model needs neither the original object nor the path;
``kl_coef`` (the adaptive coefficient's current value) is the algorithm's option, saved with its data.
"""

from typing import Any, Optional, Protocol

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from sb3_pref.common.reference_kl import (
    ReferenceKL,
    ReferenceSource,
    adaptive_kl_coef,
    check_reference_spaces,
    load_reference_policy,
    policy_config,
    rebuild_policy,
)
from sb3_pref.common.rlhf import whiten
from sb3_pref.common.rollout import relabel_rollout
from sb3_pref.core.entropy import StateEntropyReward


class RolloutWriterHost(Protocol):
    """What :class:`RolloutRewardWriter` uses of the on-policy algorithm: SB3's members and the stored options."""

    rollout_buffer: RolloutBuffer
    policy: Any  # an ActorCriticPolicy: value_net and optimizer
    seed: Optional[int]
    device: th.device
    observation_space: spaces.Space
    action_space: spaces.Space
    entropy_capacity: int
    kl_coef: float  # the adaptive coefficient writes its new value back
    kl_target: Optional[float]
    kl_horizon: int
    whiten_reward: bool
    zero_value_head: bool

    @property
    def logger(self) -> Logger: ...

    def _reward_actions(self, actions: np.ndarray) -> np.ndarray: ...


class RolloutRewardWriter:
    """
    Writes a finished rollout's rewards into the on-policy algorithm's rollout buffer (see the module docstring).

    :param host: the algorithm
    :param reference_policy: the checked ``reference_policy`` option (``"initial"``, a policy, a path or None)
    """

    #: the plain values saved in SB3's data file, by the names of the algorithm attributes that held them before
    SAVED_NAMES = ("reference_source", "_reference_config", "_value_head_zeroed")
    seed_steps = 0

    def __init__(self, host: RolloutWriterHost, reference_policy: ReferenceSource = None) -> None:
        self.host = host
        initial = isinstance(reference_policy, str) and reference_policy == "initial"
        self.reference_source: Optional[str] = "initial" if initial else None if reference_policy is None else "given"
        self.reference_input = None if initial else reference_policy
        self.reference_config: Optional[dict[str, Any]] = None
        self.value_head_zeroed = False
        self.reference_policy: Optional[BasePolicy] = None
        self.reference_kl: Optional[ReferenceKL] = None
        self.rollout_stash: Optional[tuple[Any, np.ndarray, np.ndarray]] = None
        #: the KL coefficient RLHF's adaptive controller gives the next rollout; the algorithm takes it (users read
        #: ``model.kl_coef``), the writer only says it
        self.next_kl_coef: Optional[float] = None
        self.rng = np.random.default_rng()

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        """Right after the algorithm's own set-up: the reference policy (given, or rebuilt on load), checked."""
        host = self.host
        self.rng = np.random.default_rng(host.seed)
        policy = None
        if self.reference_input is not None:
            policy = load_reference_policy(self.reference_input, host.device)
            self.reference_input = None
        elif self.reference_config is not None:  # loading: the weights arrive through set_parameters
            policy = rebuild_policy(self.reference_config, host.device)
        if policy is not None:
            check_reference_spaces(policy, host.observation_space, host.action_space)
            self.set_reference(policy)

    def set_reference(self, policy: BasePolicy) -> None:
        """:param policy: the frozen policy the KL penalty measures against"""
        self.reference_policy = policy
        self.reference_config = policy_config(policy)
        self.reference_kl = ReferenceKL(policy)

    def setup_learn(self, envs_reset: bool) -> None:
        """
        After SB3's ``_setup_learn``: the initial policy becomes the reference, the value head is zeroed once.

        :param envs_reset: whether the envs were reset (the KL's recurrent state starts again with them)
        """
        host = self.host
        if self.reference_source == "initial" and self.reference_policy is None:
            self.set_reference(load_reference_policy(host.policy, host.device))
        if self.reference_kl is not None and envs_reset:
            self.reference_kl.reset()
        if host.zero_value_head and not self.value_head_zeroed:
            self.reset_value_head()
            self.value_head_zeroed = True

    # ------------------------------------------------------------------ RewardWriter
    def entropy_capacity(self, n_transitions: int, unsuper_step: int) -> int:
        # B-Pref keeps unsuper_step observations; bounded here so that a huge unsuper_step
        # cannot allocate more than entropy_capacity rows (one rollout always fits).
        return max(min(unsuper_step, self.host.entropy_capacity), n_transitions)

    def rollout_complete(self, obs: np.ndarray) -> None:
        """Keep the rollout's observations for reference samples (references only: SB3's reset makes new arrays)."""
        buffer = self.host.rollout_buffer
        self.rollout_stash = (buffer.observations, obs, buffer.episode_starts)

    def pretrain_rollout(self, entropy: StateEntropyReward, obs: np.ndarray, seen: np.ndarray) -> None:
        """The rollout's rewards become the k-NN state-entropy reward of the states acted in."""
        # As B-Pref: each transition is scored by the observation its action was taken in (see
        # docs/bpref-differences.md for the neighbours).
        intrinsic = entropy.compute(obs.reshape(seen.size, -1)).reshape(seen.shape)
        relabel_rollout(self.host.rollout_buffer, intrinsic, seen)
        self.host.logger.record("reward/entropy_reward_mean", float(intrinsic.mean()))

    def write_rewards(self, predicted: np.ndarray, seen: np.ndarray) -> None:
        """The finished rollout trains on ``predicted`` with RLHF's penalty (see :func:`relabel_rollout`)."""
        relabel_rollout(self.host.rollout_buffer, self.rlhf_rewards(predicted), seen)

    def reset_value_head(self) -> None:
        """Re-initialise the value head (as SB3 initialises it) when the reward it predicted changes."""
        policy = self.host.policy
        value_net: nn.Linear = policy.value_net
        for parameter in value_net.parameters():
            policy.optimizer.state.pop(parameter, None)
        if self.host.zero_value_head:  # the RLHF document's N(0, 0) value head
            nn.init.zeros_(value_net.weight)
        else:
            nn.init.orthogonal_(value_net.weight, gain=1.0)
        nn.init.zeros_(value_net.bias)

    def saved_values(self) -> dict[str, Any]:
        return dict(zip(self.SAVED_NAMES, (self.reference_source, self.reference_config, self.value_head_zeroed)))

    def load_saved_values(self, values: dict[str, Any]) -> None:
        self.reference_source = values.get("reference_source", self.reference_source)
        self.reference_config = values.get("_reference_config", self.reference_config)
        self.value_head_zeroed = values.get("_value_head_zeroed", self.value_head_zeroed)

    # ------------------------------------------------------------------ RLHF
    def rlhf_rewards(self, predicted: np.ndarray) -> np.ndarray:
        """
        The learned rewards of a rollout with the KL penalty (and whitening) applied, logged under ``rlhf/``.

        :param predicted: ``(n_steps, n_envs)`` learned rewards of the rollout in the buffer
        :return: the rewards GAE should see
        """
        host, rewards = self.host, predicted
        if self.reference_kl is not None:
            kl = self.reference_kl.kl(host.rollout_buffer)
            rewards = predicted - host.kl_coef * kl
            mean_kl = float(kl.mean())
            host.logger.record("rlhf/kl", mean_kl)
            host.logger.record("rlhf/kl_coef", host.kl_coef)
            host.logger.record("rlhf/reward_before_penalty", float(predicted.mean()))
            host.logger.record("rlhf/reward_after_penalty", float(rewards.mean()))
            if host.kl_target is not None:
                self.next_kl_coef = adaptive_kl_coef(host.kl_coef, mean_kl, host.kl_target, host.kl_horizon, kl.size)
        if host.whiten_reward:
            rewards = whiten(rewards, shift_mean=False)
            host.logger.record("rlhf/reward_whitened_mean", float(rewards.mean()))
        return rewards

    def reference_features(self) -> np.ndarray:
        """Reward-model features of the current rollout's states with actions drawn from the reference policy."""
        assert self.rollout_stash is not None and self.reference_kl is not None, "a rollout and a reference policy"
        policy_obs, reward_obs, starts = self.rollout_stash
        actions = self.reference_kl.sample_actions(policy_obs, starts, self.rng)
        shape: tuple[int, ...] = self.host.action_space.shape or ()
        encoded = self.host._reward_actions(actions.reshape(-1, *shape))
        return np.concatenate([reward_obs.reshape(len(encoded), -1), encoded], axis=-1)


__all__ = ["RolloutRewardWriter", "RolloutWriterHost"]
