"""
PEBBLE (SAC_REWARD) against SAC on the true reward and PrefPPO, at the same env steps and feedback,
plus the time to relabel a replay buffer of a given size. Writes one JSON line per finished run,
so a partial run still leaves its results; the ``compare-table`` probe prints the Markdown table of a results file.

    MUJOCO_GL=osmesa nice -n 10 python -m benchmarks pebble compare \
        --tasks walker_walk cheetah_run --steps 4000 --seeds 1 --out benchmarks/results/pebble_small.jsonl
    python -m benchmarks pebble compare-table benchmarks/results/pebble_small.jsonl

The scale (steps, labels, network sizes) is a command-line choice; benchmarks/pebble/README.md states the one used.
"""

import argparse
import json
import os
import time
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv

from benchmarks.study import Option, probe, shared
from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel
from sb3_pref.common.offpolicy import relabel_replay_buffer
from sb3_pref.core.reward_model import BPREF_HIDDEN_DIM, BPREF_N_LAYERS
from sb3_pref.envs.dmc import make_vec_dmcontrol_env


def time_relabel(n_transitions: int, obs_dim: int, act_dim: int, chunk_size: int, seed: int = 0) -> dict[str, Any]:
    """Seconds to relabel a full ``n_transitions`` replay buffer with a default (3 x 256, ensemble of 3) reward model."""
    from gymnasium import spaces

    obs_space = spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
    act_space = spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
    buffer = ReplayBuffer(
        n_transitions, obs_space, act_space, device="cpu", optimize_memory_usage=True, handle_timeout_termination=False
    )
    rng = np.random.default_rng(seed)
    buffer.observations[:] = rng.standard_normal(buffer.observations.shape, dtype=np.float32)
    buffer.actions[:] = rng.uniform(-1, 1, buffer.actions.shape).astype(np.float32)
    buffer.full = True
    model = RewardModel(obs_dim, act_dim, hidden_dim=BPREF_HIDDEN_DIM, n_layers=BPREF_N_LAYERS, seed=seed)

    def reward_fn(obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        mean, _ = model.predict(np.concatenate([obs, actions], axis=-1))
        return mean

    # CPU time as well as wall time: on a shared machine the wall time mostly measures the other processes.
    start, cpu_start = time.perf_counter(), time.process_time()
    n = relabel_replay_buffer(buffer, reward_fn, chunk_size=chunk_size)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return {"kind": "relabel", "transitions": n, "obs_dim": obs_dim, "act_dim": act_dim, "chunk_size": chunk_size,
            "seconds": seconds, "cpu_seconds": cpu_seconds, "transitions_per_cpu_s": n / cpu_seconds}  # fmt: skip


def _env(task: str, seed: int) -> VecEnv:
    return make_vec_dmcontrol_env(task, n_envs=1, seed=seed)


def run_one(method: str, task: str, seed: int, steps: int, feedback: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one method for ``steps`` env steps; return its final evaluation (true reward)."""
    env = _env(task, seed)
    sac_kwargs = dict(
        learning_starts=args.seed_steps, batch_size=args.batch_size, buffer_size=steps, learning_rate=args.lr,
        policy_kwargs=dict(net_arch=[args.hidden] * 2), seed=seed, device="cpu",
    )  # fmt: skip
    # B-Pref's reward network, as in the committed pebble/README.md tables (the library default is smaller: 2 x 64).
    reward_model = RewardModel(
        env.observation_space, env.action_space, size_segment=50, mb_size=args.mb_size, hidden_dim=BPREF_HIDDEN_DIM,
        n_layers=BPREF_N_LAYERS, lr=3e-4,
    )  # fmt: skip
    if method == "sac_true":
        model: Any = SAC("MlpPolicy", env, **sac_kwargs)
        learn_kwargs: dict[str, Any] = {}
    elif method == "pebble":
        model = SAC_REWARD(
            "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=feedback, feed_type=1,
            num_interaction=args.num_interaction, unsuper_step=args.unsuper_step, re_update=50, **sac_kwargs,
        )  # fmt: skip
        learn_kwargs = {"unsuper_flag": 1}
    elif method == "prefppo":
        model = PPO_REWARD(
            "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=feedback, feed_type=1,
            num_interaction=args.num_interaction, unsuper_step=args.unsuper_step, unsuper_n_epochs=10, re_update=50,
            n_steps=500, batch_size=64, learning_rate=args.lr, policy_kwargs=dict(net_arch=[args.hidden] * 2),
            seed=seed, device="cpu",
        )  # fmt: skip
        learn_kwargs = {"unsuper_flag": 1}
    else:
        raise ValueError(f"unknown method {method!r}")
    start, cpu_start = time.perf_counter(), time.process_time()
    model.learn(steps, **learn_kwargs)
    train_s, train_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    eval_env = _env(task, seed + 1000)
    returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes, return_episode_rewards=True)
    episodes = [float(info["r"]) for info in model.ep_info_buffer]
    result = {"kind": "run", "method": method, "task": task, "seed": seed, "steps": steps, "feedback": feedback,
              "eval_return": float(np.mean(returns)), "train_returns": episodes, "train_s": train_s,
              "train_cpu_s": train_cpu_s}  # fmt: skip
    if method in ("pebble", "prefppo"):
        result["labels"] = int(model.pref_learner.counters()["total_feed"])
    env.close()
    eval_env.close()
    return result


def table(path: str) -> str:
    """Markdown table of a results file: mean (and per-seed) final evaluation return per task and method."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    lines = []
    for row in rows:
        if row["kind"] == "relabel":
            lines.append(
                f"relabel: {row['transitions']:,} transitions (obs {row['obs_dim']}, act {row['act_dim']}, "
                f"chunks of {row['chunk_size']}): {row['cpu_seconds']:.1f} s of CPU time on one thread "
                f"({row['transitions_per_cpu_s']:,.0f}/s), {row['seconds']:.1f} s wall on the shared machine"
            )
    runs = [row for row in rows if row["kind"] == "run"]
    tasks = sorted({row["task"] for row in runs})
    methods = [m for m in ("sac_true", "pebble", "prefppo") if any(row["method"] == m for row in runs)]
    header = "| task | " + " | ".join(methods) + " | PEBBLE / SAC | PEBBLE - PrefPPO |"
    lines += ["", header, "|---" * (len(methods) + 3) + "|"]
    for task in tasks:
        cells, means = [], {}
        for method in methods:
            values = [row["eval_return"] for row in runs if row["task"] == task and row["method"] == method]
            means[method] = float(np.mean(values)) if values else float("nan")
            cells.append(f"{means[method]:.1f} ({', '.join(f'{v:.0f}' for v in values)})" if values else "-")
        ratio = means.get("pebble", np.nan) / means.get("sac_true", np.nan) if means.get("sac_true") else float("nan")
        gap = means.get("pebble", np.nan) - means.get("prefppo", np.nan)
        lines.append(f"| {task} | " + " | ".join(cells) + f" | {ratio:.2f} | {gap:+.1f} |")
    return "\n".join(lines)


def figure(path: str, out: str) -> None:
    """Training-episode return (true reward) against env steps, one panel per task, mean over seeds per method."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    runs = [row for row in (json.loads(line) for line in open(path) if line.strip()) if row["kind"] == "run"]
    tasks = sorted({row["task"] for row in runs})
    fig = Figure(figsize=(6 * len(tasks), 4))
    FigureCanvasAgg(fig)
    for i, task in enumerate(tasks):
        axes = fig.add_subplot(1, len(tasks), i + 1)
        for method in ("sac_true", "pebble", "prefppo"):
            curves = [row["train_returns"] for row in runs if row["task"] == task and row["method"] == method]
            if not curves:
                continue
            length = min(len(c) for c in curves)
            matrix = np.array([c[:length] for c in curves])
            steps = 1000 * np.arange(1, length + 1)  # dm_control episodes are 1000 steps
            line = axes.plot(steps, matrix.mean(axis=0), marker="o", label=f"{method} (n={len(curves)})")[0]
            if len(curves) > 1:
                axes.fill_between(steps, matrix.min(axis=0), matrix.max(axis=0), alpha=0.15, color=line.get_color())
        axes.set_xlabel("env steps")
        axes.set_ylabel("training-episode return (true reward)")
        axes.set_title(f"{task}: mean over seeds, band = min..max")
        axes.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


@probe(
    "compare-table",
    "the Markdown table of a results file of compare, and optionally its training curves",
    Option("results", "a JSON-lines file that compare wrote"),
    Option("--figure", "also draw the training curves into PNG", metavar="PNG"),
)
def compare_table(args: argparse.Namespace) -> None:
    """
    Print the table; with ``--figure``, draw the curves too.

    :param args: the options
    """
    print(table(args.results))
    if args.figure:
        figure(args.results, args.figure)


@probe(
    "compare",
    "PEBBLE against SAC on the true reward and PrefPPO at the same steps and feedback, one JSON line per run",
    Option("--tasks", nargs="+", default=["walker_walk", "cheetah_run"]),
    Option("--methods", nargs="+", default=["pebble", "sac_true", "prefppo"]),
    shared("seeds", default=[1]),
    Option("--steps", type=int, default=4000),
    Option("--feedback", type=int, default=100),
    Option("--mb-size", type=int, default=10),
    Option("--seed-steps", type=int, default=500),
    Option("--unsuper-step", type=int, default=1000),
    Option("--num-interaction", type=int, default=500),
    Option("--hidden", type=int, default=256),
    Option("--batch-size", type=int, default=256),
    Option("--lr", type=float, default=5e-4),
    Option("--eval-episodes", type=int, default=2),
    Option("--relabel", "also time relabelling a buffer of this many transitions", type=int, default=0),
    shared("threads"),
    Option("--out", "the JSON-lines results file (appended to)", default="benchmarks/pebble/results/pebble.jsonl"),
)
def compare(args: argparse.Namespace) -> None:
    """
    Every method on every task and seed, one after another; then the table of the whole results file.

    :param args: the options
    """
    th.set_num_threads(args.threads)  # one thread: several processes share few cores
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)

    def write(result: dict[str, Any]) -> None:
        with open(args.out, "a") as handle:
            handle.write(json.dumps(result) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k != "train_returns"}), flush=True)

    if args.relabel:
        write(time_relabel(args.relabel, obs_dim=24, act_dim=6, chunk_size=16384))
    for seed in args.seeds:
        for task in args.tasks:
            for method in args.methods:
                write(run_one(method, task, seed, args.steps, args.feedback, args))
    print(table(args.out))
