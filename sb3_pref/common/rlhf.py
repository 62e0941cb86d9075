"""
RLHF-for-control pieces (OpenAI's lm-human-preferences details, adapted to SB3 policies): a frozen
reference policy, the per-step KL penalty to it with a fixed or adaptive coefficient, reward
whitening, gain/bias fitting, and the preset that groups the reward-model details.

The algorithm side (when these run in a rollout) is the rollout buffer's reward writer,
:class:`~sb3_pref.common.rollout_writer.RolloutRewardWriter`.
The reference policy and the KL measurement are defined in :mod:`sb3_pref.common.reference_kl` and
importable from here too.

KL estimator: the document's per-token ``kl = logprob - ref_logprob`` at the *sampled* action, i.e.
``log pi(a_t|s_t) - log pi_ref(a_t|s_t)`` with ``a_t ~ pi``. Its expectation over ``a_t`` is
``KL(pi(.|s_t) || pi_ref(.|s_t))``; a single sample can be negative. ``log pi`` is the log-probability
the rollout buffer already holds (computed while acting), so only the reference policy runs, once
per rollout over all its transitions.
"""

from typing import Any, Optional

import numpy as np

from sb3_pref.common.options import OPTIONS_BY_NAME

# The reference policy and KL machinery live in reference_kl.py; imported here so that
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


__all__ = [
    "RLHF_PRESET",
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
