"""
The statistics of a report, in the style of rliable (Agarwal et al., 2021, "Deep RL at the Edge of
the Statistical Precipice"): interquartile means, percentile-bootstrap confidence intervals, and
stratified bootstrap intervals for scores aggregated over tasks (seeds are resampled within each
task, so every task keeps its weight).

Every function takes a ``seed`` so that a report drawn twice from the same logs is identical.
"""

from collections.abc import Sequence
from typing import Any, Callable, Union

import numpy as np

Statistic = Callable[[np.ndarray], float]
# Scores arrive as lists from the logs or as arrays from a report's matrices; both are accepted.
Scores = Union[Sequence[float], np.ndarray]


def iqm(values: Scores) -> float:
    """
    Interquartile mean: the mean of the middle 50% of the values, trimming ``int(0.25 * n)`` from
    each end (as ``scipy.stats.trim_mean(values, 0.25)``, which rliable uses).

    :param values: scores, NaN ignored
    :return: the IQM (NaN for no values)
    """
    array = np.sort(np.asarray(values, dtype=float).ravel())
    array = array[np.isfinite(array)]
    if array.size == 0:
        return float("nan")
    cut = int(0.25 * array.size)
    return float(array[cut : array.size - cut].mean())


def _percentiles(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Scores,
    statistic: Statistic = np.mean,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """
    Percentile bootstrap interval of ``statistic`` over ``values`` (NaN ignored).

    :param values: e.g. one score per seed
    :param statistic: maps a 1-D array to a number (``np.mean``, :func:`iqm`...)
    :param confidence: coverage of the interval
    :param n_resamples: bootstrap resamples
    :param seed: seed of the resampling
    :return: ``(low, high)``; both equal the statistic for a single value, NaN for none
    """
    array = np.asarray(values, dtype=float).ravel()
    array = array[np.isfinite(array)]
    if array.size == 0:
        return float("nan"), float("nan")
    if array.size == 1:
        return float(array[0]), float(array[0])
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, array.size, size=(n_resamples, array.size))
    if statistic is np.mean:
        samples = array[indices].mean(axis=1)
    else:
        samples = np.array([statistic(array[row]) for row in indices])
    return _percentiles(samples, confidence)


def bootstrap_mean_curve(
    matrix: np.ndarray, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    Mean and percentile-bootstrap interval at each point of a set of curves (one row per seed),
    resampling whole rows so that a seed's curve stays together. Columns with NaN use the seeds
    that have a value there.

    :param matrix: ``(n_seeds, n_points)``
    :return: ``(mean, low, high)``, each ``(n_points,)``
    """
    matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
    n_seeds = matrix.shape[0]
    with np.errstate(invalid="ignore"), _quiet():
        mean = np.nanmean(matrix, axis=0)
    if n_seeds == 1:
        return mean, mean.copy(), mean.copy()
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n_seeds, size=(n_resamples, n_seeds))
    with np.errstate(invalid="ignore"), _quiet():
        samples = np.nanmean(matrix[indices], axis=1)  # (n_resamples, n_points)
        tail = 100.0 * (1.0 - confidence) / 2.0
        low, high = np.nanpercentile(samples, [tail, 100.0 - tail], axis=0)
    return mean, low, high


def stratified_bootstrap_ci(
    groups: Sequence[Scores],
    statistic: Statistic = iqm,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """
    Bootstrap interval of ``statistic`` over the pooled scores of several tasks, resampling the
    scores of each task (its seeds) separately: rliable's stratified bootstrap.

    :param groups: one array of scores (one per seed) per task
    :param statistic: applied to the pooled resampled scores (default: :func:`iqm`)
    :return: ``(low, high)``
    """
    arrays = [np.asarray(group, dtype=float).ravel() for group in groups]
    arrays = [array[np.isfinite(array)] for array in arrays]
    arrays = [array for array in arrays if array.size]
    if not arrays:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    samples = np.empty(n_resamples)
    for index in range(n_resamples):
        pooled = np.concatenate([array[rng.integers(0, array.size, size=array.size)] for array in arrays])
        samples[index] = statistic(pooled)
    return _percentiles(samples, confidence)


def normalise(scores: Scores, baseline: float) -> np.ndarray:
    """
    Scores divided by a baseline's (B-Pref: PrefPPO's return over PPO's on the true reward).

    :param scores: raw scores
    :param baseline: the baseline's mean score; must be > 0
    :return: the normalised scores
    """
    if not np.isfinite(baseline) or baseline <= 0:
        raise ValueError(f"cannot normalise by a baseline score of {baseline}: it must be > 0")
    return np.asarray(scores, dtype=float) / baseline


class _quiet:
    """Silences numpy's "Mean of empty slice" warnings for all-NaN columns (they give NaN, as wanted)."""

    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore", category=RuntimeWarning)

    def __exit__(self, *exc: Any) -> None:
        self._catch.__exit__(*exc)
