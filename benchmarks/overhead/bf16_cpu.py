"""
Does bfloat16 make reward-model training faster on this CPU? ``train_dtype="auto"`` picks bfloat16 on
CPUs that report AMX or AVX512-BF16; this script measures the choice on the machine at hand instead of
assuming it: the same training passes in float32 and in bfloat16, interleaved (the order flips every
repeat, so drifting load hits both alike), for the default network and for B-Pref's.

    python -m benchmarks overhead bf16 --output benchmarks/overhead/bf16_cpu.md          # about a minute at one thread
"""

import argparse
import datetime
import os
import statistics
import time

import numpy as np
import torch as th

from benchmarks.machine import cpu_name
from benchmarks.study import Option, probe, shared
from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.reward_model import BPREF_HIDDEN_DIM, BPREF_N_LAYERS, RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.core.reward_training import cpu_bf16_flags, resolve_train_dtype
from sb3_pref.core.segments import SegmentBatch
from sb3_pref.core.teachers import ScriptedTeacher

NETWORKS = {
    "defaults (3 members of 2 x 64)": dict(),
    "B-Pref (3 members of 3 x 256)": dict(hidden_dim=BPREF_HIDDEN_DIM, n_layers=BPREF_N_LAYERS, lr=3e-4),
}


def segments(rng: np.random.Generator, n: int, horizon: int, obs_dim: int, act_dim: int) -> SegmentBatch:
    """Random segments whose true reward is a fixed nonlinear function of the inputs."""
    weights = np.random.default_rng(123).normal(size=obs_dim + act_dim).astype(np.float32)
    features = rng.normal(size=(n, horizon, obs_dim + act_dim)).astype(np.float32)
    return SegmentBatch(
        obs=features[..., :obs_dim],
        actions=features[..., obs_dim:],
        rewards=np.tanh(features @ weights),
        env_index=np.zeros(n, dtype=np.int64),
        start=np.zeros(n, dtype=np.int64),
    )


@probe(
    "bf16",
    "reward-model training in float32 against bfloat16 on this CPU, for the default network and B-Pref's",
    Option("--pairs", "labelled pairs (B-Pref's walker budget)", type=int, default=1000),
    Option("--segment", type=int, default=50),
    Option("--obs-dim", "walker's observation width", type=int, default=24),
    Option("--act-dim", type=int, default=6),
    Option("--epochs", "passes over the pairs per timing", type=int, default=2),
    shared("repeats", default=5),
    shared("threads"),
    shared("output", help="also write the table to this Markdown file"),
)
def bf16(args: argparse.Namespace) -> None:
    """
    The same training passes in both dtypes, interleaved; milliseconds per gradient step and their ratio.

    :param args: the options
    """
    th.set_num_threads(args.threads)

    rng = np.random.default_rng(0)
    seg_0, seg_1 = (segments(rng, args.pairs, args.segment, args.obs_dim, args.act_dim) for _ in range(2))
    dataset = PreferenceDataset()
    dataset.add(seg_0, seg_1, ScriptedTeacher.preset("oracle", seed=0).label_pairs(seg_0, seg_1))

    rows = []
    for name, kwargs in NETWORKS.items():
        models = {
            dtype: RewardModel(
                args.obs_dim, args.act_dim, size_segment=args.segment, train_dtype=dtype, device="cpu", seed=0, **kwargs
            )
            for dtype in ("float32", "bfloat16")
        }
        times: dict[str, list[float]] = {dtype: [] for dtype in models}
        steps = 0
        for repeat in range(args.repeats + 1):  # the first round warms up the kernels and is not counted
            order = list(models) if repeat % 2 == 0 else list(models)[::-1]
            for dtype in order:
                start = time.perf_counter()
                # a target accuracy above 1 never stops early: every timing runs the same passes
                stats = RewardTrainer(models[dtype]).fit(
                    dataset, np.random.default_rng(repeat), max_epochs=args.epochs, schedule="bpref", target_accuracy=2.0
                )
                if repeat:
                    times[dtype].append((time.perf_counter() - start) / stats["steps"])
                steps = int(stats["steps"])
        f32, bf16 = statistics.median(times["float32"]) * 1e3, statistics.median(times["bfloat16"]) * 1e3
        rows.append((name, steps, f32, bf16, f32 / bf16))

    flags = ", ".join(cpu_bf16_flags()) or "none"
    auto = resolve_train_dtype("auto", th.device("cpu"))
    lines = [
        f"Measured {datetime.date.today()} with `benchmarks/overhead/bf16_cpu.py` on {cpu_name()} ({os.cpu_count()} CPUs, "
        f'bf16 flags: {flags}; torch {th.__version__}, {args.threads} thread(s)); `train_dtype="auto"` picks '
        f"**{auto}** here.",
        "",
        f"{args.pairs} labelled pairs of {args.segment}-step segments (observation {args.obs_dim}, action {args.act_dim}), "
        f"{args.epochs} passes per timing, median of {args.repeats} interleaved repeats.",
        "",
        "| reward network | gradient steps per timing | float32 (ms per step) | bfloat16 (ms per step) | float32 / bfloat16 |",
        "|---|---|---|---|---|",
        *(f"| {name} | {steps} | {f32:.1f} | {bf16:.1f} | **{ratio:.2f}** |" for name, steps, f32, bf16, ratio in rows),
        "",
        "A ratio above 1 means bfloat16 trains faster.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write("# bfloat16 against float32 for reward-model training on a CPU\n\n" + text + "\n")
