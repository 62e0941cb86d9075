"""
Where PPO_REWARD's return falls short of PPO's on the true reward, at the issue-11 SB3-style walker_stand
settings (``overhead.py --ppo-style sb3 --pref-defaults``): one variant changed at a time, seed by seed.

Variants:

- ``ppo``: SB3's PPO on the true reward (the bar);
- ``base``: PPO_REWARD with its defaults, 32k steps of entropy pretraining, 1000 oracle labels;
- ``nopre``: the same without pretraining (``learn(unsuper_flag=0)``): every step is spent on the task;
- ``norm``: the same as ``base`` with ``normalize_reward=True`` (rewards rescaled after each refit);
- ``bprefrm``: the same as ``base`` with B-Pref's reward network (3 x 256 at lr 3e-4) on the default schedule;
- ``dis``: the same as ``base`` with disagreement queries (``feed_type="disagreement"``) instead of uniform ones;
- ``fp32`` / ``bf16``: the same as ``base`` with the reward model's training pinned to float32 / bfloat16 (``base``
  is ``train_dtype="auto"``, which picks bfloat16 on CPUs with AMX or AVX512-BF16 and float32 elsewhere).

``python -m benchmarks overhead return-gap --variant V --seed S`` writes ``results/return_gap/<variant>_<seed>.json``;
``--table`` prints the Markdown table of all
of them. Returns: the mean of the last 100 training episodes (``overhead.py``'s figure, which covers about
the last 100k of the 176k steps with 32 envs) and of the last 32 (the final 32k steps).
"""

import argparse
import functools
import glob
import json
import os
import statistics
import time
from typing import Any

import torch as th

from benchmarks.overhead import overhead
from benchmarks.study import Option, UsageError, probe, shared

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "return_gap")
VARIANTS = ("ppo", "base", "nopre", "norm", "bprefrm", "dis", "fp32", "bf16")
# The committed overhead_sb3_defaults_seed*.md command, PPO_REWARD on its defaults.
SETTINGS = [
    "--env", "walker_stand", "--n-envs", "32", "--n-steps", "500", "--total-timesteps", "176000", "--lr", "3e-4",
    "--batch-size", "256", "--n-epochs", "10", "--gae-lambda", "0.95", "--clip-init", "0.2", "--ppo-style", "sb3",
    "--num-layer", "3", "--hidden-dim", "256", "--segment", "50", "--unsuper-step", "32000",
    "--num-interaction", "16000", "--max-feed", "1000", "--re-batch", "100", "--pref-defaults",
]  # fmt: skip


def run(variant: str, seed: int) -> dict[str, Any]:
    """Train one variant on one seed; :return: CPU seconds and the two return figures"""
    args = overhead.settings([*SETTINGS, "--seed", str(seed)])
    if variant == "bprefrm":
        overhead.RewardModel = functools.partial(overhead.RewardModel, hidden_dim=256, n_layers=3, lr=3e-4)
    if variant in ("fp32", "bf16"):
        args.re_train_dtype = "float32" if variant == "fp32" else "bfloat16"  # overhead.build passes it to RewardModel
    if variant in ("norm", "dis"):
        option = {"normalize_reward": True} if variant == "norm" else {"feed_type": "disagreement"}
        overhead.PPO_REWARD = functools.partial(overhead.PPO_REWARD, **option)
    model = overhead.build("PPO" if variant == "ppo" else "PrefPPO", args)
    learn_kwargs = {} if variant == "ppo" else {"unsuper_flag": 0 if variant == "nopre" else 1}
    cpu = time.process_time()
    model.learn(total_timesteps=args.total_timesteps, **learn_kwargs)
    returns = [info["r"] for info in model.ep_info_buffer]
    result = dict(
        variant=variant,
        seed=seed,
        cpu=time.process_time() - cpu,
        ret100=statistics.mean(returns),
        ret_last32=statistics.mean(returns[-32:]),
    )
    if variant != "ppo":
        result["feed"] = model.pref_learner.total_feed
    return result


def table() -> str:
    """Per-variant rows (seeds side by side) and the gap to ``ppo`` seed by seed."""
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path) as file:
            row = json.load(file)
        results.setdefault(row["variant"], {})[row["seed"]] = row
    bar = results.get("ppo", {})
    lines = [
        "| variant | seeds | return, last 100 episodes (per seed) | mean | gap to PPO, same seeds | "
        "return, last 32 episodes (per seed) | mean | gap to PPO | CPU s (mean) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        rows = results.get(variant, {})
        if not rows:
            continue
        seeds = sorted(rows)
        cells = []
        for key in ("ret100", "ret_last32"):
            values = [rows[s][key] for s in seeds]
            paired = [rows[s][key] - bar[s][key] for s in seeds if s in bar]
            gap = f"{statistics.mean(paired):+.1f}" if paired and variant != "ppo" else "-"
            cells += [" / ".join(f"{v:.1f}" for v in values), f"{statistics.mean(values):.1f}", gap]
        cpu = statistics.mean(rows[s]["cpu"] for s in seeds)
        lines.append(f"| {variant} | {', '.join(map(str, seeds))} | {' | '.join(cells)} | {cpu:.0f} |")
    return "\n".join(lines)


@probe(
    "return-gap",
    "one variant of PPO_REWARD on one seed at the SB3-style walker_stand settings, to results/return_gap/",
    Option("--variant", "the one change from base", choices=VARIANTS),
    shared("seed"),
    Option("--table", "print the table of the results so far", action="store_true"),
)
def return_gap(args: argparse.Namespace) -> None:
    """
    Train one variant, or print the table of all runs so far.

    :param args: the options
    """
    if args.table:
        print(table())
        return
    if args.variant is None:
        raise UsageError("give --variant (or --table)")
    th.set_num_threads(1)
    result = run(args.variant, args.seed)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{args.variant}_{args.seed}.json"), "w") as file:
        json.dump(result, file, indent=1)
    print(json.dumps(result))
