"""
Wall-clock and CPU cost of ``PPO_REWARD`` against ``PPO``, with the default (``"auto"``) and
B-Pref's (``"bpref"``) reward-model schedule, run side by side: one process per variant, each
pinned to a core (round-robin when there are more variants than cores), same env, seed and PPO
settings. Reward-model quality comes with it: agreement with an oracle on fresh pairs after each
round (``reward/true_pref_accuracy``) and the correlation of predicted with true rewards over each
rollout (``reward/pred_true_corr``), and the true return at the end.

The settings and the per-phase timers are those of ``overhead.py`` (its flags are accepted here);
this script adds the variants and the quality columns::

    python -m benchmarks overhead side-by-side --env walker_stand --n-envs 8 --batch-size 256 \\
        --total-timesteps 112000 --output benchmarks/side_by_side_sb3.md

CPU time is the fairer figure on a shared machine: wall clock counts the time a process waited
for a core, CPU time does not.
"""

import argparse
import copy
import datetime
import multiprocessing
import os
import platform
import statistics
import time
from typing import Any

import numpy as np
import torch as th

from benchmarks import machine
from benchmarks.overhead import overhead  # the sibling probe: settings, builder and phase timers
from benchmarks.study import Option, UsageError, probe
from sb3_pref.common.onpolicy import PreferenceRewardMixin

VARIANTS = {"PPO": None, "PPO_REWARD auto": "auto", "PPO_REWARD bpref": "bpref"}


def run_variant(job: tuple[str, argparse.Namespace, int]) -> dict[str, Any]:
    """One variant in its own process, pinned to ``core``: timings, round statistics, quality."""
    name, args, core = job
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    th.set_num_threads(1)
    overhead.instrument_library()
    correlations: list[float] = []
    finish = PreferenceRewardMixin._finish_rollout

    def finish_and_read(self: PreferenceRewardMixin, *a: Any, **k: Any) -> None:
        finish(self, *a, **k)
        # Read before SB3's logger dumps (and clears) it at the end of the iteration.
        if "reward/pred_true_corr" in self.logger.name_to_value:
            correlations.append(float(self.logger.name_to_value.pop("reward/pred_true_corr")))

    PreferenceRewardMixin._finish_rollout = finish_and_read
    schedule = VARIANTS[name]
    args = copy.copy(args)
    args.reward_schedule = schedule or "auto"
    model = overhead.build("PPO" if schedule is None else "PrefPPO", args)
    overhead.TIMER.reset()
    overhead.ROUND_STATS.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=args.total_timesteps, **({} if schedule is None else {"unsuper_flag": 1}))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    returns = [info["r"] for info in model.ep_info_buffer]
    result: dict[str, Any] = {
        "name": name,
        "wall": wall,
        "cpu": cpu,
        "steps": model.num_timesteps,
        "return": float(np.mean(returns)) if returns else float("nan"),
        "reward_train": overhead.TIMER.seconds.get("reward_train", 0.0),
        "query_round": overhead.TIMER.seconds.get("query_round", 0.0),
        "select": overhead.TIMER.seconds.get("select", 0.0),
        "agreement": overhead.TIMER.seconds.get("agreement", 0.0),
        "entropy": overhead.TIMER.seconds.get("entropy", 0.0),
        "predict": overhead.TIMER.seconds.get("predict", 0.0),
        "rounds": list(overhead.ROUND_STATS),
        "corr": correlations,
    }
    model.get_env().close()
    return result


def markdown(args: argparse.Namespace, results: dict[str, dict[str, Any]], context: dict[str, str]) -> str:
    ppo = results["PPO"]
    lines = [
        "# PPO_REWARD against PPO, side by side: default (`auto`) and B-Pref's (`bpref`) reward-model schedule",
        "",
        f"Measured {context['date']} with `benchmarks/overhead/side_by_side.py` (SB3 settings and timers of `overhead.py`; "
        f"torch {th.__version__}, Python {platform.python_version()}), CPU: {context['cpu']}, {context['cpus']} cores, "
        f"one process per variant pinned round-robin to the cores, 1 torch thread each; load average "
        f"{context['load_before']} before / {context['load_after']} after: **the machine was shared with other jobs**, "
        "so CPU time is the figure to compare (wall clock includes waiting for a core).",
        "",
        f"Settings: {args.env}, {args.n_envs} envs x {args.n_steps} steps, {args.total_timesteps} steps, seed {args.seed}; "
        f"PPO lr {args.lr}, batch {args.batch_size}, {args.n_epochs} epochs, {args.num_layer}x{args.hidden_dim} nets, gSDE, "
        f"VecNormalize(obs). PPO_REWARD: oracle teacher, disagreement queries, segments of {args.segment}, "
        f"{args.unsuper_step} steps of entropy pretraining ({args.unsuper_n_epochs} epochs per update), {args.re_batch} "
        f"queries every {args.num_interaction} steps up to {args.max_feed}, re_update {args.re_update}, "
        f"reward model 3x256 x 3 members in {args.re_train_dtype}.",
        "",
        "| variant | wall (s) | CPU (s) | wall ratio | CPU ratio | reward-model training (s) | rest of the rounds (s) "
        "| rounds | labels | gradient steps | true_pref_accuracy (last round) | pred_true_corr (mean of last 3) "
        "| true return (last 100 episodes) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, res in results.items():
        rounds = res["rounds"]
        labels = f"{rounds[-1]['labels']:.0f}" if rounds else "-"
        steps = f"{sum(r.get('model_train_steps', 0) for r in rounds):.0f}" if rounds else "-"
        accuracy = f"{rounds[-1].get('true_pref_accuracy', float('nan')):.3f}" if rounds else "-"
        corr = f"{statistics.mean(res['corr'][-3:]):.3f}" if res["corr"] else "-"
        lines.append(
            f"| {name} | {res['wall']:.1f} | {res['cpu']:.1f} | {res['wall'] / ppo['wall']:.3f} | "
            f"{res['cpu'] / ppo['cpu']:.3f} | {res['reward_train']:.1f} | {res['query_round'] - res['reward_train']:.1f} | "
            f"{len(rounds) or '-'} | {labels} | {steps} | {accuracy} | {corr} | {res['return']:.1f} |"
        )
    lines += ["", "Per round (labels so far: gradient steps, training accuracy, agreement with an oracle on fresh pairs):", ""]
    for name, res in results.items():
        if res["rounds"]:
            cells = [
                f"{r['labels']:.0f}: {r.get('model_train_steps', 0):.0f} steps, "
                f"{r.get('model_train_accuracy', float('nan')):.2f}, "
                f"**{r.get('true_pref_accuracy', float('nan')):.3f}**"
                for r in res["rounds"]
            ]
            lines.append(f"- {name}: " + "; ".join(cells))
    lines += [
        "",
        "Other preference costs (s): "
        + "; ".join(
            f"{name}: selection {res['select']:.1f}, oracle metric {res['agreement']:.1f}, k-NN {res['entropy']:.1f}, "
            f"prediction {res['predict']:.1f}"
            for name, res in results.items()
            if res["rounds"]
        ),
    ]
    return "\n".join(lines) + "\n"


@probe(
    "side-by-side",
    "PPO_REWARD's two reward-model schedules against PPO, one process per variant, with reward quality",
    Option("--variants", "comma-separated, from " + ", ".join(VARIANTS), default=",".join(VARIANTS)),
    *overhead.OPTIONS,
)
def side_by_side(args: argparse.Namespace) -> None:
    """
    The variants run at once, each pinned to a core; the table goes to ``--output`` (``side_by_side.md`` beside
    ``overhead.md`` unless given).

    :param args: the options (``overhead``'s and ``--variants``)
    """
    variants = args.variants.split(",")
    if "PPO" not in variants or not set(variants) <= set(VARIANTS):
        raise UsageError(f"--variants must include PPO and name only {list(VARIANTS)}")
    overhead.check(args)
    if args.output.endswith("overhead.md"):
        args.output = os.path.join(os.path.dirname(args.output), "side_by_side.md")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cpu_name = machine.cpu_name()
    context = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_name,
        "cpus": str(len(cores)),
        "load_before": f"{os.getloadavg()[0]:.1f}",
    }
    jobs = [(name, args, cores[i % len(cores)]) for i, name in enumerate(variants)]
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        results = {res["name"]: res for res in pool.map(run_variant, jobs)}
    context["load_after"] = f"{os.getloadavg()[0]:.1f}"
    report = markdown(args, results, context)
    print(report)
    with open(args.output, "w") as file:
        file.write(report)
