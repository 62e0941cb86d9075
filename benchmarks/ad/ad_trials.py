"""
What AD's held-out trials show, from ``adaptation.csv`` (``examples/train_AD.py``): how it searches before its first
success and how often it goes back once it has found the goal (benchmarks/ad/README.md, the seed's room).

    python -m benchmarks ad trials runs/ad_a2c_room_150k/adaptation.csv [more.csv ...] [--agent AD]
"""

import argparse
import os
import sys

import numpy as np
import pandas as pd

# benchmarks/ad/README.md runs this file by path: then the repository's root is not on the path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.study import Option, probe, run_script


def trial_summary(path: str, agent: str) -> dict[str, float]:
    """:return: success at episodes 1, 5, 10, 15, 20; after the first success; per episode before it; found by ep 19"""
    table = pd.read_csv(path)
    table = table[table["agent"] == agent]
    if table.empty:
        raise ValueError(f"{path} has no rows of agent {agent!r}; its agents: {sorted(pd.read_csv(path)['agent'].unique())}")
    success = table.pivot(index="trial", columns="episode", values="success").to_numpy() > 0  # (trials, episodes)
    n_episodes = success.shape[1]
    first = np.where(success.any(axis=1), success.argmax(axis=1), n_episodes)  # episode of the first success
    episode = np.arange(n_episodes)
    after = episode[None, :] > first[:, None]
    before = episode[None, :] <= first[:, None]  # the searching episodes, the successful one included
    curve = success.mean(axis=0)
    return {
        **{f"ep {e}": float(curve[e - 1]) for e in (1, 5, 10, 15, 20) if e <= n_episodes},
        "once found": float(success[after].mean()) if after.any() else float("nan"),
        "search rate": float(success[before].mean()),
        "found by ep 19": float((first < min(19, n_episodes)).mean()),
        "trials": float(len(success)),
    }


@probe(
    "trials",
    "how AD searches before its first success on held-out trials, and how often it goes back once it found the goal",
    Option("paths", "adaptation.csv files", nargs="+"),
    Option("--agent", "the agent whose rows are read", default="AD"),
)
def trials(args: argparse.Namespace) -> None:
    """
    One row per ``adaptation.csv``: success at episodes 1-20, after the first success, while searching.

    :param args: the options
    """
    rows = {path: trial_summary(path, args.agent) for path in args.paths}
    columns = list(next(iter(rows.values())))
    print("| run | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for path, row in rows.items():
        print(f"| {path} | " + " | ".join(f"{row[c]:.0f}" if c == "trials" else f"{row[c]:.2f}" for c in columns) + " |")


if __name__ == "__main__":
    run_script(trials)
