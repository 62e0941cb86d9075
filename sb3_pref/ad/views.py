"""
Views of learning histories for Algorithm Distillation: which of a learner's episodes the model sees, in order.

``Histories.subsampled`` keeps every k-th episode. On a sparse-reward task that shows a learner that suddenly
walks to its goal after failures, because the episodes in which it found the goal fell between two kept ones:
the model learns a clock, or a walk toward where goals usually are, not to act on what its context shows.
:func:`first_success_views` keeps the episodes that explain the improvement: the learner's first episodes up to
the first one that reaches the goal, then episodes from the end of its training, when it goes there directly.
"""

import numpy as np

from sb3_pref.ad.histories import Histories

_PER_STEP = ("observations", "actions", "rewards", "dones", "timesteps")


def _episode_bounds(histories: Histories, row: int) -> tuple[np.ndarray, np.ndarray]:
    """:return: first step and end (exclusive) of every complete episode of history ``row``"""
    ends = np.flatnonzero(histories.dones[row, : histories.history_lengths[row]]) + 1
    return np.concatenate([[0], ends[:-1]]).astype(np.int64), ends


def first_success_views(
    histories: Histories, n_starts: int, tail: int, tail_window: int, rng: np.random.Generator
) -> Histories:
    """
    For each history and each start ``s < n_starts``: its episodes ``s, s + 1, ...`` up to and including the first
    one with a positive return, then ``tail`` episodes drawn at random (kept in order) from its last
    ``tail_window`` episodes. A start after which the learner never succeeds before its last ``tail_window``
    episodes gives no view.

    :param histories: learning histories, one learner each
    :param n_starts: starts per history (the views of one history share most of their first part)
    :param tail: episodes taken from the end of training
    :param tail_window: how many of the last episodes the tail is drawn from
    :param rng: draws the tails
    :return: one row per view; ``tasks`` repeats each history's task
    """
    for name, value in (("n_starts", n_starts), ("tail", tail), ("tail_window", tail_window)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if tail_window < tail:
        raise ValueError(f"tail_window ({tail_window}) must hold at least tail ({tail}) episodes")
    indices, rows = [], []
    for row, returns in enumerate(histories.episode_returns()):
        starts, ends = _episode_bounds(histories, row)
        n_episodes = len(ends)
        tail_from = max(n_episodes - tail_window, 0)
        # next_success[e]: the first episode at or after e with a positive return (n_episodes: none)
        success = np.flatnonzero(returns > 0)
        next_success = np.append(success, n_episodes)[np.searchsorted(success, np.arange(n_episodes))]
        for start in range(min(n_starts, n_episodes)):
            found = int(next_success[start])
            if found >= tail_from:  # no success before the tail: nothing to explain it
                continue
            candidates = np.arange(tail_from, n_episodes)
            picked = np.sort(rng.choice(candidates, size=min(tail, len(candidates)), replace=False))
            episodes = np.concatenate([np.arange(start, found + 1), picked])
            indices.append(np.concatenate([np.arange(starts[e], ends[e]) for e in episodes]))
            rows.append(row)
    if not indices:
        raise ValueError(
            "no history has a successful episode before its last tail_window episodes: "
            "the learners never reached their goals, or tail_window is as long as their histories"
        )
    lengths = np.array([len(index) for index in indices])
    width = int(lengths.max())
    arrays = {}
    for name in _PER_STEP:
        values = getattr(histories, name)
        out = np.zeros((len(indices), width, *values.shape[2:]), dtype=values.dtype)
        for view, (row, index) in enumerate(zip(rows, indices)):
            out[view, : len(index)] = values[row][index]
        arrays[name] = out
    meta = {
        **histories.meta,
        "views": "first_success",
        "n_starts": int(n_starts),
        "tail": int(tail),
        "tail_window": int(tail_window),
    }
    return Histories(**arrays, tasks=histories.tasks[rows], n_actions=histories.n_actions, meta=meta, lengths=lengths)
