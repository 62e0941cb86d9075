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

from benchmarks.study import probe, shared

RESULTS = Path(__file__).resolve().parent / "results"
# Uniform-random policy returns, for normalising Pendulum's negative returns
# (benchmarks/quality_grid/results/quality/random_returns.json):
# on Pendulum "final / PPO" is (R - random) / (PPO - random); on dm_control (returns >= 0) it is R / PPO.
RANDOM = {"Pendulum-v1": -1205.6}


def load(seeds: str) -> dict:
    runs: dict = defaultdict(lambda: defaultdict(dict))
    for path in sorted(RESULTS.glob("*/*/seed*.json")):
        run = json.loads(path.read_text())
        group = "dev" if run["seed"] < 100 else ("seed100" if run["seed"] == 100 else "report")
        if group == seeds:
            runs[run["task"]][run["arm"]][run["seed"]] = run
    return runs


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
        ppo_cpu = np.mean([r["cpu_seconds"] for r in ppo.values()]) if ppo else None
        low = RANDOM["Pendulum-v1"] if task.startswith("Pendulum-v1") else 0.0
        for arm, by_seed in sorted(arms.items()):
            cells = [f"{by_seed[s]['start']:.0f} → **{by_seed[s]['final']:.1f}**" if s in by_seed else "" for s in seeds]
            final = np.mean([r["final"] for r in by_seed.values()])
            iqm = trim_mean([r["final"] for r in by_seed.values()], 0.25)
            above = sum(r["final"] > r["start"] for r in by_seed.values())
            cpu = np.mean([r["cpu_seconds"] for r in by_seed.values()])
            # the 10 evaluations during training (5 episodes each): an area under the learning curve
            auc = np.mean([np.mean([value for _, value in r["curve"]]) for r in by_seed.values()])
            ratio = f"{(final - low) / (ppo_final - low):.2f}" if ppo_final is not None else ""
            cpu_ratio = f"{cpu / ppo_cpu:.2f}" if ppo_cpu else ""
            summary = f"{final:.1f} | {iqm:.1f} | {ratio} | {above} of {len(by_seed)} | {auc:.1f} | {cpu:.0f} | {cpu_ratio}"
            print(f"| {arm} (n={len(by_seed)}) | " + " | ".join(cells) + f" | {summary} |")
