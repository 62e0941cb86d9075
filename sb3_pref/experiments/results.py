"""
The numbers of a grid report, read from the run folders: learning curves across seeds, final
scores normalised by PPO on the true reward (B-Pref's metric) with IQMs and bootstrap intervals,
reward-model quality against the feedback collected, and RL2 adaptation on held-out tasks.
"""

import csv
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from sb3_pref.envs.factory import task_family
from sb3_pref.experiments.records import FINISHED, RUN_FILE, STEP_KEY, RunRecord, merged_progress
from sb3_pref.experiments.registry import RunKind, run_kind
from sb3_pref.experiments.spec import RunSpec
from sb3_pref.experiments.stats import bootstrap_ci, bootstrap_mean_curve, iqm, normalise, stratified_bootstrap_ci

RETURN_KEY, SUCCESS_KEY = "rollout/ep_rew_mean", "rollout/success_rate"
#: where a run's final score comes from: its training episodes' logged values, or the deterministic evaluation that
#: closes each grid run (``eval_return`` in ``run.json``). With long episodes the first is a mean over much of the run:
#: SB3's ``rollout/ep_rew_mean`` averages the last 100 episodes, which on dm_control (1000 steps each) is 100k steps.
SCORES = ("training", "eval")
EVAL_KEY = "eval_return"
FEED_KEY = "reward/total_feed"
QUALITY_KEYS = ("reward/true_pref_accuracy", "reward/pred_true_corr")
#: the baseline a score falls back on when its own (its kind's ``baseline``: B-Pref normalises PrefPPO by PPO and
#: PEBBLE by SAC) is not in the grid
BASELINE = "ppo"


@dataclass
class RunResult:
    """A run folder's spec, status and merged log."""

    run_dir: str
    spec: RunSpec
    status: str
    wall_time: float
    columns: dict[str, np.ndarray]
    final: dict[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> RunKind:
        """The run's kind (:mod:`~sb3_pref.experiments.registry`)."""
        return run_kind(self.spec.algo)

    @property
    def variant(self) -> str:
        """What a curve's line is named: the teacher for PrefPPO, ``PEBBLE (<teacher>)``, the algorithm otherwise."""
        return self.kind.variant(self.spec)

    @property
    def budget(self) -> str:
        return self.spec.budget.label if self.spec.budget is not None else ""


def load_runs(root: str, include_unfinished: bool = False) -> list[RunResult]:
    """
    Every run under ``root`` (any depth) that has a ``run.json``.

    :param root: a grid's output folder
    :param include_unfinished: also runs that have not finished (their logs so far)
    :return: the runs, sorted by run id
    """
    runs = []
    for folder, _, files in os.walk(root):
        if RUN_FILE not in files:
            continue
        record = RunRecord(folder)
        if not record.data.get("spec") or (record.status != FINISHED and not include_unfinished):
            continue
        runs.append(
            RunResult(
                folder,
                record.spec,
                record.status,
                float(record.data.get("wall_time", 0.0)),
                merged_progress(folder),
                dict(record.data.get("final") or {}),
            )
        )
    return sorted(runs, key=lambda run: run.spec.run_id)


def score_key(task: str, metaworld_metric: str = "success") -> str:
    """The logged score of a task: the success rate on Meta-World (B-Pref's), the true return elsewhere."""
    return SUCCESS_KEY if task_family(task) == "metaworld" and metaworld_metric == "success" else RETURN_KEY


def final_score(columns: dict[str, np.ndarray], key: str, fraction: float = 0.1) -> float:
    """Mean of ``key`` over the last ``fraction`` of its logged values (at least one); NaN if never logged."""
    values = columns.get(key, np.array([]))
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan")
    return float(values[-max(1, round(fraction * values.size)) :].mean())


def run_score(run: RunResult, key: str, score: str = "training", fraction: float = 0.1) -> float:
    """
    A run's final score.

    :param run: the run
    :param key: the logged metric (:func:`score_key`) for ``score="training"``
    :param score: ``"training"``: :func:`final_score` of ``key``; ``"eval"``: the run's deterministic evaluation
        return (NaN when it has none, as an unfinished run)
    :param fraction: share of the logged values :func:`final_score` averages
    """
    if score == "eval":
        if key == SUCCESS_KEY:
            raise ValueError(
                "score='eval' scores the deterministic evaluation's return, which records no success rate: "
                "pass metaworld_metric='return' (--metaworld-metric return) or score='training'"
            )
        return float(run.final.get(EVAL_KEY, float("nan")))
    return final_score(run.columns, key, fraction)


def learning_curves(runs: list[RunResult], key: str, n_points: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """
    The seeds' curves of ``key`` against env steps, interpolated on a common grid of steps from
    the latest first log to the earliest last log.

    :return: ``(steps (n_points,), values (n_seeds, n_points))``; empty arrays without data
    """
    curves = []
    for run in runs:
        if STEP_KEY not in run.columns or key not in run.columns:
            continue
        steps, values = run.columns[STEP_KEY], run.columns[key]
        keep = np.isfinite(steps) & np.isfinite(values)
        if keep.any():
            curves.append((steps[keep], values[keep]))
    if not curves:
        return np.array([]), np.empty((0, 0))
    first, last = max(c[0][0] for c in curves), min(c[0][-1] for c in curves)
    grid = np.linspace(first, last, n_points) if last > first else np.array([last])
    return grid, np.stack([np.interp(grid, steps, values) for steps, values in curves])


def feedback_curves(runs: list[RunResult], key: str) -> tuple[np.ndarray, np.ndarray]:
    """
    ``key`` against the feedback asked so far (``reward/total_feed``): each seed's mean value at
    each amount of feedback, aligned across seeds (NaN where a seed has no value).

    :return: ``(feedback (n_points,), values (n_seeds, n_points))``
    """
    per_seed = []
    for run in runs:
        if FEED_KEY not in run.columns or key not in run.columns:
            continue
        feed, values = run.columns[FEED_KEY], run.columns[key]
        keep = np.isfinite(feed) & np.isfinite(values)
        by_feed: dict[float, list[float]] = defaultdict(list)
        for amount, value in zip(feed[keep], values[keep]):
            by_feed[float(amount)].append(float(value))
        if by_feed:
            per_seed.append({amount: float(np.mean(v)) for amount, v in by_feed.items()})
    if not per_seed:
        return np.array([]), np.empty((0, 0))
    amounts = np.array(sorted({amount for seed in per_seed for amount in seed}))
    return amounts, np.array([[seed.get(amount, np.nan) for amount in amounts] for seed in per_seed])


def group_runs(runs: list[RunResult]) -> dict[tuple[str, str, str, str], list[RunResult]]:
    """Runs by ``(task, budget, algo, variant)``: the seeds of one setting together."""
    groups: dict[tuple[str, str, str, str], list[RunResult]] = defaultdict(list)
    for run in runs:
        groups[(run.spec.task, run.budget, run.spec.algo, run.variant)].append(run)
    return dict(groups)


def _nanmean(values: np.ndarray) -> float:
    """Mean of the finite values; NaN (without numpy's warning) when there is none."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")


@dataclass
class ScoreRow:
    """Final scores of one setting (algorithm, teacher, budget) on every task, and aggregated over tasks."""

    variant: str
    budget: str
    per_task: dict[str, np.ndarray]  # task -> one score per seed
    mean: dict[str, tuple[float, float, float]]  # task -> (mean, low, high)
    iqm: float = float("nan")
    iqm_ci: tuple[float, float] = (float("nan"), float("nan"))
    overall_mean: float = float("nan")
    overall_mean_ci: tuple[float, float] = (float("nan"), float("nan"))


def score_table(
    runs: list[RunResult],
    normalised: bool = True,
    metaworld_metric: str = "success",
    fraction: float = 0.1,
    seed: int = 0,
    score: str = "training",
) -> tuple[list[ScoreRow], dict[str, str]]:
    """
    Final score of every setting per task (mean and 95% bootstrap interval over seeds) and over all
    tasks (IQM and mean with stratified-bootstrap intervals). With ``normalised``, each score is
    divided by the mean final score of its baseline on the true reward on the same task (B-Pref's
    metric): PPO for ppo / prefppo, SAC for sac / pebble (PPO when the grid has no SAC runs).

    :param runs: the runs (:func:`load_runs`)
    :param normalised: divide by the baseline's mean score
    :param metaworld_metric: ``"success"`` or ``"return"`` for Meta-World tasks
    :param fraction: share of the logged values a training score averages
    :param seed: seed of the bootstrap resampling
    :param score: ``"training"`` or ``"eval"`` (:data:`SCORES`, :func:`run_score`)
    :return: the rows (baselines first) and, per task, why it was left out (no baseline runs, baseline score <= 0)
    """
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    baselines: dict[tuple[str, str], float] = {}  # (baseline algo, task) -> mean final score
    skipped: dict[str, str] = {}
    raw: dict[tuple[str, str], dict[str, np.ndarray]] = defaultdict(dict)
    kind_of: dict[tuple[str, str], RunKind] = {}
    for (task, budget, algo, variant), group in group_runs(runs).items():
        kind = run_kind(algo)
        if kind.adapts:  # scored on held-out tasks (adaptation_curves), not by a final return
            continue
        key = score_key(task, metaworld_metric)
        raw[(variant, budget)][task] = np.array([run_score(run, key, score, fraction) for run in group])
        kind_of[(variant, budget)] = kind
        if kind.is_baseline:
            baselines[(algo, task)] = _nanmean(raw[(variant, budget)][task])
    rows = []
    for (variant, budget), per_task in sorted(raw.items(), key=lambda item: (not kind_of[item[0]].is_baseline, item[0])):
        scores = {}
        for task, values in per_task.items():
            base = kind_of[(variant, budget)].baseline or BASELINE
            if (base, task) not in baselines and (BASELINE, task) in baselines:
                base = BASELINE
            name = base.upper()
            if not normalised:
                scores[task] = values
            elif (base, task) not in baselines:
                skipped[task] = f"no {name} runs on the true reward to normalise by"
            elif not baselines[(base, task)] > 0:
                skipped[task] = f"{name}'s final score is {baselines[(base, task)]:.3g}: nothing to normalise by"
            else:
                scores[task] = normalise(values, baselines[(base, task)])
        if not scores:
            continue
        row = ScoreRow(
            variant=variant,
            budget=budget,
            per_task=scores,
            mean={task: (_nanmean(v), *bootstrap_ci(v, seed=seed)) for task, v in scores.items()},
        )
        pooled = np.concatenate(list(scores.values()))
        row.iqm, row.iqm_ci = iqm(pooled), stratified_bootstrap_ci(list(scores.values()), iqm, seed=seed)
        row.overall_mean = _nanmean(pooled)
        row.overall_mean_ci = stratified_bootstrap_ci(list(scores.values()), _nanmean, seed=seed)
        rows.append(row)
    return rows, skipped


def read_adaptation(run_dir: str) -> Optional[dict[str, np.ndarray]]:
    """
    ``adaptation.csv`` of an RL2 run as the mean return per episode index for each agent.

    :return: ``{agent: (K,) mean return over trials}``, None without the file
    """
    path = os.path.join(run_dir, "adaptation.csv")
    if not os.path.exists(path):
        return None
    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            value = float(row["return"])
            if np.isfinite(value):
                sums[row["agent"]][int(row["episode"])].append(value)
    return {agent: np.array([np.mean(by_episode[k]) for k in sorted(by_episode)]) for agent, by_episode in sums.items()}


def adaptation_curves(runs: list[RunResult], seed: int = 0) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """
    For each RL2 task and agent (RL2, random): mean return per episode index of a held-out trial,
    with a 95% bootstrap interval across seeds.

    :return: ``{task: {agent: (mean, low, high)}}``
    """
    per_task: dict[str, dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if not run.kind.adapts:
            continue
        curves = read_adaptation(run.run_dir)
        for agent, curve in (curves or {}).items():
            per_task[run.spec.task][agent].append(curve)
    result: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for task, agents in per_task.items():
        result[task] = {}
        for agent, agent_curves in agents.items():
            length = min(len(c) for c in agent_curves)
            result[task][agent] = bootstrap_mean_curve(np.stack([c[:length] for c in agent_curves]), seed=seed)
    return result
