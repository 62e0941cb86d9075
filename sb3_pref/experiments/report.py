"""
``python -m sb3_pref.experiments report RUN_DIR``: PNG figures and a Markdown summary of a grid.

- ``curves_<task>_<budget>.png``: true return (success rate on Meta-World) against env steps, one
  line per teacher (PrefPPO; ``PEBBLE (<teacher>)``) plus PPO and SAC on the true reward, mean over
  seeds and 95% bootstrap interval;
- final performance normalised by PPO (SAC for PEBBLE) on the true reward (B-Pref's metric), per task (mean and
  interval over seeds) and over tasks (IQM and mean with stratified-bootstrap intervals, as rliable);
- ``reward_quality_<task>_<budget>.png``: the reward model's agreement with an oracle on fresh
  pairs and the correlation of its predictions with the true reward, against the feedback asked;
- ``adaptation_<task>.png``: RL2's return per episode of a held-out trial, against a random policy;
- ``report.md`` ties them together; ``scores.csv`` holds every run's final scores.
"""

import csv
import json
import os
import re
from typing import Any, Optional

import numpy as np

from sb3_pref.experiments.records import read_json
from sb3_pref.experiments.registry import run_kind
from sb3_pref.experiments.results import (
    EVAL_KEY,
    QUALITY_KEYS,
    RETURN_KEY,
    RunResult,
    ScoreRow,
    adaptation_curves,
    feedback_curves,
    final_score,
    group_runs,
    learning_curves,
    load_runs,
    run_score,
    score_key,
    score_table,
)
from sb3_pref.experiments.stats import bootstrap_ci, bootstrap_mean_curve

_LABELS = {
    "rollout/ep_rew_mean": "true return",
    "rollout/success_rate": "success rate",
    "reward/true_pref_accuracy": "agreement with an oracle (fresh pairs)",
    "reward/pred_true_corr": "corr(predicted, true reward)",
}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def _figure(n_panels: int = 1) -> tuple[Any, list[Any]]:
    # A bare Figure with an Agg canvas: never touches pyplot's global state or a display.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6 * n_panels, 4))
    FigureCanvasAgg(figure)
    return figure, [figure.add_subplot(1, n_panels, i + 1) for i in range(n_panels)]


def _legend(axes: Any, **kwargs: Any) -> None:
    if axes.get_legend_handles_labels()[0]:
        axes.legend(**kwargs)


def _band(axes: Any, x: np.ndarray, matrix: np.ndarray, label: str, seed: int) -> None:
    mean, low, high = bootstrap_mean_curve(matrix, seed=seed)
    n_seeds = int(np.isfinite(matrix).any(axis=1).sum())
    line = axes.plot(x, mean, label=f"{label} (n={n_seeds})")[0]
    axes.fill_between(x, low, high, alpha=0.2, color=line.get_color())


def _panels(runs: list[RunResult]) -> dict[tuple[str, str], dict[str, list[RunResult]]]:
    """(task, budget) -> line name -> seeds; the PPO and SAC baselines join every budget of their task."""
    panels: dict[tuple[str, str], dict[str, list[RunResult]]] = {}
    groups = group_runs(runs)
    budgets = {(task, budget) for (task, budget, algo, _) in groups if run_kind(algo).learns_preferences}
    for (task, budget, algo, variant), group in groups.items():
        targets = [key for key in budgets if key[0] == task] if run_kind(algo).is_baseline and budgets else [(task, budget)]
        for target in targets:
            panels.setdefault(target, {})[variant] = group
    return panels


def plot_learning_curves(runs: list[RunResult], out_dir: str, metaworld_metric: str = "success", seed: int = 0) -> list[str]:
    """One PNG per task and budget; :return: the file names"""
    written = []
    for (task, budget), lines in sorted(_panels(runs).items()):
        # meta-RL runs are plotted by their return on trial tasks (no success rate)
        key = RETURN_KEY if lines and next(iter(lines.values()))[0].kind.adapts else score_key(task, metaworld_metric)
        figure, (axes,) = _figure()
        for name in sorted(lines, key=lambda n: (not lines[n][0].kind.is_baseline, n)):  # baselines first
            steps, matrix = learning_curves(lines[name], key)
            if steps.size:
                _band(axes, steps, matrix, name, seed)
        axes.set_xlabel("env steps")
        axes.set_ylabel(_LABELS[key])
        axes.set_title(f"{task}" + (f", budget {budget}" if budget else "") + "\nmean and 95% bootstrap CI over seeds")
        _legend(axes, fontsize="small")
        name = f"curves_{_slug(task)}" + (f"_{_slug(budget)}" if budget else "") + ".png"
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, name), dpi=110)
        written.append(name)
    return written


def plot_reward_quality(runs: list[RunResult], out_dir: str, seed: int = 0) -> list[str]:
    """One PNG per task and budget of PrefPPO / PEBBLE runs (two panels); :return: the file names"""
    written = []
    for (task, budget, algo, _), _group in sorted(group_runs(runs).items()):
        if not run_kind(algo).learns_preferences or f"reward_quality_{_slug(task)}_{_slug(budget)}.png" in written:
            continue
        figure, panels = _figure(len(QUALITY_KEYS))
        for axes, key in zip(panels, QUALITY_KEYS):
            for (other_task, other_budget, other_algo, variant), group in sorted(group_runs(runs).items()):
                if (other_task, other_budget) == (task, budget) and run_kind(other_algo).learns_preferences:
                    feedback, matrix = feedback_curves(group, key)
                    if feedback.size:
                        _band(axes, feedback, matrix, variant, seed)
            axes.set_xlabel("feedback asked (queries)")
            axes.set_ylabel(_LABELS[key])
            axes.set_title(f"{task}, budget {budget}")
            _legend(axes, fontsize="small")
        name = f"reward_quality_{_slug(task)}_{_slug(budget)}.png"
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, name), dpi=110)
        written.append(name)
    return written


def plot_adaptation(curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]], out_dir: str) -> list[str]:
    """One PNG per RL2 task; :return: the file names"""
    written = []
    for task, agents in sorted(curves.items()):
        figure, (axes,) = _figure()
        for agent, (mean, low, high) in sorted(agents.items()):
            x = np.arange(len(mean))
            line = axes.plot(x, mean, marker="o", label=agent)[0]
            axes.fill_between(x, low, high, alpha=0.2, color=line.get_color())
        axes.set_xlabel("episode in a held-out trial")
        axes.set_ylabel("return")
        axes.set_xticks(np.arange(max(len(m) for m, _, _ in agents.values())))
        axes.set_title(f"In-context adaptation on {task}\nmean and 95% bootstrap CI over seeds")
        _legend(axes)
        name = f"adaptation_{_slug(task)}.png"
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, name), dpi=110)
        written.append(name)
    return written


def _n_finite(values: np.ndarray) -> int:
    return int(np.isfinite(np.asarray(values, dtype=np.float64)).sum())


def _interval(mean: float, low: float, high: float) -> str:
    return "n/a" if not np.isfinite(mean) else f"{mean:.3g} [{low:.3g}, {high:.3g}]"


def _score_markdown(rows: list[ScoreRow], tasks: list[str], aggregate: bool = True) -> list[str]:
    """A table of per-task means [95% CI] (n seeds), and the IQM and mean over tasks when ``aggregate``."""
    overall = ["IQM [95% CI]", "mean [95% CI]"] if aggregate else []
    lines = ["| setting | budget | " + " | ".join([*tasks, *overall]) + " |", "|---" * (len(tasks) + len(overall) + 2) + "|"]
    for row in rows:
        # n counts the seeds the mean is over: a run without a finite score (NaN) is not one of them.
        cells = [_interval(*row.mean[t]) + f" (n={_n_finite(row.per_task[t])})" if t in row.mean else "" for t in tasks]
        if aggregate:
            cells += [_interval(row.iqm, *row.iqm_ci), _interval(row.overall_mean, *row.overall_mean_ci)]
        lines.append(f"| {row.variant} | {row.budget or '-'} | " + " | ".join(cells) + " |")
    return lines


def _adaptation_markdown(curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]) -> list[str]:
    lines = ["| task | agent | first episode | last episode |", "|---|---|---|---|"]
    for task, agents in sorted(curves.items()):
        for agent, (mean, low, high) in sorted(agents.items()):
            lines.append(
                f"| {task} | {agent} | {_interval(mean[0], low[0], high[0])} | {_interval(mean[-1], low[-1], high[-1])} |"
            )
    return lines


def _quality_markdown(runs: list[RunResult]) -> list[str]:
    lines = ["| task | budget | teacher | " + " | ".join(_LABELS[k] for k in QUALITY_KEYS) + " |", "|---|---|---|---|---|"]
    for (task, budget, algo, variant), group in sorted(group_runs(runs).items()):
        if run_kind(algo).learns_preferences:
            cells = []
            for key in QUALITY_KEYS:
                finals = np.array([final_score(run.columns, key) for run in group])
                mean = float(np.nanmean(finals)) if np.isfinite(finals).any() else float("nan")
                cells.append(_interval(mean, *bootstrap_ci(finals)))
            lines.append(f"| {task} | {budget} | {variant} | " + " | ".join(cells) + " |")
    return lines


def _finite(value: Any) -> Any:
    """NaN and infinities as None, so that summary.json is standard JSON."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def write_scores_csv(runs: list[RunResult], path: str, metaworld_metric: str = "success", score: str = "training") -> None:
    """One row per run: its settings, its score (:func:`run_score`), the logged metrics' final values and its evaluation."""
    keys = (RETURN_KEY, "rollout/success_rate", *QUALITY_KEYS)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        columns = ["run_id", "algo", "task", "teacher", "budget", "seed", "status", "wall_time_s", "score_key", "score"]
        writer.writerow([*columns, *keys, EVAL_KEY])
        for run in runs:
            key = score_key(run.spec.task, metaworld_metric)
            writer.writerow(
                [
                    run.spec.run_id,
                    run.spec.algo,
                    run.spec.task,
                    run.spec.teacher or "",
                    run.budget,
                    run.spec.seed,
                    run.status,
                    round(run.wall_time, 1),
                    EVAL_KEY if score == "eval" else key,
                    run_score(run, key, score),
                ]
                + [final_score(run.columns, k) for k in keys]
                + [run.final.get(EVAL_KEY, float("nan"))]
            )


def write_report(
    run_dir: str,
    out_dir: Optional[str] = None,
    include_unfinished: bool = False,
    metaworld_metric: str = "success",
    seed: int = 0,
    score: str = "training",
) -> str:
    """
    Write the figures, ``scores.csv`` and ``report.md`` of a grid.

    :param run_dir: the grid's output folder
    :param out_dir: where to write (default: ``<run_dir>/report``)
    :param include_unfinished: also use runs that have not finished
    :param metaworld_metric: ``"success"`` (B-Pref's) or ``"return"`` for Meta-World scores
    :param seed: seed of the bootstrap resampling
    :param score: a run's final score: ``"training"`` (the logged training returns) or ``"eval"`` (its deterministic
        evaluation, ``eval_return``; right where episodes are long, as on dm_control with SAC)
    :return: the path of ``report.md``
    """
    from sb3_pref.experiments.report_text import markdown_report

    out_dir = out_dir or os.path.join(run_dir, "report")
    os.makedirs(out_dir, exist_ok=True)
    runs = load_runs(run_dir, include_unfinished)
    if not runs:
        raise FileNotFoundError(f"no {'' if include_unfinished else 'finished '}runs under {run_dir}")
    rows, skipped = score_table(runs, normalised=True, metaworld_metric=metaworld_metric, seed=seed, score=score)
    raw_rows, _ = score_table(runs, normalised=False, metaworld_metric=metaworld_metric, seed=seed, score=score)
    sections = {
        "curves": plot_learning_curves(runs, out_dir, metaworld_metric, seed),
        "quality": plot_reward_quality(runs, out_dir, seed),
        "adaptation": [],
    }
    adaptation_note, adaptation_lines = "", []
    if any(run.kind.adapts for run in runs):
        try:
            import sb3_pref.rl2  # noqa: F401

            curves = adaptation_curves(runs, seed)
            sections["adaptation"] = plot_adaptation(curves, out_dir)
            adaptation_lines = _adaptation_markdown(curves)
        except ImportError as error:
            adaptation_note = f"RL2 adaptation skipped: sb3_pref.rl2 does not import here ({error})."
    write_scores_csv(runs, os.path.join(out_dir, "scores.csv"), metaworld_metric, score)
    tasks = sorted({run.spec.task for run in runs if not run.kind.adapts})
    text = markdown_report(
        grid=read_json(os.path.join(run_dir, "grid.json")) or {},
        runs=runs,
        all_runs=load_runs(run_dir, include_unfinished=True),
        score_lines=_score_markdown(rows, [t for t in tasks if t not in skipped]),
        # Raw scores are aggregated over tasks only when they share a metric (returns and success rates do not mix).
        raw_lines=_score_markdown(raw_rows, tasks, aggregate=len({score_key(t, metaworld_metric) for t in tasks}) == 1),
        skipped=skipped,
        quality_lines=_quality_markdown(runs),
        figures=sections,
        adaptation_note=adaptation_note,
        metaworld_metric=metaworld_metric,
        adaptation_lines=adaptation_lines,
        score=score,
    )
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as handle:
        handle.write(text)
    summary = {
        f"{row.variant} {row.budget}".strip(): {
            "iqm": row.iqm,
            "iqm_ci": row.iqm_ci,
            "mean": row.overall_mean,
            "per_task": row.mean,
        }
        for row in rows
    }
    with open(os.path.join(out_dir, "summary.json"), "w") as handle:
        json.dump(_finite({"normalised_by_ppo": summary, "left_out": skipped}), handle, indent=2)
    return path
