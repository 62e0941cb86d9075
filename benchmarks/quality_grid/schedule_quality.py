"""
Reward-model quality and cost of the two reward-model schedules, side by side with PPO.

On the settings of ``tests/test_ppo_reward.py::test_learned_reward_tracks_true_reward_on_pendulum``
(Pendulum-v1, 4 envs, 10,240 steps, 320 oracle labels in rounds of 64, disagreement queries), for each
seed: ``PPO`` on the true reward, ``PPO_REWARD`` with the default reward model and schedule (``"auto"``:
2x64, lr 1e-3, held-out stop) and with B-Pref's (``"bpref"``: 3x256, lr 3e-4, its schedule).
Quality is measured as the test does: the correlation of predicted with true rewards over the last
4000 transitions, and agreement with an oracle on 2000 fresh pairs.
Cost: CPU seconds of the process (``time.process_time``, less sensitive than wall clock to other jobs on
a shared machine), wall seconds, and the reward model's gradient steps::

    python -m benchmarks quality_grid schedules --seeds 0 1 2 --output benchmarks/quality_grid/schedule_quality.md
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import PPO

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from test_ppo_reward import PENDULUM_TRACKING_KWARGS, SMALL_NET, pendulum, reward_model_for  # noqa: E402  (the test's own settings)

from benchmarks import machine  # noqa: E402
from benchmarks.study import Option, probe, shared  # noqa: E402
from sb3_pref import PPO_REWARD  # noqa: E402
from sb3_pref.core.reward_model import BPREF_HIDDEN_DIM, BPREF_N_LAYERS  # noqa: E402

STEPS = 10_240
BPREF_NET = {"hidden_dim": BPREF_HIDDEN_DIM, "n_layers": BPREF_N_LAYERS, "lr": 3e-4}


def run(variant: str, seed: int) -> dict[str, Any]:
    """One run of ``variant`` (``"PPO"``, ``"auto"`` or ``"bpref"``): cost, quality and return."""
    env = pendulum(n_envs=4)
    wall, cpu = time.perf_counter(), time.process_time()
    if variant == "PPO":
        model = PPO("MlpPolicy", env, n_steps=256, batch_size=256, n_epochs=2, policy_kwargs=SMALL_NET, seed=seed)
        model.learn(STEPS)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return {"wall": wall, "cpu": cpu, "return": float(np.mean([i["r"] for i in model.ep_info_buffer]))}
    model = PPO_REWARD(
        "MlpPolicy",
        env,
        # "auto": the default network, lr and schedule; "bpref": B-Pref's network, lr and schedule.
        reward_model=reward_model_for(env, size_segment=25, mb_size=64, **(BPREF_NET if variant == "bpref" else {})),
        seed=seed,
        reward_schedule=variant,
        **PENDULUM_TRACKING_KWARGS,
    )
    learner = model.pref_learner
    rounds: list[dict[str, float]] = []
    query_round = learner.query_round

    def recorded(*args: Any, **kwargs: Any) -> dict[str, float]:
        stats = query_round(*args, **kwargs)
        if stats:
            rounds.append(stats)
        return stats

    learner.query_round = recorded
    model.learn(STEPS)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    obs, actions, true = learner.store.last_transitions(4000)
    return {
        "wall": wall,
        "cpu": cpu,
        "return": float(np.mean([i["r"] for i in model.ep_info_buffer])),
        "corr": float(np.corrcoef(learner.predict_rewards(obs, actions), true)[0, 1]),
        "agreement": learner.oracle_agreement(2000),
        "steps": learner.reward_model.n_updates,
        "labels": learner.total_feed,
        "round_steps": [int(r.get("model_train_steps", 0)) for r in rounds],
    }


@probe(
    "schedules",
    "reward-model quality and cost of the auto and bpref schedules beside PPO, on the learned-reward test's settings",
    shared("seeds", default=[0, 1, 2]),
    Option("--variants", "PPO, auto, bpref", nargs="+", default=["PPO", "auto", "bpref"]),
    shared("output", default=os.path.join(ROOT, "benchmarks", "quality_grid", "schedule_quality.md")),
)
def schedules(args: argparse.Namespace) -> None:
    """
    Every variant on every seed, interleaved per seed, one process; the table goes to ``--output``.

    :param args: the options
    """
    th.set_num_threads(1)
    load_before = os.getloadavg()[0]
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in args.variants}
    for seed in args.seeds:  # variants interleaved per seed, so a load change hits all alike
        for variant in args.variants:
            results[variant].append(run(variant, seed))
            print(variant, seed, results[variant][-1], flush=True)
    cpu_name = machine.cpu_name()
    ppo_cpu = statistics.median(r["cpu"] for r in results["PPO"]) if "PPO" in results else float("nan")
    lines = [
        "# Reward-model schedules: quality and cost on the learned-reward test's Pendulum settings",
        "",
        f"Measured {datetime.date.today().isoformat()} with `benchmarks/quality_grid/schedule_quality.py` "
        f"(torch {th.__version__}, "
        f"Python {platform.python_version()}, 1 torch thread), CPU: {cpu_name}; load average {load_before:.1f} before / "
        f"{os.getloadavg()[0]:.1f} after on 2 cores: **the machine was shared with other jobs**, so CPU time is the "
        "figure to compare. One process ran every run one after another, seeds " + ", ".join(map(str, args.seeds)) + ".",
        "",
        "| variant | seed | CPU (s) | CPU / PPO's median | wall (s) | gradient steps (per round) | labels "
        "| pred/true corr | oracle agreement | true return |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant, runs in results.items():
        for seed, res in zip(args.seeds, runs):
            quality = (
                f"{res['steps']} ({', '.join(map(str, res['round_steps']))}) | {res['labels']} | {res['corr']:.3f} | "
                f"{res['agreement']:.3f}"
                if "corr" in res
                else "- | - | - | -"
            )
            lines.append(
                f"| {variant} | {seed} | {res['cpu']:.1f} | {res['cpu'] / ppo_cpu:.2f} | {res['wall']:.1f} | {quality} "
                f"| {res['return']:.0f} |"
            )
    lines += ["", "Medians over seeds:", ""]
    for variant, runs in results.items():
        parts = [f"CPU {statistics.median(r['cpu'] for r in runs):.1f} s"]
        if "corr" in runs[0]:
            parts += [
                f"gradient steps {statistics.median(r['steps'] for r in runs):.0f}",
                f"corr {statistics.median(r['corr'] for r in runs):.3f}",
                f"agreement {statistics.median(r['agreement'] for r in runs):.3f}",
            ]
        parts.append(f"return {statistics.median(r['return'] for r in runs):.0f}")
        lines.append(f"- {variant}: " + ", ".join(parts))
    report = "\n".join(lines) + "\n"
    print(report)
    with open(args.output, "w") as file:
        file.write(report)
