"""
How repetitive are a history's first episodes? AD on DQN histories predicted the learners' actions with 90% accuracy
and searched worse than a random walk (benchmarks/ad/README.md, fifth run). This measures, over the first 20 episodes of each
history (the search that a first-success view shows), how often a step leaves the agent in its cell (a wall bump or
the no-op) and how often the next action repeats the last one within an episode (a uniform random walk: 0.20).

    python -m benchmarks ad history-habits runs/ad_dqn_first_success/histories.npz runs/ad_q_first_success/histories.npz
"""

import argparse
import os
import sys

import numpy as np

# benchmarks/ad/README.md runs this file by path: then the repository's root is not on the path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.study import Option, probe, run_script
from sb3_pref.ad import Histories


def habits(path: str, episodes: int = 20) -> tuple[float, float]:
    """:return: the mean over histories of the share of steps that stay in their cell, and that repeat the last action"""
    histories = Histories.load(path)
    stay, repeat = [], []
    for i in range(histories.n_histories):
        length = int(histories.lengths[i])
        done = np.asarray(histories.dones[i][:length]).astype(bool)
        ends = np.flatnonzero(done)
        stop = int(ends[episodes - 1]) + 1 if len(ends) >= episodes else length
        obs, actions = np.asarray(histories.observations[i][:stop]), np.asarray(histories.actions[i][:stop]).ravel()
        same_episode = ~done[: stop - 1]  # step t + 1 belongs to step t's episode
        stay.append(np.mean(np.all(obs[1:] == obs[:-1], axis=1) & same_episode))
        repeat.append(np.sum((actions[1:] == actions[:-1]) & same_episode) / same_episode.sum())
    return float(np.mean(stay)), float(np.mean(repeat))


@probe(
    "history-habits",
    "how often a history's first episodes stay in their cell or repeat the last action",
    Option("paths", "histories.npz files", nargs="+"),
    Option("--episodes", "first episodes of each history to read", type=int, default=20),
)
def history_habits(args: argparse.Namespace) -> None:
    """
    One row per histories file: the share of steps that stay in their cell, and that repeat the last action.

    :param args: the options
    """
    print(f"| histories | steps that stay in their cell, first {args.episodes} episodes | next action = last action |")
    print("|---|---|---|")
    for path in args.paths:
        stay, repeat = habits(path, args.episodes)
        print(f"| {path} | {stay:.2f} | {repeat:.2f} |")


if __name__ == "__main__":
    run_script(history_habits)
