"""
The issue's table for ``benchmarks/pebble/pebble_quality.yaml``: each run's closing deterministic evaluation
(``eval_return``) normalised by SAC on the true reward on the same task, per task (mean and 95% bootstrap interval
over seeds) and over tasks (IQM and mean with rliable's stratified bootstrap). Every score is measured from a
random policy's return on the task (``(x - random) / (SAC - random)``), which Pendulum-v1 needs (its returns are
negative, so B-Pref's plain ratio to SAC has no meaning there); B-Pref's ratio ``x / SAC`` is printed beside it
for the dm_control tasks, where a random policy's return is small.

    MUJOCO_GL=osmesa python -m benchmarks pebble iqm benchmarks/pebble/results/pebble_quality

The random policy's return is ``benchmarks/quality_grid/quality.py``'s: uniform actions for 10 episodes, measured once
per task and kept in ``benchmarks/quality_grid/results/quality/random_returns.json``.
"""

import argparse
from collections import defaultdict

import numpy as np

# the quality grid's random policy's return, measured once per task and kept in its results
from benchmarks.quality_grid.quality import random_return
from benchmarks.study import Option, probe
from sb3_pref.experiments.results import EVAL_KEY, load_runs
from sb3_pref.experiments.stats import bootstrap_ci, iqm, stratified_bootstrap_ci

ORDER = ("sac", "pebble", "ppo", "prefppo")


@probe("iqm", "the issue's table of a pebble_quality.yaml grid: scores over SAC's, per task and over tasks", Option("run_dir"))
def iqm_table(args: argparse.Namespace) -> None:
    """
    Each method's closing evaluations normalised by SAC's from a random policy's return; IQM and mean over tasks.

    :param args: the options
    """

    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))  # algo -> task -> by seed
    for run in load_runs(args.run_dir):
        if EVAL_KEY in run.final:
            scores[run.spec.algo][run.spec.task].append(float(run.final[EVAL_KEY]))
    tasks = sorted(scores["sac"])
    floor = {task: random_return(task) for task in tasks}
    print("random policy: " + ", ".join(f"{task} {value:.1f}" for task, value in floor.items()))
    print(f"\n| method | {' | '.join(tasks)} | IQM [95% CI] | mean [95% CI] |")
    print("|---" * (len(tasks) + 3) + "|")
    for algo in [a for a in ORDER if a in scores]:
        per_task, cells = [], []
        for task in tasks:
            values = np.array(scores[algo].get(task, []))
            sac = float(np.mean(scores["sac"][task]))
            normalised = (values - floor[task]) / (sac - floor[task])
            per_task.append(normalised)
            low, high = bootstrap_ci(normalised) if values.size else (np.nan, np.nan)
            ratio = f"; x/SAC {np.mean(values) / sac:.2f}" if floor[task] >= 0 and values.size else ""
            cells.append(f"{np.mean(normalised):.2f} [{low:.2f}, {high:.2f}] (n={values.size}{ratio})" if values.size else "")
        kept = [v for v in per_task if v.size]
        pooled = np.concatenate(kept)
        iqm_low, iqm_high = stratified_bootstrap_ci(kept, iqm)
        mean_low, mean_high = stratified_bootstrap_ci(kept, np.mean)
        print(
            f"| {algo} | {' | '.join(cells)} | {iqm(pooled):.2f} [{iqm_low:.2f}, {iqm_high:.2f}] "
            f"| {pooled.mean():.2f} [{mean_low:.2f}, {mean_high:.2f}] |"
        )
    print("\nraw eval_return per seed:")
    for algo in [a for a in ORDER if a in scores]:
        print(f"  {algo}: " + "; ".join(f"{task} {np.round(scores[algo][task], 1).tolist()}" for task in tasks))
