"""
The value loss of PPO_REWARD's update: SB3's, or the RLHF document's clipped maximum.

The document (OpenAI's lm-human-preferences) keeps the new value prediction within ``cliprange_value``
of the value recorded during the rollout, and takes the larger of the two squared errors::

    V_clipped = V_old + clamp(V - V_old, -clip_range_vf, clip_range_vf)
    value_loss = 0.5 * mean(max((V - R) ** 2, (V_clipped - R) ** 2))

so a prediction that moved past the window towards the return gets no gradient, while one that moved
away from it is still pulled back. SB3's PPO with ``clip_range_vf`` minimises ``mean((V_clipped - R) ** 2)``
alone, which gives no gradient whenever the window is left, in either direction.

``value_loss="sb3"`` (the default) leaves SB3's ``PPO.train`` in charge, untouched; ``"clipped_max"`` runs
:func:`clipped_max_update`, a PPO update of its own that differs from SB3's only in the value term.
"""

from typing import TYPE_CHECKING, Optional

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.utils import explained_variance

#: ``value_loss`` choices: SB3's own update, or the RLHF document's ``0.5 * max(unclipped, clipped)``.
VALUE_LOSSES = ("sb3", "clipped_max")


def check_value_loss(value_loss: str, clip_range_vf: object) -> None:
    """
    Clear errors for ``value_loss`` and the clip width it needs, before anything is trained.

    :param value_loss: ``"sb3"`` or ``"clipped_max"``
    :param clip_range_vf: PPO's ``clip_range_vf`` (a number, a schedule, or None)
    """
    if value_loss not in VALUE_LOSSES:
        raise ValueError(f"value_loss must be one of {VALUE_LOSSES}, got {value_loss!r}")
    if value_loss == "clipped_max" and clip_range_vf is None:
        raise ValueError(
            "value_loss='clipped_max' clips the value prediction around the rollout's value, and the width of that "
            "window is clip_range_vf, which is None: pass clip_range_vf (e.g. clip_range_vf=0.2, the RLHF document's "
            "cliprange_value, in units of the return), or value_loss='sb3' for an unclipped value loss"
        )


def clipped_max_value_loss(values: th.Tensor, old_values: th.Tensor, returns: th.Tensor, clip_range_vf: float) -> th.Tensor:
    """
    ``0.5 * mean(max((V - R)^2, (V_clipped - R)^2))`` with ``V_clipped = V_old + clamp(V - V_old, +-clip_range_vf)``.

    :param values: the current predictions ``V``, ``(batch,)``
    :param old_values: the predictions recorded during the rollout ``V_old``, ``(batch,)``
    :param returns: the targets ``R`` (GAE returns), ``(batch,)``
    :param clip_range_vf: the half-width of the window around ``V_old``
    """
    clipped = old_values + th.clamp(values - old_values, -clip_range_vf, clip_range_vf)
    return 0.5 * th.max(th.square(values - returns), th.square(clipped - returns)).mean()


if TYPE_CHECKING:
    # For type checkers only, as in common/rlhf.py: at run time the base is object and the MRO is unchanged.
    from stable_baselines3 import PPO as _PPOBase
else:
    _PPOBase = object


class ValueLossMixin(_PPOBase):
    """
    Chooses the update of a PPO subclass by its ``value_loss`` attribute (set by the constructor and
    saved with the model's data; a model saved before the option existed loads as ``"sb3"``).
    """

    value_loss: str = "sb3"

    def _setup_model(self) -> None:
        # Also on load, where value_loss=... or clip_range_vf=... may be given to load().
        check_value_loss(self.value_loss, self.clip_range_vf)
        super()._setup_model()

    def train(self) -> None:
        if self.value_loss == "sb3":
            return super().train()
        return clipped_max_update(self)


def clipped_max_update(algo: "_PPOBase") -> None:
    """
    One PPO update on the rollout in ``algo.rollout_buffer``: ``n_epochs`` passes in minibatches of
    ``batch_size``, the clipped surrogate, the entropy bonus and the clipped-maximum value loss, with
    ``target_kl`` early stopping and gradient-norm clipping; logged under SB3's ``train/`` keys.

    gSDE: the exploration matrix is drawn while acting (``sde_sample_freq``, in ``collect_rollouts``);
    the log-probabilities and entropies used here depend on the policy's std and features only, not on
    the drawn matrix, so the update draws none (as SB3's own update since 2.4).

    :param algo: a PPO (or subclass) whose ``clip_range_vf`` is set
    """
    policy = algo.policy
    policy.set_training_mode(True)
    algo._update_learning_rate(policy.optimizer)
    progress = algo._current_progress_remaining
    clip_range = float(algo.clip_range(progress))  # type: ignore[operator]  # a schedule after _setup_model
    clip_range_vf = float(algo.clip_range_vf(progress))  # type: ignore[misc,operator]
    discrete = isinstance(algo.action_space, spaces.Discrete)

    pg_losses: list[float] = []
    value_losses: list[float] = []
    entropy_losses: list[float] = []
    clip_fractions: list[float] = []
    approx_kls: list[float] = []  # of the last epoch run, as SB3 logs them
    loss: Optional[th.Tensor] = None
    stopped = False
    for epoch in range(algo.n_epochs):
        approx_kls = []
        for batch in algo.rollout_buffer.get(algo.batch_size):
            # The buffer stores every action as float: a Discrete action goes back to a flat index.
            actions = batch.actions.long().flatten() if discrete else batch.actions
            values, log_prob, entropy = policy.evaluate_actions(batch.observations, actions)
            values = values.flatten()

            advantages = batch.advantages
            if algo.normalize_advantage and len(advantages) > 1:  # the std of a single sample is undefined
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            log_ratio = log_prob - batch.old_log_prob
            ratio = th.exp(log_ratio)
            surrogate = th.min(advantages * ratio, advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range))
            policy_loss = -surrogate.mean()
            value_loss = clipped_max_value_loss(values, batch.old_values, batch.returns, clip_range_vf)
            # Without a closed-form entropy (e.g. a squashed Gaussian), -log_prob of the taken actions estimates it.
            entropy_loss = -(entropy if entropy is not None else -log_prob).mean()
            loss = policy_loss + algo.ent_coef * entropy_loss + algo.vf_coef * value_loss

            pg_losses.append(policy_loss.item())
            value_losses.append(value_loss.item())
            entropy_losses.append(entropy_loss.item())
            clip_fractions.append((th.abs(ratio - 1) > clip_range).float().mean().item())
            with th.no_grad():
                # The non-negative estimator E[(r - 1) - log r] of KL(old || new).
                approx_kl = ((ratio - 1) - log_ratio).mean().item()
            approx_kls.append(approx_kl)
            if algo.target_kl is not None and approx_kl > 1.5 * algo.target_kl:
                # The policy left the trust region: this minibatch is not applied and the update ends.
                stopped = True
                if algo.verbose >= 1:
                    print(f"Early stopping at step {epoch} due to reaching max kl: {approx_kl:.2f}")
                break

            policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), algo.max_grad_norm)
            policy.optimizer.step()
        algo._n_updates += 1  # SB3 counts epochs, including the one cut short
        if stopped:
            break

    buffer = algo.rollout_buffer
    logger = algo.logger
    logger.record("train/entropy_loss", np.mean(entropy_losses))
    logger.record("train/policy_gradient_loss", np.mean(pg_losses))
    logger.record("train/value_loss", np.mean(value_losses))
    logger.record("train/approx_kl", np.mean(approx_kls))
    logger.record("train/clip_fraction", np.mean(clip_fractions))
    logger.record("train/loss", loss.item() if loss is not None else float("nan"))
    logger.record("train/explained_variance", explained_variance(buffer.values.flatten(), buffer.returns.flatten()))
    if hasattr(policy, "log_std"):
        logger.record("train/std", th.exp(policy.log_std).mean().item())
    logger.record("train/n_updates", algo._n_updates, exclude="tensorboard")
    logger.record("train/clip_range", clip_range)
    logger.record("train/clip_range_vf", clip_range_vf)


__all__ = ["VALUE_LOSSES", "ValueLossMixin", "check_value_loss", "clipped_max_update", "clipped_max_value_loss"]
