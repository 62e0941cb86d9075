"""
The defaults study's tables (benchmarks/defaults/README.md), read from the committed run files.

    python -m benchmarks defaults table [--seeds dev|report]
"""

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import trim_mean

from benchmarks.machine import machine
from benchmarks.study import probe, shared

RESULTS = Path(__file__).resolve().parent / "results"
# Uniform-random policy returns, for normalising Pendulum's negative returns
# (benchmarks/quality_grid/results/quality/random_returns.json):
# on Pendulum "final / PPO" is (R - random) / (PPO - random); on dm_control (returns >= 0) it is R / PPO. Gymnasium's
# MuJoCo tasks: a uniform-random policy, 20 episodes (env seeds 5000-5019, actions from default_rng(0)), v5 envs.
RANDOM = {"Pendulum-v1": -1205.6, "Hopper-v5": 21.6, "HalfCheetah-v5": -291.1}


def load(seeds: str) -> dict:
    runs: dict = defaultdict(lambda: defaultdict(dict))
    for path in sorted(RESULTS.glob("*/*/seed*.json")):
        run = json.loads(path.read_text())
        group = "dev" if run["seed"] < 100 else ("seed100" if run["seed"] == 100 else "report")
        if group == seeds:
            runs[run["task"]][run["arm"]][run["seed"]] = run
    return runs


def cpu_cells(by_seed: dict, ppo: dict) -> tuple[str, str]:
    """
    The arm's CPU seconds per run (a mean per machine where its runs trained on more than one) and its CPU against
    PPO's: the mean of per-seed ratios, each against PPO's run of that seed on the same machine (seconds on two CPUs
    are not comparable: one trains the same run in about half the time).

    :return: the two cells
    """
    per_machine: dict = defaultdict(list)
    for run in by_seed.values():
        per_machine[machine(run)].append(run["cpu_seconds"])
    if len(per_machine) == 1:
        cpu = f"{np.mean(next(iter(per_machine.values()))):.0f}"
    else:
        cpu = "; ".join(f"{np.mean(seconds):.0f} ({name})" for name, seconds in sorted(per_machine.items()))
    ratios = [
        run["cpu_seconds"] / ppo[seed]["cpu_seconds"]
        for seed, run in by_seed.items()
        if seed in ppo and machine(ppo[seed]) == machine(run)
    ]
    return cpu, (f"{np.mean(ratios):.2f}" + (f" (n={len(ratios)})" if len(ratios) < len(by_seed) else "") if ratios else "-")


@probe(
    "table",
    "the tables of README.md, from the committed run files",
    shared("seed_group", choices=("dev", "report", "seed100"), help="which seeds: dev (0-4), report (101 and up) or seed100"),
)
def table(args: argparse.Namespace) -> None:
    """
    One table per task: each arm's start and final return seed by seed, their summaries, and CPU against PPO.

    :param args: the options
    """
    runs = load(args.seeds)
    for task, arms in runs.items():
        seeds = sorted({seed for arm in arms.values() for seed in arm})
        print(f"\n### {task} ({args.seeds} seeds {seeds[0]}-{seeds[-1]})\n")
        columns = "mean final | IQM final | final / PPO | ends above its start | mean of the curve | CPU s (mean) | CPU / PPO"
        print("| arm | " + " | ".join(f"seed {s}" for s in seeds) + f" | {columns} |")
        print("|---|" + "---|" * (len(seeds) + 7))
        ppo = arms.get("ppo", {})
        ppo_final = np.mean([r["final"] for r in ppo.values()]) if ppo else None
        low = next((value for prefix, value in RANDOM.items() if task.startswith(prefix)), 0.0)
        for arm, by_seed in sorted(arms.items()):
            cells = [f"{by_seed[s]['start']:.0f} → **{by_seed[s]['final']:.1f}**" if s in by_seed else "" for s in seeds]
            final = np.mean([r["final"] for r in by_seed.values()])
            iqm = trim_mean([r["final"] for r in by_seed.values()], 0.25)
            above = sum(r["final"] > r["start"] for r in by_seed.values())
            cpu, cpu_ratio = cpu_cells(by_seed, ppo)
            # the 10 evaluations during training (5 episodes each): an area under the learning curve
            auc = np.mean([np.mean([value for _, value in r["curve"]]) for r in by_seed.values()])
            ratio = f"{(final - low) / (ppo_final - low):.2f}" if ppo_final is not None else ""
            summary = f"{final:.1f} | {iqm:.1f} | {ratio} | {above} of {len(by_seed)} | {auc:.1f} | {cpu} | {cpu_ratio}"
            print(f"| {arm} (n={len(by_seed)}) | " + " | ".join(cells) + f" | {summary} |")
