"""
Where AD searches before it first finds its goal on DarkRoom's held-out goals: of the cells each trial steps on for the
first time before its first success, the shares that are training goals, held-out goals and neither, and how many
there are in all, beside a random walk on the same trials (benchmarks/ad/README.md, the seed's room, third run).

    python -m benchmarks ad search-cells runs/ad_a2c_room_150k/model.zip
"""

import argparse
import os
import sys
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env

# benchmarks/ad/README.md runs this file by path: then the repository's root is not on the path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.study import Option, probe, run_script
from sb3_pref.ad import AD
from sb3_pref.envs.darkroom import AD_TEST_GOALS, darkroom_trials, split_goals
from sb3_pref.rl2.evaluation import RandomAgent

ROOM = dict(size=9, episode_length=20, terminate_on_goal=True, observation="xy")


def search_cells(agent: Any, rounds: int, seed: int = 1) -> tuple[dict[str, float], int]:
    """
    Play ``rounds`` trials of 20 episodes on each held-out goal.

    :return: the shares of first-visited cells before the first success by kind, and their number
    """
    train, test = split_goals(0, size=ROOM["size"], n_test=AD_TEST_GOALS)
    kinds = {tuple(int(v) for v in goal): "training goal" for goal in train}
    kinds.update({tuple(int(v) for v in goal): "held-out goal" for goal in test})
    env = make_vec_env(
        darkroom_trials,
        n_envs=AD_TEST_GOALS,
        seed=seed,
        env_kwargs=dict(split="test", split_seed=0, n_test=AD_TEST_GOALS, episodes_per_trial=20, **ROOM),
    )
    counts = {"training goal": 0, "held-out goal": 0, "neither": 0}
    for _ in range(rounds):
        obs, states = env.reset(), None
        starts = np.ones(env.num_envs, dtype=bool)
        found, playing = np.zeros(env.num_envs, dtype=bool), np.ones(env.num_envs, dtype=bool)
        seen: list[set[tuple[int, int]]] = [set() for _ in range(env.num_envs)]
        while playing.any():
            actions, states = agent.predict(obs, state=states, episode_start=starts, deterministic=False)
            obs, _, dones, _ = env.step(actions)
            for i in np.flatnonzero(playing):
                cell = tuple(int(v) for v in np.rint(obs[i, :2] * (ROOM["size"] - 1)))  # xy scaled to [0, 1]
                if not found[i] and cell not in seen[i]:
                    seen[i].add(cell)
                    counts[kinds.get(cell, "neither")] += 1
                found[i] |= bool(obs[i, -2] > 0.5)  # a trial observation ends with the previous reward and done
                playing[i] = not dones[i]  # the trial (20 episodes) is over
            starts = dones
    total = sum(counts.values())
    return {kind: count / total for kind, count in counts.items()}, total


@probe(
    "search-cells",
    "the cells AD first steps on before its first success on held-out goals, beside a random walk",
    Option("model", "an AD model.zip"),
    Option("--rounds", "trials per held-out goal", type=int, default=1),
)
def search_cells_probe(args: argparse.Namespace) -> None:
    """
    AD's and a random walk's first-visited cells before the first success, by kind.

    :param args: the options
    """
    th.set_num_threads(1)
    model = AD.load(args.model, device="cpu")
    action_space = make_vec_env(darkroom_trials, n_envs=1, env_kwargs=dict(split="test", n_test=AD_TEST_GOALS, **ROOM))
    for name, agent in (("AD", model), ("random", RandomAgent(action_space.action_space, seed=0))):
        shares, total = search_cells(agent, args.rounds)
        print(
            f"{name:>6}: {total} cells first visited before the first success; "
            + ", ".join(f"{kind} {share:.1%}" for kind, share in shares.items())
        )


if __name__ == "__main__":
    run_script(search_cells_probe)
