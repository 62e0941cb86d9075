"""
RIME's filter of noisy labels (Cheng et al., ICML 2024), as a label filter of
:class:`~sb3_pref.core.reward_trainer.RewardTrainer`.

Before a round trains, every labelled pair is scored by the cross-entropy ``KL_i`` of the ensemble-mean
preference probability against its label. A label is *trusted* when

    KL_i < -ln(rho) + alpha * rho + min(beta_t * var(KL), 3)

where ``rho`` is an exponential moving average (rate 0.1) of the largest trusted KL so far (0 at first, so the first
round trusts everything below ~18.4 nats) and ``var(KL)`` the pooled variance of the trusted KLs so far; ``beta_t``
falls linearly from ``beta_init`` to ``beta_min`` over ``k`` passes of reward training. A label the model finds far
too implausible (``KL_i > -ln(flip_tau)``, 6.9 nats at the paper's ``flip_tau = 0.001``) is flipped for that round.
The round trains on the trusted pairs and the flipped ones; the stored labels never change.

Where this differs from the official code (CJReinforce/RIME_ICML2024), and why:

- the filter is computed once per round, not before every pass: the ``"auto"`` schedule holds out a fold of the
  round's pairs for early stopping, and the folds must stay the same pairs during a round. ``beta_t`` still counts
  passes (the round's passes are added when it ends);
- a pair both trusted and flipped (possible while ``rho`` is near 0) is trained on once, flipped; the official code
  trains on it twice;
- RIME's warm start of the reward model on the state-entropy reward is not part of the filter: it is
  :func:`warm_start_targets` with :meth:`~sb3_pref.core.reward_trainer.RewardTrainer.regress`, which the off-policy
  glue runs while pretraining (``rime_warm_start=True``).
"""

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th

from sb3_pref.core.checks import check_int

if TYPE_CHECKING:
    from sb3_pref.core.reward_trainer import RewardTrainer, Tensors

#: pairs per forward pass when scoring the labels (bounds the memory of a large label set)
SCORE_CHUNK = 1024
#: reward-model regression steps per gradient step of the agent while pretraining (RIME's warm start)
WARM_START_STEPS = 5


def warm_start_targets(distances: np.ndarray, mean: float, std: float) -> np.ndarray:
    """
    RIME's warm-start targets: the batch's k-NN distances standardised by the running statistics of all distances,
    then divided by their largest magnitude in the batch, so they fill the tanh output's ``[-1, 1]`` (RIME divides by
    the largest over its recent statistics; the batch's is the same scale without another running quantity).

    :param distances: ``(n,)`` k-NN distances of the batch's states
    :param mean: running mean of the distances
    :param std: running std of the distances
    :return: ``(n,)`` float32 targets in ``[-1, 1]``
    """
    standardised = (np.asarray(distances, dtype=np.float64) - mean) / max(float(std), 1e-8)
    scale = max(float(np.abs(standardised).max(initial=0.0)), 1e-8)
    return (standardised / scale).astype(np.float32)


class RIMEFilter:
    """
    RIME's robust label filter: keeps the labels the ensemble finds plausible, flips the ones it finds very
    implausible. Pass it as ``RewardTrainer(model, label_filter=RIMEFilter())``, or set ``rime=True`` on
    ``PPO_REWARD`` / ``SAC_REWARD``.

    :param alpha: weight of ``rho`` in the lower bound of the threshold (the paper's 0.5)
    :param beta_init: the variance term's weight at the start
    :param beta_min: its weight after ``k`` passes
    :param k: passes of reward training over which ``beta_t`` falls (60 for dm_control in the paper)
    :param flip_tau: labels whose ensemble-mean probability is below this are flipped
    :param ema_rate: rate of the moving average of the largest trusted KL
    """

    def __init__(
        self,
        alpha: float = 0.5,
        beta_init: float = 3.0,
        beta_min: float = 1.0,
        k: int = 60,
        flip_tau: float = 0.001,
        ema_rate: float = 0.1,
    ) -> None:
        for name, value in (("alpha", alpha), ("beta_init", beta_init), ("beta_min", beta_min)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if beta_min > beta_init:
            raise ValueError(f"beta_min={beta_min} is above beta_init={beta_init}: beta_t falls from beta_init to beta_min")
        for name, value in (("flip_tau", flip_tau), ("ema_rate", ema_rate)):
            if not (isinstance(value, (int, float)) and 0 < value < 1):
                raise ValueError(f"{name} must be in (0, 1), got {value!r}")
        self.alpha, self.beta_init, self.beta_min = float(alpha), float(beta_init), float(beta_min)
        self.k = check_int("k", k, minimum=1, example=60)
        self.flip_tau, self.ema_rate = float(flip_tau), float(ema_rate)
        # The running statistics of the trusted KLs (RIME's RunningMeanStd in its "fixed" mode).
        self.kl_mean, self.kl_max, self.kl_var, self.kl_count = 0.0, 0.0, 1.0, 0
        self.passes = 0
        #: what the last round did, for the logger: fractions of the labels trusted and flipped, the threshold
        self.stats: dict[str, float] = {}

    # ----------------------------------------------------------------- the rule
    def beta(self) -> float:
        """:return: ``beta_t`` after the passes trained so far"""
        return max(self.beta_min, self.beta_init - (self.beta_init - self.beta_min) * self.passes / self.k)

    def threshold(self) -> float:
        """:return: the KL below which a label is trusted"""
        rho = self.kl_max
        return -math.log(rho + 1e-8) + self.alpha * rho + min(self.beta() * self.kl_var, 3.0)

    def flip_threshold(self) -> float:
        """:return: the KL above which a label is flipped"""
        return -math.log(self.flip_tau)

    @staticmethod
    def label_kl(trainer: "RewardTrainer", tensors: "Tensors") -> th.Tensor:
        """
        :return: ``(N,)`` each label's cross-entropy against the ensemble-mean probability that the second
            segment is preferred (soft labels: an "equal" label's target is 0.5 / 0.5)
        """
        seg_0, seg_1, labels = tensors
        n_members = trainer.model.ensemble_size
        p_1 = []
        with th.no_grad():
            for start in range(0, len(labels), SCORE_CHUNK):
                chunk = slice(start, start + SCORE_CHUNK)
                # every member scores every pair: (E, B, H, D) views, no copy
                first, second = (seg[chunk].expand(n_members, *seg[chunk].shape) for seg in (seg_0, seg_1))
                logits = trainer.member_logits(first, second)  # (E, B, 2)
                p_1.append(th.softmax(logits, dim=-1)[..., 1].mean(0))
        p = th.cat(p_1).clamp(1e-12, 1 - 1e-12)
        return -(labels * th.log(p) + (1 - labels) * th.log1p(-p))

    def update(self, trusted_kl: th.Tensor) -> None:
        """Move the running statistics by one batch of trusted KLs (RIME's "fixed" mode: EMA mean and max, pooled var)."""
        n = len(trusted_kl)
        if n == 0:
            return
        batch = trusted_kl.double()
        batch_mean, batch_var, batch_max = float(batch.mean()), float(batch.var(unbiased=False)), float(batch.max())
        delta = batch_mean - self.kl_mean
        total = self.kl_count + n
        self.kl_mean += delta * self.ema_rate
        self.kl_max += (batch_max - self.kl_max) * self.ema_rate
        pooled = self.kl_var * self.kl_count + batch_var * n + delta**2 * self.kl_count * n / total
        self.kl_var = pooled / total
        self.kl_count = total

    # ----------------------------------------------------------------- the seam
    def __call__(self, trainer: "RewardTrainer", tensors: "Tensors") -> "Tensors":
        """:return: the round's pairs: the trusted ones, and the flipped ones with their labels flipped"""
        seg_0, seg_1, labels = tensors
        kl = self.label_kl(trainer, tensors)
        threshold = self.threshold()
        trusted = kl < threshold
        flipped = kl > self.flip_threshold()
        self.update(kl[trusted])
        keep = trusted | flipped
        labels = th.where(flipped, 1.0 - labels, labels)
        self.stats = {
            "rime_trusted": float(trusted.float().mean()),
            "rime_flipped": float(flipped.float().mean()),
            "rime_threshold": threshold,
        }
        return seg_0[keep], seg_1[keep], labels[keep]

    def round_done(self, stats: dict[str, float]) -> None:
        """Count the round's passes (``beta_t`` falls over passes, as in the paper)."""
        self.passes += int(stats.get("epochs", 0))

    # ----------------------------------------------------------------- saving
    def state_dict(self) -> dict[str, Any]:
        """:return: the running statistics and the pass count (the settings are the option's)"""
        return {
            "kl_mean": self.kl_mean,
            "kl_max": self.kl_max,
            "kl_var": self.kl_var,
            "kl_count": self.kl_count,
            "passes": self.passes,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.kl_mean, self.kl_max, self.kl_var = float(state["kl_mean"]), float(state["kl_max"]), float(state["kl_var"])
        self.kl_count, self.passes = int(state["kl_count"]), int(state["passes"])


__all__ = ["RIMEFilter"]
