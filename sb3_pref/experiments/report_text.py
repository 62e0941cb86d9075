"""The Markdown text of a grid report (numbers and figures come from :mod:`sb3_pref.experiments.report`)."""

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from sb3_pref.experiments.records import RunRecord
from sb3_pref.experiments.results import RunResult


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def _versions(runs: list[RunResult]) -> str:
    for run in runs:
        found = RunRecord(run.run_dir).data.get("versions")
        if found:
            names = ("sb3_pref", "stable_baselines3", "torch", "gymnasium", "dm_control", "metaworld", "mujoco", "python")
            return ", ".join(f"{name} {found[name]}" for name in names if name in found)
    return "unknown"


def markdown_report(
    grid: dict[str, Any],
    runs: list[RunResult],
    all_runs: list[RunResult],
    score_lines: list[str],
    raw_lines: list[str],
    skipped: dict[str, str],
    quality_lines: list[str],
    figures: dict[str, list[str]],
    adaptation_note: str,
    metaworld_metric: str,
    adaptation_lines: Sequence[str] = (),
    score: str = "training",
) -> str:
    """
    :param grid: the grid's ``grid.json`` (name, description)
    :param runs: the runs the report uses
    :param all_runs: every run in the folder, finished or not
    :param score_lines: the normalised score table
    :param raw_lines: the raw score table
    :param skipped: tasks left out of the normalised table, with the reason
    :param quality_lines: the reward-model quality table
    :param figures: file names by section (``curves``, ``quality``, ``adaptation``)
    :param adaptation_note: why the RL2 section is empty, if it is
    :param metaworld_metric: ``"success"`` or ``"return"``
    :param adaptation_lines: the RL2 adaptation table
    :param score: where final scores come from, ``"training"`` or ``"eval"``
    :return: the report
    """
    statuses = Counter(run.status for run in all_runs)
    unfinished = {status: n for status, n in statuses.items() if status != "finished"}
    by_algo: defaultdict[str, float] = defaultdict(float)  # hours are fractional: not a Counter
    for run in all_runs:
        by_algo[run.spec.algo] += run.wall_time
    cpu_hours = sum(RunRecord(run.run_dir).data.get("cpu_time", 0.0) for run in all_runs)
    metric = "success rate" if metaworld_metric == "success" else "true return"
    lines = [f"# Grid report: {grid.get('name', 'grid')}", ""]
    if grid.get("description"):
        lines += [grid["description"], ""]
    lines += [
        f"- Runs in this report: {len(runs)}; in the folder: {len(all_runs)}"
        + (f" (not finished: {', '.join(f'{n} {s}' for s, n in sorted(unfinished.items()))})" if unfinished else "")
        + ".",
        f"- Run time (sum over runs, all attempts): {_hours(sum(by_algo.values()))}"
        + (" (" + ", ".join(f"{algo} {_hours(t)}" for algo, t in sorted(by_algo.items())) + ")" if by_algo else "")
        + (f"; CPU time {_hours(cpu_hours)}" if cpu_hours else "")
        + ".",
        f"- Versions: {_versions(runs)}.",
        (
            "- Final score of a run: the mean return of its closing deterministic evaluation (`eval_return` in"
            " `run.json`: SB3's `evaluate_policy` on a fresh env)."
            if score == "eval"
            else "- Final score of a run: the mean of the last 10% of its logged values of the true return (dm_control)"
            f" or the {metric} (Meta-World), from training episodes: SB3's `rollout/` values, themselves means over"
            " the last 100 episodes (with many envs, several rollouts; with 1000-step episodes, 100k steps:"
            " `--score eval` scores the closing evaluation instead)."
        ),
        "- Intervals: 95% percentile bootstrap over seeds (2000 resamples); across tasks, the interquartile mean"
        " (IQM) and mean of all task-seed scores with a stratified bootstrap (seeds resampled within each task),"
        " as in rliable. With few seeds the intervals are wide and themselves uncertain.",
    ]
    if any(not run.kind.adapts for run in runs):
        lines += _score_section(score_lines, raw_lines, skipped)
    lines += ["", "## Learning curves", ""]
    lines += [f"![{name}]({name})" for name in figures["curves"]] or ["No learning curves (no logged returns)."]
    if figures["quality"]:
        lines += [
            "",
            "## Reward-model quality over feedback",
            "",
            "Agreement of the reward model with an oracle on fresh pairs (`reward/true_pref_accuracy`, measured after"
            " each query round) and the correlation of its per-step predictions with the true reward over each"
            " rollout (`reward/pred_true_corr`), against the feedback asked so far; final values below (last 10%"
            " of the logged values).",
            "",
            *[f"![{name}]({name})" for name in figures["quality"]],
            "",
            *quality_lines,
        ]
    if figures["adaptation"] or adaptation_note:
        lines += ["", "## RL2 adaptation", ""]
        if figures["adaptation"]:
            lines += [
                "Return per episode of held-out trials after training (`adaptation.csv` of each run), RL2 against a"
                " random policy, mean and 95% bootstrap interval over seeds: a curve that rises after episode 0 shows"
                " adaptation within a trial.",
                "",
                *[f"![{name}]({name})" for name in figures["adaptation"]],
                "",
                *adaptation_lines,
            ]
        lines += [adaptation_note] if adaptation_note else []
    return "\n".join(lines) + "\n"


def _score_section(score_lines: list[str], raw_lines: list[str], skipped: dict[str, str]) -> list[str]:
    lines = [
        "",
        "## Final performance normalised by PPO (SAC for PEBBLE) on the true reward",
        "",
        "B-Pref's metric: each run's final score divided by the mean final score of its baseline trained on the"
        " true reward on the same task, PPO for PrefPPO and SAC for PEBBLE (1.0 = as good as the baseline with"
        " the true reward; PEBBLE falls back to PPO in a grid without SAC runs).",
        "",
    ]
    lines += score_lines if len(score_lines) > 2 else ["No task has a baseline (PPO or SAC) with a positive score."]
    if skipped:
        lines += ["", *[f"- {task} left out: {reason}." for task, reason in sorted(skipped.items())]]
    lines += ["", "## Final performance (raw scores)", "", "Across tasks only when the tasks share a metric.", ""]
    return lines + raw_lines
