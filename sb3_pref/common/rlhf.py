"""
RLHF-for-control pieces (OpenAI's lm-human-preferences details, adapted to SB3 policies): a frozen
reference policy, the per-step KL penalty to it with a fixed or adaptive coefficient, reward
whitening, gain/bias fitting, and the preset that groups the reward-model details.

The algorithm side (when these run in a rollout) is in :class:`~sb3_pref.common.sb3_glue.PreferenceRewardMixin`.
The reference policy and the KL measurement are defined in :mod:`sb3_pref.common.reference_kl` and
importable from here too.

KL estimator: the document's per-token ``kl = logprob - ref_logprob`` at the *sampled* action, i.e.
``log pi(a_t|s_t) - log pi_ref(a_t|s_t)`` with ``a_t ~ pi``. Its expectation over ``a_t`` is
``KL(pi(.|s_t) || pi_ref(.|s_t))``; a single sample can be negative. ``log pi`` is the log-probability
the rollout buffer already holds (computed while acting), so only the reference policy runs, once
per rollout over all its transitions.
"""

from typing import TYPE_CHECKING, Any, Optional, cast

import numpy as np
from stable_baselines3.common.policies import BasePolicy

from sb3_pref.common.options import OPTIONS_BY_NAME
from sb3_pref.common.preprocessing import FeatureEncoder

# The reference policy and KL machinery live in reference_kl.py; imported here for the mixin, and so that
# every name importable from this module before the split still is.
from sb3_pref.common.reference_kl import (
    ReferenceKL,
    ReferenceSource,
    adaptive_kl_coef,
    check_reference_spaces,
    load_reference_policy,
    policy_config,
    rebuild_policy,
)

#: The document's reward-model and policy details as constructor arguments of a preference
#: algorithm (``PPO_REWARD(..., reference_policy="initial", **RLHF_PRESET)``); see docs/rlhf-details.md.
RLHF_PRESET: dict[str, Any] = {
    # at most one pass of reward training per round (exactly one with reward_schedule="bpref", a step
    # budget from the new labels with "auto"), its lr decaying linearly to 0 over the round's steps
    "re_update": 1,
    "anneal_reward_lr": True,
    # gain/bias so predictions on reference-policy samples have mean 0 / std 1, before and after training
    "normalize_reward_before": True,
    "normalize_reward": True,
    "normalize_reward_samples": "reference",
    # rewards divided by their std per rollout, mean kept
    "whiten_reward": True,
    # value head weights and bias at 0 when fine-tuning starts; policy lr decays linearly to 0
    "zero_value_head": True,
    "anneal_policy_lr": True,
    # value loss 0.5 * max((V - R)^2, (V_clipped - R)^2), V_clipped within the document's cliprange_value
    # of the rollout's value (PPO_REWARD's option; clip_range_vf is PPO's own argument)
    "value_loss": "clipped_max",
    "clip_range_vf": 0.2,
    # adaptive KL coefficient (the document starts at 0.15); target in nats per env step
    "kl_coef": 0.15,
    "kl_target": 0.05,
    "kl_horizon": 10_000,
}


def whiten(values: np.ndarray, shift_mean: bool = False) -> np.ndarray:
    """
    The document's ``whiten``: ``(x - mean) / std``; with ``shift_mean=False`` the mean is added back,
    so only the spread changes (std 1, mean kept).

    :param values: any array (statistics over all of it)
    :param shift_mean: leave the result at mean 0 (True) or at the input's mean (False)
    """
    mean, var = values.mean(), values.var()
    whitened = (values - mean) / np.sqrt(var + 1e-8)
    return whitened if shift_mean else whitened + mean


def fit_gain_bias(raw: np.ndarray, target_mean: float = 0.0, target_std: float = 1.0) -> tuple[float, float]:
    """
    Gain ``g`` and bias ``b`` with ``g * raw + b`` at ``target_mean`` / ``target_std``:
    ``g = target_std / std(raw)``, ``b = target_mean - g * mean(raw)``.
    """
    gain = target_std / (float(raw.std()) + 1e-8)
    return gain, target_mean - gain * float(raw.mean())


def check_rlhf_options(
    reference_policy: ReferenceSource,
    kl_coef: float,
    kl_target: Optional[float],
    kl_horizon: int,
    normalize_reward_samples: str,
) -> None:
    """Clear errors for the RLHF constructor arguments, before anything is built (the checks their declaration uses)."""
    for name, value in (
        ("reference_policy", reference_policy), ("kl_coef", kl_coef), ("kl_target", kl_target),
        ("kl_horizon", kl_horizon), ("normalize_reward_samples", normalize_reward_samples),
    ):  # fmt: skip
        OPTIONS_BY_NAME[name].check(name, value)
    if normalize_reward_samples == "reference" and reference_policy is None:
        raise ValueError("normalize_reward_samples='reference' needs a reference_policy (e.g. reference_policy='initial')")


if TYPE_CHECKING:
    # For type checkers only: the mixin runs inside an SB3 on-policy algorithm (PPO, A2C, RecurrentPPO) and uses
    # its attributes. At run time the base is object: the MRO is unchanged.
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    _AlgorithmBase = OnPolicyAlgorithm
else:
    _AlgorithmBase = object


class RLHFMixin(_AlgorithmBase):
    """
    The algorithm side of the KL penalty and the RLHF options; a base of
    :class:`~sb3_pref.common.sb3_glue.PreferenceRewardMixin`, which owns the constructor arguments
    (documented there) and calls :meth:`_init_rlhf`, :meth:`_setup_rlhf` and :meth:`_rlhf_rewards`.

    Persistence: the reference policy's weights are saved inside the model's zip (a ``reference_policy``
    state dict) with its class and constructor arguments, so a loaded model needs neither the original
    object nor the path; ``kl_coef`` (the adaptive coefficient's current value) is saved with the data.
    """

    # For type checkers: options stored by the constructor (sb3_pref.common.options).
    kl_coef: float
    kl_horizon: int
    kl_target: Optional[float]
    normalize_reward_before: bool
    normalize_reward_samples: str
    whiten_reward: bool
    zero_value_head: bool
    _pref_encoder: Optional[FeatureEncoder]

    if TYPE_CHECKING:

        def _reset_value_head(self) -> None: ...  # PreferenceRewardMixin's

    def _init_rlhf(self, reference_policy: ReferenceSource) -> None:
        """:param reference_policy: the checked ``reference_policy`` option (the other options are stored already)"""
        initial = isinstance(reference_policy, str) and reference_policy == "initial"
        self.reference_source = "initial" if initial else None if reference_policy is None else "given"
        self._reference_input = None if initial else reference_policy
        self._reference_config: Optional[dict[str, Any]] = None
        self._value_head_zeroed = False
        self.reference_policy: Optional[BasePolicy] = None
        self._reference_kl: Optional[ReferenceKL] = None
        self._rollout_stash: Optional[tuple[Any, np.ndarray, np.ndarray]] = None

    def _setup_rlhf(self) -> None:
        """Build the reference policy (given, or rebuilt on load) and check its spaces, before any training."""
        self._rlhf_rng = np.random.default_rng(self.seed)
        policy = None
        if self._reference_input is not None:
            policy = load_reference_policy(self._reference_input, self.device)
            self._reference_input = None
        elif self._reference_config is not None:  # loading: the weights arrive through set_parameters
            policy = rebuild_policy(self._reference_config, self.device)
        if policy is not None:
            check_reference_spaces(policy, self.observation_space, self.action_space)
            self._set_reference(policy)

    def _set_reference(self, policy: BasePolicy) -> None:
        self.reference_policy = policy
        self._reference_config = policy_config(policy)
        self._reference_kl = ReferenceKL(policy)

    def _setup_learn(
        self, total_timesteps: int, callback: Any = None, reset_num_timesteps: bool = True, *args: Any, **kwargs: Any
    ) -> Any:
        envs_reset = reset_num_timesteps or self._last_obs is None
        result = super()._setup_learn(total_timesteps, callback, reset_num_timesteps, *args, **kwargs)
        if self.reference_source == "initial" and self.reference_policy is None:
            self._set_reference(load_reference_policy(self.policy, self.device))
        if self._reference_kl is not None and envs_reset:
            self._reference_kl.reset()
        if self.zero_value_head and not self._value_head_zeroed:
            self._reset_value_head()
            self._value_head_zeroed = True
        return result

    def _rlhf_rewards(self, predicted: np.ndarray) -> np.ndarray:
        """
        The learned rewards of a rollout with the KL penalty (and whitening) applied, logged under ``rlhf/``.

        :param predicted: ``(n_steps, n_envs)`` learned rewards of the rollout in the buffer
        :return: the rewards GAE should see
        """
        rewards = predicted
        if self._reference_kl is not None:
            kl = self._reference_kl.kl(self.rollout_buffer)
            rewards = predicted - self.kl_coef * kl
            mean_kl = float(kl.mean())
            self.logger.record("rlhf/kl", mean_kl)
            self.logger.record("rlhf/kl_coef", self.kl_coef)
            self.logger.record("rlhf/reward_before_penalty", float(predicted.mean()))
            self.logger.record("rlhf/reward_after_penalty", float(rewards.mean()))
            if self.kl_target is not None:
                self.kl_coef = adaptive_kl_coef(self.kl_coef, mean_kl, self.kl_target, self.kl_horizon, kl.size)
        if self.whiten_reward:
            rewards = whiten(rewards, shift_mean=False)
            self.logger.record("rlhf/reward_whitened_mean", float(rewards.mean()))
        return rewards

    def _rlhf_stash(self, reward_obs: np.ndarray) -> None:
        """Keep the finished rollout's observations for reference samples (references only: SB3's reset makes new arrays)."""
        buffer = self.rollout_buffer
        self._rollout_stash = (buffer.observations, reward_obs, buffer.episode_starts)

    def _reference_features(self) -> np.ndarray:
        """Reward-model features of the current rollout's states with actions drawn from the reference policy."""
        # Called only after _rlhf_stash, with a reference policy and the reward encoder set up.
        policy_obs, reward_obs, starts = cast(tuple[Any, np.ndarray, np.ndarray], self._rollout_stash)
        actions = cast(ReferenceKL, self._reference_kl).sample_actions(policy_obs, starts, self._rlhf_rng)
        obs = reward_obs
        encoder = cast(FeatureEncoder, self._pref_encoder)
        encoded = encoder.encode_actions(actions.reshape(-1, *self.action_space.shape))  # type: ignore[misc]
        return np.concatenate([obs.reshape(len(encoded), -1), encoded], axis=-1)


__all__ = [
    "RLHF_PRESET",
    "RLHFMixin",
    "ReferenceKL",
    "adaptive_kl_coef",
    "check_reference_spaces",
    "check_rlhf_options",
    "fit_gain_bias",
    "load_reference_policy",
    "policy_config",
    "rebuild_policy",
    "whiten",
]
