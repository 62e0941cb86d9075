"""
The reward-model side of :class:`~sb3_pref.core.learner.PreferenceLearner`: :class:`LearnerRewardMixin`, its base,
holds what the learner does with its reward model besides the query round's bookkeeping: the trainer that fits it
(with the successors' seams: RIME's label filter, SURF's loss term and its unlabelled pool, QPA's crops), the rewards
it hands the policy (normalised, with RUNE's exploration bonus) and the agreement diagnostic.

It is apart from :mod:`sb3_pref.core.learner` because the two sides change for different reasons: the learner's loop
(segments in, queries out, labels and budget) is B-Pref's, while how the model is fitted and read is where the
successors plug in. The mixin keeps no state of its own: it reads the attributes ``PreferenceLearner.__init__`` sets
(declared below for type checkers), so the learner's saved state and public methods are unchanged.
"""

from typing import TYPE_CHECKING, Callable, Optional

import numpy as np

from sb3_pref.core import pair_draws
from sb3_pref.core.qpa import PairCrops
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.core.rime import RIMEFilter
from sb3_pref.core.segments import SegmentStore
from sb3_pref.core.surf import SURFLoss

#: SURF's unlabelled pairs per round, per query of the round (its DMC runs: 100), and at most this many pairs (the
#: pool lives on the reward model's device for the round: 4096 pairs of 50 steps of 30 features are 49 MB)
SURF_POOL_RATIO, SURF_POOL_MAX = 100, 4096


class LearnerRewardMixin:
    """
    Fitting, reading and measuring the :class:`~sb3_pref.core.learner.PreferenceLearner`'s reward model (see the
    module docstring); :class:`~sb3_pref.core.learner.PreferenceLearner` documents the arguments behind the attributes.
    """

    # For type checkers: set by PreferenceLearner.__init__ (and, for the shift and scale, by _fit_normalisation).
    reward_model: RewardModel
    store: SegmentStore
    _trainer: Optional[RewardTrainer]
    label_filter: Optional[RIMEFilter]
    surf: Optional[SURFLoss]
    pair_crops: Optional[PairCrops]
    rune_beta: float
    rune_decay: float
    reward_shift: float
    reward_scale: float
    normalization_sampler: Optional[Callable[[], np.ndarray]]
    n_eval_pairs: int
    eval_rng: np.random.Generator
    qpa_episodes: int

    if TYPE_CHECKING:
        # PreferenceLearner's, which the size and the draws of SURF's pool follow

        @property
        def size_segment(self) -> int: ...

        def round_size(self) -> int: ...

    # ------------------------------------------------------------- fitting
    @property
    def trainer(self) -> RewardTrainer:
        """Fits :attr:`reward_model` after each query round (built for the current model on first use)."""
        if self._trainer is None or self._trainer.model is not self.reward_model:
            loss_terms = [self.surf] if self.surf is not None else []
            self._trainer = RewardTrainer(
                self.reward_model, loss_terms=loss_terms, label_filter=self.label_filter, augment=self.pair_crops
            )
        return self._trainer

    @trainer.setter
    def trainer(self, trainer: RewardTrainer) -> None:
        if not isinstance(trainer, RewardTrainer) or trainer.model is not self.reward_model:
            raise ValueError(
                "trainer must be a RewardTrainer of this learner's reward_model: RewardTrainer(learner.reward_model, ...)"
            )
        self._trainer = trainer

    def _draw_unlabelled_pool(self, n_queries: int) -> None:
        """SURF: the round's unlabelled pairs, ``SURF_POOL_RATIO`` times the round's queries (at most ``SURF_POOL_MAX``)."""
        assert self.surf is not None
        n_pool = min(SURF_POOL_RATIO * max(n_queries, self.round_size()), SURF_POOL_MAX)
        seg_0, seg_1 = pair_draws.draw_pairs(self.store, n_pool, self.size_segment, self.surf.rng, self.qpa_episodes or None)
        # the true returns only feed the diagnostic reward/surf_pseudo_agreement, as they feed true_pref_accuracy
        true_returns = (seg_0.rewards.sum(1), seg_1.rewards.sum(1))
        self.surf.set_pool(seg_0.features, seg_1.features, self.reward_model.device, true_returns=true_returns)

    # ------------------------------------------------------------- reading
    def predict_rewards(self, obs: np.ndarray, actions: np.ndarray, num_timesteps: Optional[int] = None) -> np.ndarray:
        """
        Predicted rewards of encoded ``(..., obs_dim)`` / ``(..., act_dim)`` arrays, in one batched pass.

        :param num_timesteps: the run's env steps so far: with RUNE on, the rewards carry its exploration bonus
            (:meth:`predict_rewards_and_bonus`); None: the ensemble's mean only
        """
        rewards, bonus = self.predict_rewards_and_bonus(obs, actions, num_timesteps)
        return rewards if bonus is None else rewards + bonus

    def rune_weight(self, num_timesteps: int) -> float:
        """:return: RUNE's ``beta_t = rune_beta * (1 - rune_decay) ** num_timesteps``"""
        return self.rune_beta * (1.0 - self.rune_decay) ** num_timesteps

    def predict_rewards_and_bonus(
        self, obs: np.ndarray, actions: np.ndarray, num_timesteps: Optional[int] = None
    ) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """
        :return: the ensemble's mean reward (normalised as the policy's rewards are), and RUNE's bonus, ``beta_t``
            times the members' std on the same scale (None when RUNE is off or ``num_timesteps`` is None)
        """
        mean, std = self.reward_model.predict(np.concatenate([obs, actions], axis=-1))
        rewards = (mean - self.reward_shift) / self.reward_scale
        if num_timesteps is None or self.rune_beta == 0.0:
            return rewards, None
        return rewards, (self.rune_weight(num_timesteps) * std / abs(self.reward_scale)).astype(rewards.dtype)

    def _fit_normalisation(self, n_transitions: int = 10_000) -> None:
        # After this, predict_rewards on the same features has mean 0 / std 1 (gain 1/std, bias -mean/std).
        if self.normalization_sampler is not None:
            features = self.normalization_sampler()
        else:
            obs, actions, _ = self.store.last_transitions(n_transitions)
            features = np.concatenate([obs, actions], axis=-1)
        raw, _ = self.reward_model.predict(features)
        self.reward_shift = float(raw.mean())
        self.reward_scale = float(raw.std()) + 1e-8

    # ------------------------------------------------------------- measuring
    def oracle_agreement(self, n_pairs: Optional[int] = None) -> float:
        """Agreement of the model with a perfectly rational teacher on ``n_pairs`` fresh pairs (default ``n_eval_pairs``)."""
        return pair_draws.oracle_agreement(self.store, self.reward_model, n_pairs or self.n_eval_pairs, self.eval_rng)


__all__ = ["SURF_POOL_MAX", "SURF_POOL_RATIO", "LearnerRewardMixin"]
