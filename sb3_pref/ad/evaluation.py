"""
Reference curves that sit beside AD's in-context curve on one figure, as
:class:`~sb3_pref.rl2.evaluation.AdaptationResult` objects, so ``write_adaptation_csv`` and
``plot_adaptation`` treat them exactly like the curves of ``evaluate_adaptation``:

- :func:`learner_curve`: the source learners' return per episode over their own training (the curve
  AD must beat: it should improve faster per episode in context than they did by gradient steps);
- :func:`search_curve`: a scripted searcher that sweeps the room and then goes straight to the
  goal it found (the search-planner bound of a DarkRoom variant).
"""

from collections.abc import Sequence
from typing import Optional

import numpy as np

from sb3_pref.ad.histories import Histories
from sb3_pref.envs.darkroom import DarkRoom, Goal, all_goals, plan_search, search_returns
from sb3_pref.rl2.evaluation import AdaptationResult


def learner_curve(histories: Histories, n_episodes: int, optimal: Optional[Sequence[float]] = None) -> AdaptationResult:
    """
    The first ``n_episodes`` episode returns of every history, one "trial" per history.

    :param histories: the source learners' histories
    :param n_episodes: episodes per row; a history with fewer complete episodes gets NaN for the rest
    :param optimal: optimal return of each history's task (None: NaN)
    :return: rows are histories, columns the learner's episodes in training order
    """
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, (int, np.integer)) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an int >= 1, got {n_episodes!r}")
    returns = np.full((histories.n_histories, n_episodes), np.nan)
    for row, episode_returns in enumerate(histories.episode_returns()):
        kept = episode_returns[:n_episodes]
        returns[row, : len(kept)] = kept
    best = np.full_like(returns, np.nan)
    if optimal is not None:
        best[:] = np.asarray(optimal, dtype=np.float64)[:, None]
    return AdaptationResult(returns, np.full_like(returns, np.nan), best, [tuple(task) for task in histories.tasks.tolist()])


def search_curve(
    goals: Sequence[Goal],
    n_episodes: int,
    size: int = 9,
    episode_length: int = 20,
    terminate_on_goal: bool = False,
    planned_on: Optional[Sequence[Goal]] = None,
) -> AdaptationResult:
    """
    Mean return per episode of the scripted searcher on ``goals`` (one row).

    :param goals: the goals to average over (the held-out goals)
    :param n_episodes: episodes in the curve
    :param size: grid side
    :param episode_length: steps per episode
    :param terminate_on_goal: the DarkRoom variant
    :param planned_on: the goals the sweep is planned to cover (None: every goal of the room, the bound)
    """
    paths = plan_search(planned_on or all_goals(size), n_episodes, size, episode_length, terminate_on_goal)
    curve = search_returns(paths, goals, size, episode_length, terminate_on_goal)[None]
    room = DarkRoom(goals=goals, size=size, episode_length=episode_length, terminate_on_goal=terminate_on_goal)
    optimal = np.full_like(curve, np.mean([room.optimal_return(goal) for goal in goals]))
    return AdaptationResult(curve, np.full_like(curve, np.nan), optimal, ["search"])
