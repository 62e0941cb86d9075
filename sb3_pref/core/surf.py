"""
SURF's semi-supervised reward learning (Park et al., ICLR 2022), as a loss term of the
:class:`~sb3_pref.core.reward_trainer.RewardTrainer`.

Each query round the learner also draws a pool of unlabelled pairs (:meth:`SURFLoss.set_pool`, uniformly from the
same segments the queries come from). Every labelled minibatch of ``B`` pairs then brings ``mu * B`` unlabelled
pairs per member: where the member itself is confident about a pair (its larger Bradley-Terry probability is at
least ``tau``), that answer is the pair's pseudo-label, and the member is trained on it with the same cross-entropy,
weighted by ``lam``:

    loss = CE(labelled) + lam * mean_over_unlabelled(mask * CE(pseudo-label))

Temporal cropping (SURF's data augmentation): the pseudo-label is taken on the whole pair, the loss on a random
crop of it, the same length for both segments of a pair (at least ``H - crop`` steps) with independent starts, so
the model learns that a shifted view of a behaviour is worth the same. SURF stores its segments ``2 * crop`` steps
longer and crops ``H +- crop`` from them; here the crops come from inside the stored segments, so they are at most
``H`` long.
"""

from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np
import torch as th
from torch.nn import functional as F

from sb3_pref.core.checks import check_int

if TYPE_CHECKING:
    from sb3_pref.core.reward_trainer import RewardTrainer


class SURFLoss:
    """
    SURF's loss on pseudo-labelled pairs, a ``loss_terms`` entry of the reward trainer.

    :param tau: confidence threshold of a pseudo-label (SURF's runs: 0.99; its code's default 0.95)
    :param lam: weight of the pseudo-labelled loss (SURF: 1)
    :param mu: unlabelled pairs per labelled pair in each minibatch, per member (SURF: 4)
    :param crop: the most steps a temporal crop drops (SURF: 5; 0 turns cropping off)
    :param seed: seed of the term's own generator, or the generator (which pool pairs, crop lengths and starts)
    """

    def __init__(
        self,
        tau: float = 0.99,
        lam: float = 1.0,
        mu: int = 4,
        crop: int = 5,
        seed: Union[int, np.random.Generator, None] = None,
    ) -> None:
        if not 0.5 <= tau <= 1:
            raise ValueError(f"tau must be in [0.5, 1] (a probability of the more likely answer), got {tau!r}")
        if not lam >= 0:
            raise ValueError(f"lam must be >= 0, got {lam!r}")
        self.tau, self.lam = float(tau), float(lam)
        self.mu = check_int("mu", mu, minimum=1, example=4)
        self.crop = check_int("crop", crop, minimum=0, example=5)
        self.rng = np.random.default_rng(seed)
        self.pool: Optional[tuple[th.Tensor, th.Tensor]] = None
        #: share of the unlabelled pairs confident enough for a pseudo-label, over the minibatches since the pool was
        #: set (logged as ``reward/surf_confident``); with the pool's true returns, also the share of those
        #: pseudo-labels that rank the pair as its true returns do (``reward/surf_pseudo_agreement``, ties left out)
        self.stats: dict[str, float] = {}
        self.true_better: Optional[th.Tensor] = None
        self._confident = self._seen = self._right = self._judged = 0.0

    def set_pool(
        self,
        features_0: np.ndarray,
        features_1: np.ndarray,
        device: th.device,
        true_returns: Optional[tuple[np.ndarray, np.ndarray]] = None,
    ) -> None:
        """
        :param features_0: ``(N, H, D)`` first segments of the round's unlabelled pairs
        :param features_1: ``(N, H, D)`` their second segments
        :param device: the reward model's device
        :param true_returns: ``(N,)`` the env's returns of the first and of the second segments, for the diagnostic
            ``surf_pseudo_agreement`` only (the loss never sees them); None: not measured
        """
        if features_0.shape != features_1.shape or features_0.ndim != 3 or len(features_0) == 0:
            raise ValueError(
                f"the pool needs two (N, H, D) arrays of the same shape, got {features_0.shape} and {features_1.shape}"
            )
        self.pool = (th.as_tensor(features_0, device=device), th.as_tensor(features_1, device=device))
        self.true_better = None
        if true_returns is not None:
            true_0, true_1 = (np.asarray(returns, dtype=np.float64).reshape(len(features_0)) for returns in true_returns)
            # 1: the second segment is better, 0: the first, -1: a tie (left out of the diagnostic)
            self.true_better = th.as_tensor(np.where(true_0 == true_1, -1, (true_1 > true_0).astype(np.int64)), device=device)
        self._confident = self._seen = self._right = self._judged = 0.0

    def __call__(self, trainer: "RewardTrainer", seg_0: th.Tensor, seg_1: th.Tensor, labels: th.Tensor) -> th.Tensor:
        """:return: ``lam`` times the members' summed mean pseudo-label loss on ``mu * B`` unlabelled pairs each"""
        if self.pool is None or self.lam == 0:
            return seg_0.new_zeros(())
        n_members, batch = seg_0.shape[:2]
        pool_0, pool_1 = self.pool
        index = th.as_tensor(self.rng.integers(len(pool_0), size=(n_members, self.mu * batch)), device=pool_0.device)
        unlabelled_0, unlabelled_1 = pool_0[index], pool_1[index]  # (E, mu B, H, D)
        with th.no_grad():
            probabilities = F.softmax(trainer.member_logits(unlabelled_0, unlabelled_1), dim=-1)
        confidence, pseudo = probabilities.max(dim=-1)  # (E, mu B): each member labels for itself
        mask = (confidence >= self.tau).float()
        self._confident += float(mask.sum())
        self._seen += mask.numel()
        self.stats = {"surf_confident": self._confident / self._seen}
        if self.true_better is not None:
            self._count_right(pseudo, mask, self.true_better[index])
        if self.crop:
            unlabelled_0, unlabelled_1 = self.temporal_crop(unlabelled_0, unlabelled_1)
        logits = trainer.member_logits(unlabelled_0, unlabelled_1)
        losses = F.cross_entropy(logits.reshape(-1, 2), pseudo.reshape(-1), reduction="none").reshape(mask.shape)
        return self.lam * (losses * mask).mean(dim=-1).sum()

    def _count_right(self, pseudo: th.Tensor, mask: th.Tensor, true_better: th.Tensor) -> None:
        """Add a minibatch's confident pseudo-labels to the diagnostic: how many rank their pair as the env does."""
        judged = (mask > 0) & (true_better >= 0)
        self._judged += float(judged.sum())
        self._right += float((judged & (pseudo == true_better)).sum())
        self.stats["surf_pseudo_agreement"] = self._right / self._judged if self._judged else float("nan")

    def temporal_crop(self, seg_0: th.Tensor, seg_1: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """
        :param seg_0: ``(..., H, D)`` first segments
        :param seg_1: ``(..., H, D)`` second segments
        :return: crops of one random length in ``[H - crop, H]`` (at least 1 step) with a random start per segment
        """
        horizon = seg_0.shape[-2]
        length = int(self.rng.integers(max(1, horizon - self.crop), horizon + 1))
        return self._crop(seg_0, length), self._crop(seg_1, length)

    def _crop(self, segments: th.Tensor, length: int) -> th.Tensor:
        horizon = segments.shape[-2]
        starts = th.as_tensor(self.rng.integers(0, horizon - length + 1, size=segments.shape[:-2]), device=segments.device)
        steps = (starts[..., None] + th.arange(length, device=segments.device)).unsqueeze(-1)
        return th.gather(segments, -2, steps.expand(*steps.shape[:-1], segments.shape[-1]))

    def state_dict(self) -> dict[str, Any]:
        """The generator's state (the pool is drawn anew each round)."""
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
