"""
Training throughput of RL2 against plain RecurrentPPO on the same DarkRoom trial env and settings,
measured side by side in one process (runs interleaved, medians reported, one CPU thread).

    nice -n 10 python -m benchmarks rl2 throughput

Time is split into rollout collection (env steps + forward passes) and PPO updates, with a
callback that stamps rollout starts and ends. RL2 with an LSTM computes the same updates as
RecurrentPPO (tests/test_rl2.py checks the parameters match); the difference is that its policy
runs each minibatch through the LSTM in one call instead of a Python loop over time steps.
"""

import argparse
import time
from typing import Any

import numpy as np
import torch as th
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from benchmarks.study import Option, probe, shared
from sb3_pref.envs.darkroom import darkroom_trials
from sb3_pref.rl2 import RL2

SETTINGS: dict[str, dict[str, Any]] = {
    "DarkRoom preset (16 envs x 160 steps, batch 1280, hidden 128)": dict(
        n_envs=16, n_steps=160, batch_size=1280, n_epochs=4, hidden=128
    ),
    "RecurrentPPO defaults (16 envs x 128 steps, batch 128, hidden 256)": dict(
        n_envs=16, n_steps=128, batch_size=128, n_epochs=10, hidden=256
    ),
}


class RolloutTimer(BaseCallback):
    """Adds up the wall time spent inside collect_rollouts."""

    def __init__(self) -> None:
        super().__init__()
        self.collect_seconds = 0.0
        self._start = 0.0

    def _on_rollout_start(self) -> None:
        self._start = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.collect_seconds += time.perf_counter() - self._start

    def _on_step(self) -> bool:
        return True


def measure(algo: type, policy: str, setting: dict[str, Any], iterations: int, seed: int) -> dict[str, float]:
    env = make_vec_env(darkroom_trials, n_envs=setting["n_envs"], seed=seed, env_kwargs=dict(split="train"))
    model = algo(
        policy,
        env,
        n_steps=setting["n_steps"],
        batch_size=setting["batch_size"],
        n_epochs=setting["n_epochs"],
        policy_kwargs=dict(lstm_hidden_size=setting["hidden"]),
        seed=seed,
        device="cpu",
    )
    steps = iterations * setting["n_envs"] * setting["n_steps"]
    timer = RolloutTimer()
    start = time.perf_counter()
    model.learn(steps, callback=timer)
    total = time.perf_counter() - start
    return {"fps": steps / total, "collect": timer.collect_seconds, "update": total - timer.collect_seconds, "total": total}


@probe(
    "throughput",
    "training throughput of RL2 against RecurrentPPO on the same DarkRoom trials, collection and updates apart",
    Option("--iterations", "PPO iterations per measurement", type=int, default=3),
    shared("repeats", help="interleaved measurements per algorithm"),
)
def throughput(args: argparse.Namespace) -> None:
    """
    Medians of interleaved measurements, one thread, per setting and algorithm.

    :param args: the options
    """
    th.set_num_threads(1)
    candidates = [
        ("RecurrentPPO", RecurrentPPO, "MlpLstmPolicy"),
        ("RL2 (LSTM)", RL2, "MlpLstmPolicy"),
        ("RL2 (GRU)", RL2, "MlpGruPolicy"),
    ]
    print("| setting | algorithm | env steps/s | collect s | update s | speed-up vs RecurrentPPO |")
    print("|---|---|---|---|---|---|")
    for name, setting in SETTINGS.items():
        runs: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in candidates}
        for repeat in range(args.repeats):
            for label, algo, policy in candidates:
                runs[label].append(measure(algo, policy, setting, args.iterations, seed=repeat))
        median = {label: {key: float(np.median([r[key] for r in rs])) for key in rs[0]} for label, rs in runs.items()}
        base = median["RecurrentPPO"]["fps"]
        for label, stats in median.items():
            print(
                f"| {name} | {label} | {stats['fps']:.0f} | {stats['collect']:.1f} | {stats['update']:.1f} | "
                f"{stats['fps'] / base:.2f}x |"
            )
