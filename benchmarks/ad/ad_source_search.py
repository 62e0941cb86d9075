"""
How fast do source learners find a DarkRoom goal they have never seen? AD copies its sources' search: on A2C
histories it found held-out goals exactly as often as a random walk (benchmarks/ad/README.md, fourth run). This measures
the sources themselves, on the training goals of the seed's room (9 x 9, 20-step episodes that end on the goal),
over their first episodes, for A2C as recorded for AD and for two SB3 ways to make a learner search:

- ``a2c``: the AD source (``record_learner(..., "a2c")``, 10 envs, learning rate 1e-3), its history in recorded order;
- ``a2c_count_bonus``: A2C on one env, updated every 5 steps (learning rate 3e-3), its reward plus a count-based
  bonus ``beta / sqrt(N(cell))`` over its whole lifetime, so that its value favours cells it has seldom seen;
- ``dqn_cells``: SB3's DQN on one-hot cells with a linear Q (a table), every value starting at 1 (optimistic) plus
  a seeded draw under 0.01 that breaks ties, SGD, epsilon 0.05 (``record_learner(..., "dqn")``,
  ``sb3_pref.ad.make_dqn_learner``): tabular Q-learning inside SB3, one update per step from the step just taken
  (a buffer and a batch of one, the target network copied every step);
- ``dqn_cells_replay``: the same table learned from replayed batches of 32 (learning rate 8), the target network
  copied every 100 steps: the settings of AD's fifth run;
- ``qlearning``: the library's tabular Q-learner (optimistic, one update per step), the source that reached 0.83;
- ``random``: uniform actions.

    OMP_NUM_THREADS=1 python -m benchmarks ad source-search --goals 20 --steps 4000
"""

import argparse
import os
import sys
import time
from typing import Any, Callable, Optional

import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

# benchmarks/ad/README.md runs this file by path: then the repository's root is not on the path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.study import Option, probe, run_script
from sb3_pref.ad import HistoryRecorder, RecordHistoryCallback, record_learner
from sb3_pref.ad.learners import make_a2c_learner
from sb3_pref.envs.darkroom import AD_TEST_GOALS, DarkRoom, Goal, split_goals

ROOM: dict[str, Any] = dict(terminate_on_goal=True)


class VecCountBonus(VecEnvWrapper):
    """Adds ``beta / sqrt(N(cell))`` to the reward, counting cells over the learner's lifetime (all its envs)."""

    def __init__(self, venv: VecEnv, beta: float) -> None:
        super().__init__(venv)
        self.beta = beta
        self.counts: dict[bytes, int] = {}
        self.env_rewards = np.zeros(venv.num_envs, dtype=np.float32)

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.env_rewards = rewards.copy()
        bonus = np.zeros_like(rewards)
        for i, info in enumerate(infos):
            key = np.asarray(info["terminal_observation"] if dones[i] else obs[i]).tobytes()
            self.counts[key] = self.counts.get(key, 0) + 1
            bonus[i] = self.beta / np.sqrt(self.counts[key])
        return obs, rewards + bonus, dones, infos


class EnvRewardCallback(RecordHistoryCallback):
    """Records the env's own reward, not the bonus the learner was trained on."""

    def __init__(self, recorder: HistoryRecorder, bonus: VecCountBonus) -> None:
        super().__init__(recorder)
        self.bonus = bonus

    def _on_step(self) -> bool:
        self.locals["rewards"] = self.bonus.env_rewards
        return super()._on_step()


def a2c_count_bonus(goal: Goal, steps: int, seed: int) -> np.ndarray:
    venv = VecCountBonus(make_vec_env(DarkRoom, n_envs=1, seed=seed, env_kwargs=dict(goals=[goal], **ROOM)), beta=0.1)
    model = make_a2c_learner(venv, seed=seed, learning_rate=3e-3, n_steps=5)
    callback = EnvRewardCallback(HistoryRecorder(1), venv)
    model.learn(steps, callback=callback)
    assert callback.recorder is not None
    return callback.recorder.to_histories(goal, 5, {}).episode_returns()[0]


def dqn_cells(goal: Goal, steps: int, seed: int) -> np.ndarray:
    return record_learner(goal, "dqn", steps, seed, env_kwargs=ROOM).episode_returns()[0]


#: the fifth run's DQN settings (benchmarks/ad/README.md), before the learner became online
DQN_REPLAY = dict(learning_rate=8.0, buffer_size=100_000, batch_size=32, target_update_interval=100)


def dqn_cells_replay(goal: Goal, steps: int, seed: int) -> np.ndarray:
    return record_learner(goal, "dqn", steps, seed, env_kwargs=ROOM, learner_kwargs=DQN_REPLAY).episode_returns()[0]


def random_walk(goal: Goal, steps: int, seed: int) -> np.ndarray:
    env, rng = DarkRoom(goals=[goal], **ROOM), np.random.default_rng(seed)
    returns, total = [], 0.0
    env.reset(seed=seed)
    for _ in range(steps):
        _, reward, terminated, truncated, _ = env.step(int(rng.integers(5)))
        total += float(reward)
        if terminated or truncated:
            returns.append(total)
            total = 0.0
            env.reset()
    return np.asarray(returns)


SOURCES: dict[str, Callable[[Goal, int, int], np.ndarray]] = {
    "a2c": lambda goal, steps, seed: record_learner(
        goal, "a2c", steps, seed, env_kwargs=ROOM, learner_kwargs=dict(learning_rate=1e-3)
    ).episode_returns()[0],
    "a2c_count_bonus": a2c_count_bonus,
    "dqn_cells": dqn_cells,
    "dqn_cells_replay": dqn_cells_replay,
    "qlearning": lambda goal, steps, seed: record_learner(goal, "qlearning", steps, seed, env_kwargs=ROOM).episode_returns()[
        0
    ],
    "random": random_walk,
}


def search_row(returns: list[np.ndarray], seconds: float, horizon: Optional[int] = None) -> dict[str, float]:
    """Share of learners that found the goal by episode 20, median episode of the first find, success per episode."""
    n = horizon or min(len(r) for r in returns)
    success = np.array([r[:n] > 0 for r in returns])
    first = np.where(success.any(axis=1), success.argmax(axis=1) + 1, n + 1)
    return {
        "found by ep 20": float((first <= 20).mean()),
        "median first find": float(np.median(first)),
        "success ep 1-20": float(success[:, :20].mean()),
        "ep 21-50": float(success[:, 20:50].mean()),
        "ep 51-200": float(success[:, 50:200].mean()),
        "s per learner": seconds / len(returns),
    }


@probe(
    "source-search",
    "how fast source learners find a DarkRoom goal they have never seen",
    Option("--goals", "training goals, one learner each", type=int, default=12),
    Option("--steps", "env steps per learner (at least 200 episodes)", type=int, default=4000),
    Option("--sources", "the sources to measure", nargs="+", default=list(SOURCES), choices=list(SOURCES)),
)
def source_search(args: argparse.Namespace) -> None:
    """
    One row per source: when its learners first find their goal, and how often they find it afterwards.

    :param args: the options
    """
    goals = split_goals(0, n_test=AD_TEST_GOALS)[0][: args.goals]
    print(f"{args.goals} training goals of the seed's room, one learner each, {args.steps} steps")
    print(f"| source | {' | '.join(search_row([np.ones(200)], 1.0))} |")
    print("|---" * 7 + "|")
    for name in args.sources:
        start = time.perf_counter()
        returns = [SOURCES[name](goal, args.steps, seed) for seed, goal in enumerate(goals)]
        row = search_row(returns, time.perf_counter() - start)
        cells = [f"{v:.0f}" if k == "median first find" else f"{v:.2f}" for k, v in row.items()]
        print(f"| {name} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    run_script(source_search)
