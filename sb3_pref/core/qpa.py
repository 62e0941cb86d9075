"""
QPA's data augmentation (Hu et al., ICLR 2024), as the ``augment`` seam of the
:class:`~sb3_pref.core.reward_trainer.RewardTrainer`.

QPA asks few labels, so it uses each one many times: every labelled pair of a minibatch is counted ``copies`` times
(QPA: 20), each copy comparing a random crop of the first segment with a random crop of the second, of one length
for both (QPA: 35-45 of 50 steps, so 70-90% of the segment) and independent starts. The copies replace the whole
pair in the loss: a crop's return is the sum of the member's step rewards inside it, so one forward pass of the
segments serves every copy (the crops are masks over its step rewards).

The teacher judged the whole segments; a crop keeps at least 70% of each, so the label usually still holds, and
the model learns that a behaviour shifted by a few steps is worth the same. Held-out scoring (the ``"auto"``
schedule's early stop) uses the whole segments, as the teacher saw them.
"""

from typing import Any, Union

import numpy as np
import torch as th

from sb3_pref.core.checks import check_int


class PairCrops:
    """
    Random temporal crops of labelled pairs, as masks over their step rewards.

    :param copies: how many cropped copies of each labelled pair a minibatch counts (QPA: 20)
    :param shortest: the shortest crop, as a share of the segment (QPA: 35 of 50 steps, 0.7)
    :param longest: the longest crop, as a share of the segment (QPA: 45 of 50 steps, 0.9)
    :param seed: seed of the crops' own generator, or the generator
    """

    def __init__(
        self,
        copies: int = 20,
        shortest: float = 0.7,
        longest: float = 0.9,
        seed: Union[int, np.random.Generator, None] = None,
    ) -> None:
        self.copies = check_int("copies", copies, minimum=1, example=20)
        if not 0 < shortest <= longest <= 1:
            raise ValueError(f"crop shares must satisfy 0 < shortest <= longest <= 1, got {shortest!r} and {longest!r}")
        self.shortest, self.longest = float(shortest), float(longest)
        self.rng = np.random.default_rng(seed)

    def lengths(self, horizon: int) -> tuple[int, int]:
        """:return: the shortest and longest crop of a ``horizon``-step segment, in steps (at least 1)"""
        return max(1, round(self.shortest * horizon)), max(1, round(self.longest * horizon))

    def masks(self, batch: int, horizon: int, device: Union[th.device, str] = "cpu") -> tuple[th.Tensor, th.Tensor]:
        """
        :param batch: pairs in the minibatch
        :param horizon: steps per segment
        :param device: where the masks live (the reward model's device)
        :return: ``(copies, batch, horizon)`` float masks of the first and the second segments' crops: per copy and
            pair one length for both, an independent start for each
        """
        low, high = self.lengths(horizon)
        length = self.rng.integers(low, high + 1, size=(self.copies, batch))
        steps = np.arange(horizon)

        def one_side() -> th.Tensor:
            start = self.rng.integers(0, horizon - length + 1)
            inside = (steps >= start[..., None]) & (steps < (start + length)[..., None])
            return th.as_tensor(inside, dtype=th.float32, device=device)

        return one_side(), one_side()

    def state_dict(self) -> dict[str, Any]:
        """The generator's state: a resumed run draws the crops the uninterrupted one would."""
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


__all__ = ["PairCrops"]
