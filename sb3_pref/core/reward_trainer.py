"""
Fitting a :class:`~sb3_pref.core.reward_model.RewardModel` to labelled pairs: the Bradley-Terry loss, the passes
over the labels, and the round schedules of :mod:`sb3_pref.core.reward_training` (B-Pref's, and early stopping on
held-out labels).

The model is only the ensemble (predict, save, load; its optimizer state travels with it so a saved model resumes
training where it stopped); the trainer owns how it learns. Two seams let a method change training without another
option on the model:

- ``label_filter(trainer, tensors) -> tensors``: the labelled pairs a round trains on, with the labels it trains
  them on (RIME's filter keeps the labels the model finds plausible and flips the very implausible ones,
  :mod:`sb3_pref.core.rime`); a filter with a ``round_done(stats)`` method is told each round's statistics;
- ``loss_terms``: callables ``(trainer, seg_0, seg_1, labels) -> scalar`` added to each minibatch's loss (SURF's loss
  on pseudo-labelled pairs, a regulariser);
- ``augment``: an object whose ``masks(batch, horizon, device)`` returns two ``(copies, batch, horizon)`` masks; each
  minibatch's Bradley-Terry loss is then taken on ``copies`` masked views of every pair instead of the whole pair
  (QPA's temporal crops, :mod:`sb3_pref.core.qpa`). Held-out scoring keeps the whole pairs.

With none of them, training is B-Pref's (and bit for bit what the model did before it had a trainer).
"""

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Callable, Optional, Protocol

import numpy as np
import torch as th
from torch.nn import functional as F

from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.reward_training import (
    MIN_FOLD,
    MIN_REL_IMPROVEMENT,
    N_FOLDS,
    PASSES_PER_NEW_LABEL,
    PATIENCE_PASSES,
    PATIENCE_STEPS,
    check_schedule,
    held_out_folds,
    round_steps,
)

if TYPE_CHECKING:
    from sb3_pref.core.preferences import PreferenceDataset

Tensors = tuple[th.Tensor, th.Tensor, th.Tensor]
#: ``(trainer, seg_0, seg_1, labels) -> scalar``: a term added to each minibatch's loss
LossTerm = Callable[["RewardTrainer", th.Tensor, th.Tensor, th.Tensor], th.Tensor]
#: ``(trainer, tensors) -> tensors``: the labelled pairs a round trains on, and their (possibly flipped) labels
LabelFilter = Callable[["RewardTrainer", Tensors], Tensors]


class PairAugment(Protocol):
    """Views of a minibatch's pairs that the loss is taken on (QPA's crops: :class:`sb3_pref.core.qpa.PairCrops`)."""

    def masks(self, batch: int, horizon: int, device: th.device) -> tuple[th.Tensor, th.Tensor]:
        """:return: ``(copies, batch, horizon)`` step weights of the first and the second segments' views"""
        ...


class RewardTrainer:
    """
    Trains a reward model's ensemble on preferences: one call of :meth:`fit` per query round, warm-started.

    :param model: the reward model to train (its ``lr``, ``train_batch_size``, ``label_margin`` and ``train_dtype``
        are the training settings, saved with it)
    :param loss_terms: extra loss terms added to every minibatch's Bradley-Terry loss (see the module docstring)
    :param label_filter: selects the labelled pairs each round trains on and their labels (None: all of them, as
        labelled)
    :param augment: masked views of each minibatch's pairs that the loss is taken on (None: the whole pairs)
    """

    def __init__(
        self,
        model: RewardModel,
        loss_terms: Sequence[LossTerm] = (),
        label_filter: Optional[LabelFilter] = None,
        augment: Optional[PairAugment] = None,
    ) -> None:
        if not isinstance(model, RewardModel):
            raise TypeError(f"model must be a RewardModel, got a {type(model).__name__}")
        self.model = model
        self.loss_terms = list(loss_terms)
        self.label_filter = label_filter
        self.augment = augment

    # ----------------------------------------------------------------- the loss
    def member_logits(
        self, seg_0: th.Tensor, seg_1: th.Tensor, masks: Optional[tuple[th.Tensor, th.Tensor]] = None
    ) -> th.Tensor:
        """
        :param seg_0: ``(E, B, H, D)`` first segments
        :param seg_1: ``(E, B, H, D)`` second segments
        :param masks: ``(C, B, H)`` weights of each step in ``C`` views of the first and second segments (None: the
            whole segments, ``C = 1``)
        :return: each member's predicted returns ``(E, C * B, 2)`` (Bradley-Terry logits), view-major
        """
        model = self.model
        n_members, batch = seg_0.shape[:2]
        both = th.cat([seg_0, seg_1], dim=1).reshape(n_members, -1, model.input_dim)
        with th.autocast(model.device.type, dtype=th.bfloat16, enabled=model.train_dtype == "bfloat16"):
            step_rewards = model.ensemble(both)
        # Returns and the loss in float32 whatever the forward pass used: a bf16 sum over H steps loses digits.
        step_rewards = step_rewards.float().reshape(n_members, 2, batch, -1)  # (E, 2, B, H)
        if masks is None:
            returns = step_rewards.sum(-1)  # (E, 2, B)
        else:
            # one forward pass serves every view: a view's return is a masked sum of the same step rewards
            returns = th.stack(
                [th.einsum("ebh,cbh->ecb", step_rewards[:, side], mask).reshape(n_members, -1) for side, mask in
                 enumerate(masks)], dim=1,
            )  # fmt: skip
        return returns.permute(0, 2, 1)

    def member_losses(
        self, seg_0: th.Tensor, seg_1: th.Tensor, labels: th.Tensor, masks: Optional[tuple[th.Tensor, th.Tensor]] = None
    ) -> tuple[th.Tensor, th.Tensor]:
        """
        Bradley-Terry cross-entropy of ``(E, B, H, D)`` pairs against soft labels ``(E, B)``.

        :param masks: views of the pairs the loss is taken on (see :meth:`member_logits`); each keeps its pair's label
        :return: each member's mean loss ``(E,)`` and whether each pair (each view) is right ``(E, C * B)``
        """
        model = self.model
        logits = self.member_logits(seg_0, seg_1, masks)  # (E, C * B, 2)
        if masks is not None:
            labels = labels.repeat(1, len(masks[0]))  # view-major, as the logits
        target_1 = labels * (1 - 2 * model.label_margin) + model.label_margin
        targets = th.stack([1 - target_1, target_1], dim=-1)
        losses = -(targets * F.log_softmax(logits, dim=-1)).sum(-1).mean(-1)
        # Accuracy as B-Pref counts it: argmax of the two returns (a tie picks the first segment) against
        # the label, with "equal" labels counted as preferring the first segment; every pair counts.
        correct = (logits[..., 1] > logits[..., 0]) == (labels > 0.5)
        return losses, correct

    def pair_loss(self, seg_0: th.Tensor, seg_1: th.Tensor, labels: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """:return: the members' losses summed (each member gets the full gradient scale) plus the extra terms,
        pairs right, pairs counted"""
        masks = None if self.augment is None else self.augment.masks(seg_0.shape[1], seg_0.shape[2], seg_0.device)
        losses, correct = self.member_losses(seg_0, seg_1, labels, masks)
        loss = losses.sum()
        for term in self.loss_terms:
            loss = loss + term(self, seg_0, seg_1, labels)
        return loss, correct.sum(), th.tensor(correct.numel())

    def held_out_losses(self, tensors: Tensors, index: th.Tensor) -> tuple[th.Tensor, float]:
        """
        :param tensors: the dataset's ``(features_0, features_1, labels)`` tensors
        :param index: ``(E, V)`` the pairs each member is scored on
        :return: each member's Bradley-Terry loss on its pairs ``(E,)``, and their mean accuracy (no gradient)
        """
        seg_0, seg_1, labels = tensors
        with th.no_grad():
            losses, correct = self.member_losses(seg_0[index], seg_1[index], labels[index])
        return losses, float(correct.float().mean())

    def regress(self, features: th.Tensor, targets: th.Tensor) -> float:
        """
        One gradient step of every member towards per-step reward targets, on the same batch (mean squared error,
        summed over members): RIME's warm start on the state-entropy reward (:func:`sb3_pref.core.rime.warm_start_targets`).
        With ``input_norm``, a model that has not seen labels yet standardises its inputs by this first batch.

        :param features: ``(N, input_dim)`` rows of ``concat(obs, action)``
        :param targets: ``(N,)`` the rewards to regress onto
        :return: the loss (summed over members) before the step
        """
        model = self.model
        if model.input_norm and not model.ensemble.inputs_fitted:
            model.ensemble.fit_inputs(features)
        inputs = features.to(model.device).expand(model.ensemble_size, *features.shape)
        with th.autocast(model.device.type, dtype=th.bfloat16, enabled=model.train_dtype == "bfloat16"):
            predicted = model.ensemble(inputs)
        loss = (predicted.float().reshape(model.ensemble_size, -1) - targets.to(model.device)).pow(2).mean(-1).sum()
        model.optimizer.zero_grad()
        loss.backward()
        model.optimizer.step()
        return float(loss.item())

    # ----------------------------------------------------------------- passes
    def dataset_tensors(self, dataset: "PreferenceDataset") -> Tensors:
        """:return: the labelled pairs as tensors on the model's device (one copy, reused by every pass)"""
        if len(dataset) == 0:
            raise ValueError("dataset is empty: label some pairs before training the reward model")
        device = self.model.device
        return (
            th.tensor(dataset.features_0, device=device),
            th.tensor(dataset.features_1, device=device),
            th.tensor(dataset.labels, dtype=th.float32, device=device),
        )

    def fit_epoch(self, dataset: "PreferenceDataset", rng: np.random.Generator) -> dict[str, float]:
        """One pass over a dataset's labelled pairs (:meth:`train_epoch` on :meth:`dataset_tensors`)."""
        return self.train_epoch(self.dataset_tensors(dataset), rng)

    def train_epoch(
        self,
        tensors: Tensors,
        rng: np.random.Generator,
        max_steps: Optional[int] = None,
        lr_for_step: Optional[Callable[[int], float]] = None,
        member_pairs: Optional[th.Tensor] = None,
    ) -> dict[str, float]:
        """
        One pass over the labelled pairs in minibatches of ``train_batch_size``; every member sees its own random
        permutation (B-Pref's ensemble diversity).

        :param tensors: from :meth:`dataset_tensors`
        :param rng: generator of the permutations
        :param max_steps: stop the pass after this many minibatches (None: the whole pass)
        :param lr_for_step: learning rate of the pass's ``i``-th minibatch (None leaves it as it is)
        :param member_pairs: ``(E, L)`` the pairs each member trains on (None: every pair)
        :return: ``{"loss", "accuracy"}``: mean minibatch loss, and training accuracy counted as B-Pref does
            (every pair; an "equal" label counts as right when the first segment's return is not lower)
        """
        model = self.model
        seg_0_all, seg_1_all, labels_all = tensors
        if member_pairs is None:
            n_pairs = len(labels_all)
            order = th.as_tensor(np.stack([rng.permutation(n_pairs) for _ in range(model.ensemble_size)]), device=model.device)
        else:
            # each member its own permutation of its own pairs
            n_pairs = member_pairs.shape[1]
            perms = th.as_tensor(np.stack([rng.permutation(n_pairs) for _ in range(model.ensemble_size)]), device=model.device)
            order = th.gather(member_pairs, 1, perms)
        starts = range(0, n_pairs, model.train_batch_size)[:max_steps]
        total_loss, n_correct, n_counted, n_batches = 0.0, 0, 0, 0
        for step, start in enumerate(starts):
            if lr_for_step is not None:
                for group in model.optimizer.param_groups:
                    group["lr"] = lr_for_step(step)
            index = order[:, start : start + model.train_batch_size]
            loss, correct, counted = self.pair_loss(seg_0_all[index], seg_1_all[index], labels_all[index])
            model.optimizer.zero_grad()
            loss.backward()
            model.optimizer.step()
            total_loss += loss.item()
            n_correct += int(correct)
            n_counted += int(counted)
            n_batches += 1
        model.n_updates += n_batches
        return {"loss": total_loss / n_batches, "accuracy": n_correct / max(n_counted, 1)}

    # ----------------------------------------------------------------- rounds
    def fit(
        self,
        dataset: "PreferenceDataset",
        rng: np.random.Generator,
        max_epochs: int = 100,
        target_accuracy: float = 0.97,
        anneal_lr: bool = False,
        schedule: str = "auto",
        n_new: Optional[int] = None,
        passes_per_new_label: float = PASSES_PER_NEW_LABEL,
    ) -> dict[str, float]:
        """
        One round of training on the labelled pairs, warm-started from the current weights
        (see :mod:`sb3_pref.core.reward_training` for the schedules).

        :param dataset: labelled pairs
        :param rng: generator of the minibatch permutations
        :param max_epochs: the most passes over the data (B-Pref's ``re_update``)
        :param target_accuracy: stop after the first pass whose training accuracy exceeds it
        :param anneal_lr: decay the learning rate linearly to 0 over this round's gradient steps (and run them all)
        :param schedule: ``"auto"`` (early stop on held-out labels) or ``"bpref"`` (up to ``max_epochs``
            passes over all labels, until the training accuracy exceeds ``target_accuracy``)
        :param n_new: labels added since the last round (``"auto"`` only); None: all of them
        :param passes_per_new_label: ``"auto"``'s least training per round, in passes over the new labels
        :return: ``{"loss", "accuracy"}`` of the last pass, ``"epochs"`` (passes) and ``"steps"`` (gradient
            steps); ``"auto"`` adds ``"held_out_loss"`` and ``"held_out_accuracy"`` (members on their held-out folds)
        """
        check_schedule(schedule)
        if max_epochs < 1:
            raise ValueError(f"max_epochs must be >= 1, got {max_epochs}")
        if not passes_per_new_label > 0:
            raise ValueError(f"passes_per_new_label must be positive, got {passes_per_new_label!r}")
        tensors = self.dataset_tensors(dataset)
        if self.label_filter is not None:
            tensors = self.label_filter(self, tensors)
            if len(tensors[2]) == 0:
                return {"loss": float("nan"), "accuracy": float("nan"), "epochs": 0.0, "steps": 0.0}
        stats = self._fit_round(tensors, rng, max_epochs, target_accuracy, anneal_lr, schedule, n_new, passes_per_new_label)
        round_done = getattr(self.label_filter, "round_done", None)
        if round_done is not None:
            round_done(stats)
        return stats

    def _fit_round(
        self,
        tensors: Tensors,
        rng: np.random.Generator,
        max_epochs: int,
        target_accuracy: float,
        anneal_lr: bool,
        schedule: str,
        n_new: Optional[int],
        passes_per_new_label: float,
    ) -> dict[str, float]:
        """The round of :meth:`fit` on the pairs the filter kept."""
        model = self.model
        if model.input_norm and not model.ensemble.inputs_fitted:
            model.ensemble.fit_inputs(th.cat([tensors[0], tensors[1]]))
        n_pairs = len(tensors[2])
        n_new = n_pairs if n_new is None else min(max(int(n_new), 0), n_pairs)
        if schedule == "auto" and not anneal_lr and n_pairs >= N_FOLDS * MIN_FOLD:
            min_steps = math.ceil(passes_per_new_label * n_new / model.train_batch_size)
            return self.round_held_out(tensors, rng, min_steps, max_epochs)
        if schedule == "auto" and not anneal_lr:
            schedule = "bpref"  # too few labels to hold any out: B-Pref's round, cheap at this size
        n_steps = round_steps(schedule, n_pairs, n_new, model.train_batch_size, max_epochs, passes_per_new_label)
        return self.round_passes(tensors, rng, n_steps, target_accuracy, anneal_lr)

    def round_passes(
        self, tensors: Tensors, rng: np.random.Generator, n_steps: int, target_accuracy: Optional[float], anneal_lr: bool
    ) -> dict[str, float]:
        """
        Run up to ``n_steps`` gradient steps, in passes over the pairs (the last one possibly cut short);
        stop after a pass whose training accuracy exceeds ``target_accuracy`` (never with ``anneal_lr``
        or a None target). The learning rate is restored afterwards, also on an exception.

        :return: ``{"loss", "accuracy"}`` of the last pass, ``"epochs"`` (passes started), ``"steps"``
        """
        model = self.model
        steps_per_epoch = math.ceil(len(tensors[2]) / model.train_batch_size)
        stats: dict[str, float] = {}
        done, epochs = 0, 0
        try:
            while done < n_steps:
                take = min(steps_per_epoch, n_steps - done)
                lr_for_step = None
                if anneal_lr:
                    start = done

                    def lr_for_step(step: int, start: int = start) -> float:
                        return model.lr * (1.0 - (start + step) / n_steps)

                stats = self.train_epoch(tensors, rng, max_steps=take, lr_for_step=lr_for_step)
                done += take
                epochs += 1
                if not anneal_lr and target_accuracy is not None and stats["accuracy"] > target_accuracy:
                    break
        finally:
            for group in model.optimizer.param_groups:
                group["lr"] = model.lr
        return {**stats, "epochs": float(epochs), "steps": float(done)}

    def round_held_out(self, tensors: Tensors, rng: np.random.Generator, min_steps: int, max_epochs: int) -> dict[str, float]:
        """
        The ``"auto"`` round: passes over each member's training folds until no member's held-out loss
        has improved (by :data:`MIN_REL_IMPROVEMENT` of its best) for ``patience`` passes, at least
        ``min_steps`` steps and at most ``max_epochs`` passes; then each member returns to the weights of
        its best held-out loss (the warm start counts: a round that only hurts a member leaves it as it was).

        :return: ``{"loss", "accuracy"}`` of the last pass, ``"epochs"``, ``"steps"``, and the restored
            members' ``"held_out_loss"`` (mean) and ``"held_out_accuracy"``
        """
        model = self.model
        train_pairs, val_pairs = held_out_folds(len(tensors[2]), model.ensemble_size, model.device)
        steps_per_epoch = math.ceil(train_pairs.shape[1] / model.train_batch_size)
        patience = max(PATIENCE_PASSES, math.ceil(PATIENCE_STEPS / steps_per_epoch))
        params = list(model.ensemble.parameters())  # every one is (E, ...): member m is row m
        best_params = [p.detach().clone() for p in params]
        best_loss, _ = self.held_out_losses(tensors, val_pairs)
        since_best = th.zeros(model.ensemble_size, dtype=th.long, device=model.device)
        stats: dict[str, float] = {}
        done, epochs = 0, 0
        while epochs < max_epochs:
            stats = self.train_epoch(tensors, rng, member_pairs=train_pairs)
            done += steps_per_epoch
            epochs += 1
            losses, _ = self.held_out_losses(tensors, val_pairs)
            improved = losses < best_loss * (1.0 - MIN_REL_IMPROVEMENT)
            best_loss = th.where(improved, losses, best_loss)
            since_best = th.where(improved, 0, since_best + 1)
            with th.no_grad():
                for param, best in zip(params, best_params):
                    best[improved] = param[improved]
            if done >= min_steps and bool((since_best >= patience).all()):
                break
        with th.no_grad():
            for param, best in zip(params, best_params):
                param.copy_(best)
        losses, accuracy = self.held_out_losses(tensors, val_pairs)
        return {
            **stats,
            "epochs": float(epochs),
            "steps": float(done),
            "held_out_loss": float(losses.mean()),
            "held_out_accuracy": accuracy,
        }


__all__ = ["LabelFilter", "LossTerm", "PairAugment", "RewardTrainer"]
