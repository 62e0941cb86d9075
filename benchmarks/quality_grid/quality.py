"""
The tables and figure of benchmarks/quality_grid/README.md, from the runs of benchmarks/quality_grid/quality.yaml and
quality_teachers.yaml (the committed copies in benchmarks/quality_grid/results/quality/runs, or a run folder).

    python -m benchmarks quality_grid tables                      # the Markdown tables
    python -m benchmarks quality_grid tables --plot               # also results/quality/curves.png
    python -m benchmarks quality_grid tables --runs runs/quality  # straight from the grid's folder

Candidates measured beside the grid (``results/quality/variants/<name>``, e.g. ``rm128``, ``front600``) are
rows of the second table, named after their folder, normalised by the same PPO runs.

A run's score is the grid report's: the mean of the last 10% of its logged training returns
(``rollout/ep_rew_mean``, the true reward, which the PPO_REWARD policy never sees). Scores are
normalised by the mean score of PPO on the true reward on the same task, as B-Pref does; Pendulum-v1's
returns are negative, so there a score is normalised as ``(R - R_random) / (R_PPO - R_random)`` with a
uniform random policy's return. Each run also ends with a deterministic evaluation (10 episodes, SB3's
``evaluate_policy``), what a user of the trained model gets, normalised the same way.
"""

import argparse
import json
import os
from collections import defaultdict
from typing import Optional

import numpy as np

from benchmarks.study import Option, probe
from sb3_pref.experiments.records import RunRecord
from sb3_pref.experiments.results import RETURN_KEY, RunResult, final_score, learning_curves, load_runs
from sb3_pref.experiments.stats import bootstrap_ci, bootstrap_mean_curve, iqm

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "quality")
RANDOM_FILE = os.path.join(RESULTS, "random_returns.json")
TASKS = ("cartpole_balance", "cartpole_swingup", "walker_stand", "Pendulum-v1")


def random_return(task: str, episodes: int = 10, seed: int = 0) -> float:
    """A uniform random policy's mean return on ``task`` (measured once, then read from RANDOM_FILE)."""
    cached = json.load(open(RANDOM_FILE)) if os.path.exists(RANDOM_FILE) else {}
    if task not in cached:
        from sb3_pref.envs import make_benchmark_vec_env

        env = make_benchmark_vec_env(task, n_envs=1, seed=seed)
        env.action_space.seed(seed)
        returns, total = [], 0.0
        env.reset()
        while len(returns) < episodes:
            _, reward, done, _ = env.step(np.array([env.action_space.sample()]))
            total += float(reward[0])
            if done[0]:
                returns.append(total)
                total = 0.0
        cached[task] = float(np.mean(returns))
        os.makedirs(RESULTS, exist_ok=True)
        with open(RANDOM_FILE, "w") as file:
            json.dump(cached, file, indent=1, sort_keys=True)
    return float(cached[task])


def setting(run: RunResult, variant: str = "") -> str:
    """``ppo``, or ``<teacher> <labels>`` for PPO_REWARD, with `` (<variant>)`` for a candidate's run."""
    if run.spec.algo == "ppo":
        return "ppo"
    return f"{run.spec.teacher} {run.spec.budget.max_feed}" + (f" ({variant})" if variant else "")


def load_variants(folder: str) -> dict[str, list[RunResult]]:
    """The finished runs of each candidate folder under ``folder`` (``variants/<name>/...``), by name."""
    if not os.path.isdir(folder):
        return {}
    return {name: load_runs(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}


def score_at(run: RunResult, share: float) -> float:
    """The run's score at ``share`` of its steps: its last logged return at or before that step."""
    steps, values = run.columns.get("time/total_timesteps"), run.columns.get(RETURN_KEY)
    if steps is None or values is None:
        return float("nan")
    keep = np.isfinite(values) & (steps <= share * run.spec.total_timesteps)
    return float(values[keep][-1]) if keep.any() else float("nan")


def final_value(run: RunResult, key: str) -> float:
    """A value of the run's ``final`` record (``eval_return``...), NaN when the run has none."""
    return float(RunRecord(run.run_dir).data.get("final", {}).get(key, np.nan))


def training_cpu(run: RunResult) -> float:
    """CPU seconds of the run without its closing evaluation."""
    return float(RunRecord(run.run_dir).data.get("cpu_time", np.nan)) - np.nan_to_num(final_value(run, "eval_cpu_time"))


def normalised(scores: np.ndarray, ppo_mean: float, rand: float) -> np.ndarray:
    """B-Pref's ratio to PPO; anchored at the random return where PPO's return is not positive."""
    return scores / ppo_mean if ppo_mean > 0 else (scores - rand) / (ppo_mean - rand)


def _cell(values: np.ndarray) -> str:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return "-"
    low, high = bootstrap_ci(values, statistic=iqm)
    return f"{iqm(values):.2f} [{low:.2f}, {high:.2f}]"


def tables(runs: list[RunResult], variants: Optional[dict[str, list[RunResult]]] = None) -> str:
    """The oracle table (one row per task) and the table of teachers and candidates, in Markdown."""
    by_task: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        by_task[run.spec.task][setting(run)].append(run)
    for name, variant_runs in (variants or {}).items():
        for run in variant_runs:
            if run.spec.algo != "ppo":
                by_task[run.spec.task][setting(run, name)].append(run)
    lines = [
        "| task | steps | PPO: training / evaluation return | labels | training score / PPO | evaluation / PPO "
        "| training score / PPO at half the steps | CPU / PPO |",
        "|---|---|---|---|---|---|---|---|",
    ]
    teacher_lines = [
        "| task | teacher, labels | seeds | score / PPO | evaluation / PPO | CPU / PPO |",
        "|---|---|---|---|---|---|",
    ]
    for task in [t for t in TASKS if t in by_task] + sorted(set(by_task) - set(TASKS)):
        groups = by_task[task]
        if "ppo" not in groups:
            continue
        ppo = np.array([final_score(run.columns, RETURN_KEY) for run in groups["ppo"]])
        ppo_eval = np.array([final_value(run, "eval_return") for run in groups["ppo"]])
        ppo_half = np.nanmean([score_at(run, 0.5) for run in groups["ppo"]])
        ppo_cpu = np.mean([training_cpu(run) for run in groups["ppo"]])
        rand = random_return(task)
        steps = groups["ppo"][0].spec.total_timesteps
        for name in sorted((g for g in groups if g != "ppo"), key=lambda g: (g.split()[0] != "oracle", g)):
            pref = groups[name]
            scores = np.array([final_score(run.columns, RETURN_KEY) for run in pref])
            evals = np.array([final_value(run, "eval_return") for run in pref])
            half = np.array([score_at(run, 0.5) for run in pref])
            cpu = np.mean([training_cpu(run) for run in pref]) / ppo_cpu
            ratio, eval_ratio = normalised(scores, ppo.mean(), rand), normalised(evals, np.nanmean(ppo_eval), rand)
            if name.startswith("oracle") and "(" not in name:
                half_ratio = normalised(half, ppo_half, rand)
                lines.append(
                    f"| {task} | {steps // 1000}k | {iqm(ppo):.1f} / {iqm(ppo_eval):.1f} (n={len(ppo)}) "
                    f"| {name.split()[1]} (n={len(scores)}) | {_cell(ratio)} | {_cell(eval_ratio)} | {_cell(half_ratio)} "
                    f"| {cpu:.2f} |"
                )
            teacher_lines.append(f"| {task} | {name} | {len(scores)} | {_cell(ratio)} | {_cell(eval_ratio)} | {cpu:.2f} |")
    return "\n".join(lines) + "\n\n" + "\n".join(teacher_lines) + "\n"


def seed_table(runs: list[RunResult], variants: Optional[dict[str, list[RunResult]]] = None) -> str:
    """Each setting's runs, seed by seed: evaluation return / training score / training CPU seconds."""
    groups: dict[str, dict[int, RunResult]] = defaultdict(dict)
    for variant, group in [("", runs), *(variants or {}).items()]:
        for run in group:
            groups[f"{run.spec.task}: {setting(run, variant)}"][run.spec.seed] = run
    seeds = sorted({seed for group in groups.values() for seed in group})
    lines = ["| setting | " + " | ".join(f"seed {seed}" for seed in seeds) + " |", "|---" * (len(seeds) + 1) + "|"]
    for name in sorted(groups):
        cells = []
        for seed in seeds:
            run = groups[name].get(seed)
            cells.append(
                ""
                if run is None
                else f"{final_value(run, 'eval_return'):.1f} / "
                f"{final_score(run.columns, RETURN_KEY):.0f} / {training_cpu(run):.0f}"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(runs: list[RunResult], path: str) -> None:
    """Training return against env steps, mean and 95% bootstrap band over seeds, one panel per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in TASKS if any(run.spec.task == t for run in runs)]
    figure, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.4), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        groups: dict[str, list[RunResult]] = defaultdict(list)
        for run in runs:
            if run.spec.task == task and (run.spec.algo == "ppo" or run.spec.teacher == "oracle"):
                groups[setting(run)].append(run)
        for name in sorted(groups, key=lambda g: (g != "ppo", len(g), g)):
            steps, values = learning_curves(groups[name], RETURN_KEY)
            if steps.size == 0:
                continue
            mean, low, high = bootstrap_mean_curve(values)
            label = "PPO, true reward" if name == "ppo" else f"PPO_REWARD, {name.split()[1]} oracle labels"
            axis.plot(steps, mean, label=f"{label} (n={len(values)})")
            axis.fill_between(steps, low, high, alpha=0.2)
        axis.set_title(task)
        axis.set_xlabel("env steps")
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel("true return (training episodes)")
    axes[0][0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"wrote {path}")


@probe(
    "tables",
    "the tables (and figure) of README.md, from the grid's runs and the candidates measured beside it",
    Option("--runs", "a grid folder, or the committed copies", default=os.path.join(RESULTS, "runs")),
    Option("--variants", "candidates' folders", default=os.path.join(RESULTS, "variants")),
    Option("--plot", "also draw results/quality/curves.png", action="store_true"),
    Option("--by-seed", "also print every run, seed by seed", action="store_true"),
)
def quality_tables(args: argparse.Namespace) -> None:
    """
    Scores normalised by PPO on the true reward, per setting; the candidates are rows of the second table.

    :param args: the options
    """
    runs, variants = load_runs(args.runs), load_variants(args.variants)
    print(tables(runs, variants))
    if args.by_seed:
        print(seed_table(runs, variants))
    if args.plot:
        plot(runs, os.path.join(RESULTS, "curves.png"))
