"""
The windows AD trains on: batches of ``seq_len`` consecutive transitions cut from the learning histories.

:class:`WindowSampler` holds the histories as tensors on the training device and draws every batch from its own
torch generator, so that a saved model continues its window sequence where it stopped (``generator.get_state()``
is what :mod:`sb3_pref.ad.persistence` writes).
"""

from typing import Optional, Union, cast

import numpy as np
import torch as th

from sb3_pref.ad.histories import Histories

#: the per-step arrays a window holds, in the order the transformer takes them
WINDOW_KEYS = ("observations", "actions", "rewards", "timesteps")


def reward_index(rewards: np.ndarray, reward_values: list[float]) -> np.ndarray:
    """
    :param rewards: rewards of any shape
    :param reward_values: the reward categories (empty: rewards are scalars)
    :return: each reward's category (its nearest value), or the rewards as float32 when there are no categories
    """
    if not reward_values:
        return rewards.astype(np.float32)
    values = np.asarray(reward_values)
    return np.abs(np.asarray(rewards, dtype=np.float64)[..., None] - values).argmin(-1)


class WindowSampler:
    """
    :param histories: the learning histories (rows of possibly unequal length, right-padded)
    :param seq_len: transitions per window
    :param batch_size: windows per batch
    :param reward_values: the reward categories (empty: scalar rewards)
    :param device: where the tensors live
    :param seed: seed of the generator (None: fresh entropy)
    :param burn_in: a window that starts after its history's first transition carries no loss on its first
        ``burn_in`` steps
    :param first_window_fraction: share of the windows that start at their history's first transition
    :param state: a generator state to continue from (a loaded model's), instead of the seed's
    """

    def __init__(
        self,
        histories: Histories,
        seq_len: int,
        batch_size: int,
        reward_values: list[float],
        device: Union[th.device, str],
        seed: Optional[int],
        burn_in: int = 0,
        first_window_fraction: float = 0.0,
        state: Optional[th.Tensor] = None,
    ) -> None:
        self.seq_len, self.batch_size, self.device = seq_len, batch_size, th.device(device)
        self.burn_in, self.first_window_fraction = burn_in, first_window_fraction
        h = histories
        self.data: dict[str, th.Tensor] = dict(
            observations=th.as_tensor(h.observations, device=self.device),
            actions=th.as_tensor(h.actions, device=self.device),
            rewards=th.as_tensor(reward_index(h.rewards, reward_values), device=self.device),
            timesteps=th.as_tensor(h.timesteps, device=self.device),
            lengths=th.as_tensor(h.history_lengths, device=self.device),
        )
        # Padded histories may all be shorter than a window: widen the arrays so every window is in bounds.
        extra = max(seq_len - h.length, 0)
        if extra:
            for key in WINDOW_KEYS:
                value = self.data[key]
                pad = value.new_zeros((value.shape[0], extra, *value.shape[2:]))
                self.data[key] = th.cat([value, pad], 1)
        self.generator = th.Generator(device="cpu")
        fresh = int(cast(int, np.random.SeedSequence().entropy) % 2**63)
        self.generator.manual_seed(seed if seed is not None else fresh)
        if state is not None:
            self.generator.set_state(state)

    def starts(self) -> tuple[th.Tensor, th.Tensor]:
        """:return: the rows and first columns of a batch of windows, each window inside its history's length"""
        size, lengths = self.batch_size, self.data["lengths"]
        rows = th.randint(len(lengths), (size,), generator=self.generator).to(self.device)
        # Uniform over the valid starts of each row: histories of unequal length are padded, never sampled past.
        # A history shorter than the window (pad_short_histories) has one start: its first transition.
        n_starts = (lengths[rows] - self.seq_len + 1).clamp(min=1).double()
        uniform = th.rand(size, generator=self.generator, dtype=th.float64).to(self.device)
        starts = (uniform * n_starts).long().minimum(n_starts.long() - 1)
        if self.first_window_fraction > 0:  # no draw otherwise, so that models without it keep their window sequence
            first = th.rand(size, generator=self.generator, dtype=th.float64).to(self.device) < self.first_window_fraction
            starts = th.where(first, th.zeros_like(starts), starts)
        return rows, starts

    def batch(self) -> tuple[th.Tensor, ...]:
        """:return: observations, actions, rewards and timesteps of a batch of windows, and the mask of the steps that
        carry a loss (inside the history, and past the burn-in)"""
        rows, starts = self.starts()
        cols = starts[:, None] + th.arange(self.seq_len, device=self.device)
        windows = tuple(self.data[key][rows[:, None], cols] for key in WINDOW_KEYS)
        trained = cols < self.data["lengths"][rows, None]
        if self.burn_in:
            trained &= (starts[:, None] == 0) | (cols - starts[:, None] >= self.burn_in)
        return (*windows, trained)
