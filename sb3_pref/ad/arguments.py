"""
What :class:`~sb3_pref.ad.ad.AD` is given, checked and resolved before anything is built: the training
schedule's numbers, the ``dtype`` choice, and the ``histories`` argument (one :class:`Histories`, a path, or a
list of them) made into the one :class:`Histories` the model trains on, cut to ``max_history_steps`` and
checked against the context length, with the reward categories read from it.

Separate from the model's lifecycle (training, in-context play, saving) because none of it needs a model:
these are plain functions of the arguments, shared by the constructor and :meth:`AD.set_histories
<sb3_pref.ad.ad.AD.set_histories>`, and each raises before a weight is allocated or a window is drawn.
"""

import os
from collections.abc import Sequence
from typing import Union

import numpy as np
import torch as th

from sb3_pref.ad.histories import Histories
from sb3_pref.ad.model import ADConfig

#: what ``histories`` may be: a :class:`Histories`, a path to one, or a list of them (same spaces)
HistoriesLike = Union[Histories, str, os.PathLike, Sequence[Union[Histories, str]]]


def resolve_precision(device: th.device, dtype: str = "auto") -> bool:
    """
    Whether to train in bfloat16 autocast. ``"auto"`` uses it only on a CUDA device that reports
    bf16 support (``torch.cuda.is_bf16_supported()``, Ampere and later): on CPUs without AMX or
    AVX512-BF16, bf16 matmuls are emulated and slower than float32, and PyTorch has no portable
    query for those instructions, so CPU training stays float32 unless ``dtype="bfloat16"``.

    :param device: the training device
    :param dtype: ``"auto"``, ``"float32"`` or ``"bfloat16"``
    """
    if dtype not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"dtype must be 'auto', 'float32' or 'bfloat16', got {dtype!r}")
    if dtype == "auto":
        return device.type == "cuda" and th.cuda.is_bf16_supported()
    return dtype == "bfloat16"


def check_schedule(
    seq_len: int,
    n_updates: int,
    batch_size: int,
    learning_rate: float,
    min_learning_rate: float,
    burn_in: int,
    first_window_fraction: float,
) -> None:
    """
    The numbers of the training schedule, checked in the order the constructor takes them.

    :param seq_len: transitions per context window
    :param n_updates: length of the cosine decay
    :param batch_size: windows per update
    :param learning_rate: Adam's peak learning rate
    :param min_learning_rate: the end of the cosine decay
    :param burn_in: steps of a mid-history window that carry no loss
    :param first_window_fraction: share of the windows that start at their history's first transition
    :raises ValueError: naming the first bad argument
    """
    for name, value in (("seq_len", seq_len), ("n_updates", n_updates), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if not 0 < min_learning_rate <= learning_rate:
        raise ValueError(f"need 0 < min_learning_rate <= learning_rate, got {min_learning_rate!r}, {learning_rate!r}")
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or not 0 <= burn_in < seq_len:
        raise ValueError(f"burn_in must be an int in [0, seq_len={seq_len}), got {burn_in!r}")
    if (
        not isinstance(first_window_fraction, (int, float, np.floating))
        or isinstance(first_window_fraction, bool)
        or not 0.0 <= first_window_fraction <= 1.0
    ):
        raise ValueError(f"first_window_fraction must be a share in [0, 1], got {first_window_fraction!r}")


def as_histories(histories: HistoriesLike) -> Histories:
    """
    :param histories: a :class:`Histories`, a path to one, or a list of them
    :return: one :class:`Histories` (a list is concatenated, which checks that the spaces match)
    """
    if isinstance(histories, Histories):
        return histories
    if isinstance(histories, (str, os.PathLike)):
        return Histories.load(histories)
    parts = [h if isinstance(h, Histories) else Histories.load(h) for h in histories]
    return Histories.concatenate(parts)


def fit_histories(
    histories: Union[HistoriesLike, None], seq_len: int, max_history_steps: Union[int, None], pad_short_histories: bool
) -> Histories:
    """
    The histories a new model trains on, checked against its context.

    :param histories: the constructor's ``histories`` argument
    :param seq_len: transitions per context window: at least one episode, at most the shortest history
    :param max_history_steps: keep only the first transitions of each history (None: all)
    :param pad_short_histories: allow histories shorter than ``seq_len``
    :raises ValueError: when there are none, or the context does not fit them
    """
    if histories is None:
        raise ValueError("histories must be given (a Histories, a path or a list of them): AD learns from them")
    data = as_histories(histories)
    if max_history_steps is not None:
        data = data.truncated(int(max_history_steps))
    if seq_len < data.max_episode_length:
        raise ValueError(
            f"seq_len={seq_len} transitions is shorter than one episode of the histories "
            f"({data.max_episode_length} steps): the context must span several episodes (the seed uses 256)"
        )
    if seq_len > data.min_length and not pad_short_histories:
        raise ValueError(
            f"seq_len={seq_len} exceeds the history length of the shortest history ({data.min_length} "
            "transitions): record longer histories, lower seq_len or pass pad_short_histories=True"
        )
    return data


def reward_values_of(data: Histories, reward_categories: Union[str, bool]) -> list[float]:
    """
    :param data: the histories
    :param reward_categories: ``"auto"`` (categories when the histories hold at most 16 reward values), True or False
    :return: the reward categories, sorted (empty: rewards are fed to the model as scalars)
    """
    values = np.unique(data.rewards[data.valid()])
    categorical = len(values) <= 16 if reward_categories == "auto" else bool(reward_categories)
    return [float(v) for v in values] if categorical else []


def check_histories(data: Histories, config: ADConfig, pad_short_histories: bool) -> None:
    """
    Histories given to a built (or loaded) model: they must match its spaces and fit its context.

    :param data: the histories
    :param config: the model's configuration
    :param pad_short_histories: whether the model allows histories shorter than its ``seq_len``
    :raises ValueError: naming the mismatch
    """
    if (data.obs_dim, data.n_actions) != (config.obs_dim, config.n_actions):
        raise ValueError(
            f"histories of mismatched spaces: model has obs_dim {config.obs_dim}, n_actions {config.n_actions}; "
            f"histories have {data.obs_dim}, {data.n_actions}"
        )
    if data.min_length < config.seq_len and not pad_short_histories:
        raise ValueError(
            f"the shortest history has {data.min_length} transitions, fewer than the model's seq_len="
            f"{config.seq_len}: record longer histories"
        )
