"""
The ``overhead`` probe's report (``overhead.py`` times the runs): the Markdown of its results, the phase breakdown,
the query rounds, and the projection of the measured costs onto a full B-Pref walker_walk run.
"""

import argparse
import platform
import statistics
from typing import Any

import stable_baselines3
import torch as th

import sb3_pref
from sb3_pref.core.reward_training import resolve_train_dtype


def reward_model_dtype(requested: str) -> str:
    """What ``train_dtype=requested`` resolves to on this machine's CPU (``auto`` names its choice)."""
    chosen = resolve_train_dtype(requested, th.device("cpu"))
    return f"auto, which picks {chosen} on this CPU" if requested == "auto" else chosen


def settings_line(args: argparse.Namespace, pref: dict[str, Any]) -> str:
    """The settings of the run, in words, as the report's first paragraph."""
    ppo = (
        f"clip {args.clip_init} constant, no gSDE (SB3's PPO)"
        if args.ppo_style == "sb3"
        else f"clip {args.clip_init} annealed, gSDE (B-Pref's PPO)"
    )
    rounds = f"{pref['rounds']} rounds, {pref['total_feed']} labels"
    if args.pref_defaults:
        reward = (
            f"PPO_REWARD with its defaults (RewardModel(obs_space, act_space, size_segment={args.segment}, "
            f"mb_size={args.re_batch}), teacher='oracle'): {args.unsuper_step} steps of pretraining, {args.re_batch} "
            f"queries every {args.num_interaction} steps up to {args.max_feed} ({rounds}); reward-model training in "
            f"{reward_model_dtype(args.re_train_dtype or 'auto')}."
        )
    else:
        reward = (
            f"PPO_REWARD: oracle teacher, disagreement queries, segments of {args.segment}, {args.unsuper_step} steps "
            f"of pretraining ({args.unsuper_n_epochs} epochs per update), {args.re_batch} queries every "
            f"{args.num_interaction} steps up to {args.max_feed} ({rounds}), reward model 3x{args.re_hidden_dim}, at "
            f"most {args.re_update} epochs per round ({args.reward_schedule} schedule), training in "
            f"{args.re_train_dtype or 'float32'}."
        )
    return (
        f"Settings: {args.env}, {args.n_envs} envs x {args.n_steps} steps, {args.total_timesteps} steps, seed "
        f"{args.seed}; PPO lr {args.lr}, batch {args.batch_size}, {args.n_epochs} epochs, gae {args.gae_lambda}, {ppo}, "
        f"net {args.num_layer}x{args.hidden_dim} pi/vf, VecNormalize(obs). {reward}"
    )


def markdown(args: argparse.Namespace, runs: list[dict[str, dict[str, Any]]], context: dict[str, str]) -> str:
    """The results as Markdown: settings, one row per repeat, the median, and the phase breakdown."""
    ratios = [run["PrefPPO"]["wall"] / run["PPO"]["wall"] for run in runs]
    cpu_ratios = [run["PrefPPO"]["cpu"] / run["PPO"]["cpu"] for run in runs]
    pref = runs[0]["PrefPPO"]
    lines = [
        "# Overhead of PPO_REWARD over PPO",
        "",
        f"Measured {context['date']} with `benchmarks/overhead/overhead.py` (sb3_pref {sb3_pref.__version__}, "
        f"SB3 {stable_baselines3.__version__}, torch {th.__version__}, Python {platform.python_version()}, "
        f"{context['cpus']} CPUs, torch threads {context['threads']}, load average {context['load_before']} before / "
        f"{context['load_after']} after; the machine was shared).",
        "",
        settings_line(args, pref),
        "",
        "| repeat | order | PPO wall (s) | PPO_REWARD wall (s) | ratio | PPO CPU (s) | PPO_REWARD CPU (s) | CPU ratio "
        "| PPO return | PPO_REWARD return |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, run in enumerate(runs):
        ppo, prefppo = run["PPO"], run["PrefPPO"]
        lines.append(
            f"| {index + 1} | {run['order']} | {ppo['wall']:.1f} | {prefppo['wall']:.1f} | {ratios[index]:.3f} | "
            f"{ppo['cpu']:.1f} | {prefppo['cpu']:.1f} | {cpu_ratios[index]:.3f} | {ppo['return']:.1f} | "
            f"{prefppo['return']:.1f} |"
        )
    lines += [
        f"| **median** | | {statistics.median(r['PPO']['wall'] for r in runs):.1f} | "
        f"{statistics.median(r['PrefPPO']['wall'] for r in runs):.1f} | **{statistics.median(ratios):.3f}** | "
        f"{statistics.median(r['PPO']['cpu'] for r in runs):.1f} | "
        f"{statistics.median(r['PrefPPO']['cpu'] for r in runs):.1f} | "
        f"**{statistics.median(cpu_ratios):.3f}** | {statistics.median(r['PPO']['return'] for r in runs):.1f} | "
        f"{statistics.median(r['PrefPPO']['return'] for r in runs):.1f} |",
        "",
        f"Target: ratio <= {args.target}. Median wall-clock ratio {statistics.median(ratios):.3f}, "
        f"median CPU-time ratio {statistics.median(cpu_ratios):.3f} (less sensitive to other processes).",
        "",
        "## Where the time goes (median over repeats, seconds of wall clock)",
        "",
        "| phase | PPO | PPO_REWARD | share of PPO_REWARD |",
        "|---|---|---|---|",
    ]
    for label in pref["phases"]:  # overhead.PHASES's order
        ppo_seconds = statistics.median(run["PPO"]["phases"][label] for run in runs)
        pref_seconds = statistics.median(run["PrefPPO"]["phases"][label] for run in runs)
        pref_wall = statistics.median(run["PrefPPO"]["wall"] for run in runs)
        lines.append(f"| {label} | {ppo_seconds:.2f} | {pref_seconds:.2f} | {100 * pref_seconds / pref_wall:.1f}% |")
    lines += ["", *round_table(runs), "", *amortisation(args, runs)]
    return "\n".join(lines) + "\n"


def round_table(runs: list[dict[str, dict[str, Any]]]) -> list[str]:
    """The query rounds of the first PPO_REWARD run, and how fast the reward model trained."""
    pref = runs[0]["PrefPPO"]
    lines = [
        "## Query rounds (first repeat)",
        "",
        "| round | labels trained on | reward-model epochs | training accuracy | agreement with an oracle on fresh pairs |",
        "|---|---|---|---|---|",
    ]
    pair_epochs = 0.0
    for index, stats in enumerate(pref["round_stats"]):
        epochs = stats.get("model_train_epochs", float("nan"))
        pair_epochs += stats["labels"] * epochs
        lines.append(
            f"| {index + 1} | {stats['labels']:.0f} | {epochs:.0f} | {stats.get('model_train_accuracy', float('nan')):.3f} | "
            f"{stats.get('true_pref_accuracy', float('nan')):.3f} |"
        )
    training = pref["phases"]["    of which reward-model training"]
    if pair_epochs > 0 and training > 0:
        lines += [
            "",
            f"Reward-model training ran {pair_epochs:.0f} pair-epochs in {training:.1f} s: "
            f"{1e3 * training / pair_epochs:.2f} ms per labelled pair per epoch, about "
            f"{pair_epochs * pref['flop_per_pair_epoch'] / training / 1e9:.0f} GFLOP/s on one thread "
            "counting the forward and backward passes of every member over both segments of a pair.",
        ]
    return lines


# B-Pref's full walker_walk run with the 1000-label budget, for the projection.
BPREF_WALKER = dict(total_timesteps=4_000_000, rollout=32 * 500, unsuper_step=32000, re_batch=100, max_feed=1000)


def knn_work(unsuper_step: int, rollout: int) -> float:
    """Query-to-stored distance count of the pretraining k-NN reward (buffer of ``max(unsuper_step, rollout)``)."""
    capacity, stored, work = max(unsuper_step, rollout), 0, 0.0
    for _ in range(-(-unsuper_step // rollout)):  # pretraining lasts whole rollouts
        stored = min(stored + rollout, capacity)
        work += rollout * stored
    return work


def label_work(rounds: int, re_batch: int, max_feed: int) -> int:
    """Labelled pairs summed over rounds: each round trains on every label so far."""
    return sum(min(k * re_batch, max_feed) for k in range(1, rounds + 1))


def amortisation(args: argparse.Namespace, runs: list[dict[str, dict[str, Any]]]) -> list[str]:
    """Split the extra time into a per-step part and one-off parts, and project them onto a full B-Pref run."""

    def median_phase(algo: str, label: str) -> float:
        return statistics.median(run[algo]["phases"][label] for run in runs)

    steps = runs[0]["PrefPPO"]["steps"]
    rounds = max(runs[0]["PrefPPO"]["rounds"], 1)
    rollout = args.n_envs * args.n_steps
    per_step_labels = (
        "rollout: recording transitions",
        "relabel: reward prediction",
        "relabel: rewrite buffer + advantages",
        "other preference bookkeeping",
    )
    per_step = sum(median_phase("PrefPPO", label) for label in per_step_labels) / steps
    ppo_per_step = statistics.median(run["PPO"]["wall"] for run in runs) / steps
    rounds_total = median_phase("PrefPPO", "reward model: query rounds")
    training = median_phase("PrefPPO", "    of which reward-model training")
    knn = median_phase("PrefPPO", "pretraining: k-NN entropy reward")

    # Projection: per-step costs scale with steps, reward-model training with labels x rounds,
    # the rest of a round (selection, teacher, metric) per round, the k-NN reward with its distance count.
    full = BPREF_WALKER
    full_rounds = full["max_feed"] // full["re_batch"]
    training_full = (
        training
        * label_work(full_rounds, full["re_batch"], full["max_feed"])
        / max(label_work(rounds, args.re_batch, args.max_feed), 1)
    )
    round_rest_full = (rounds_total - training) / rounds * full_rounds
    knn_full = knn * knn_work(full["unsuper_step"], full["rollout"]) / knn_work(args.unsuper_step, rollout)
    ppo_full = ppo_per_step * full["total_timesteps"]
    pretrain_update = median_phase("PrefPPO", "PPO update while pretraining")
    # 40 extra epochs on the pretraining steps, as a share of PPO's time (its update share times 4).
    update_share = median_phase("PPO", "PPO update") / statistics.median(run["PPO"]["wall"] for run in runs)
    extra_epochs = 4 * update_share * full["unsuper_step"] / full["total_timesteps"]
    extra_full = per_step * full["total_timesteps"] + training_full + round_rest_full + knn_full
    return [
        "## Amortisation and projection",
        "",
        f"- Per-step cost of the preference machinery (recording, prediction, relabelling, bookkeeping): "
        f"{1e6 * per_step:.1f} us per env step, {100 * per_step / ppo_per_step:.1f}% of PPO's "
        f"{1e6 * ppo_per_step:.0f} us per step. This part does not shrink with longer runs.",
        f"- Query rounds: {rounds_total / rounds:.1f} s per round on average ({rounds} rounds, up to "
        f"{runs[0]['PrefPPO']['total_feed']} labels), {100 * training / max(rounds_total, 1e-9):.0f}% of it "
        "reward-model training. A fixed cost: B-Pref asks its whole budget within the first ~200k of 4M steps.",
        f"- Pretraining: k-NN entropy reward {knn:.2f} s, PPO update {pretrain_update:.1f} s "
        f"({args.unsuper_n_epochs} epochs) for {args.unsuper_step} steps.",
        f"- Projection onto a full B-Pref walker_walk run (4M steps, 32 envs, 32000 pretraining steps, 10 rounds of "
        f"100 up to 1000 labels), with this benchmark's PPO cost per step (B-Pref's batch 64 and 20 epochs cost "
        f"more, which lowers the ratio): per-step {per_step * full['total_timesteps'] / 3600:.2f} h, reward-model "
        f"training {training_full / 60:.1f} min (assuming as many epochs per round as here), rest of the rounds "
        f"{round_rest_full / 60:.1f} min, k-NN {knn_full / 60:.1f} min, against PPO {ppo_full / 3600:.1f} h: "
        f"**projected ratio {1 + extra_full / ppo_full:.3f}** (B-Pref's 50 pretraining epochs instead of 10 "
        f"would add about {100 * extra_epochs:.1f}%).",
    ]
