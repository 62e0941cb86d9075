"""
Algorithm Distillation end to end: learning histories -> transformer -> in-context evaluation on held-out goals.

    python examples/train_AD.py --env darkroom --output-dir runs/ad_darkroom                  # the seed's scale
    python examples/train_AD.py --env darkroom --preset small --output-dir runs/ad_small      # minutes on a CPU
    python examples/train_AD.py --env darkroom --preset noisy_room --output-dir runs/ad_noisy  # AD^epsilon, 5 x 5 room

1. One source learner per training goal of DarkRoom (57 of the 80 goals of the 9 x 9 room, the seed's
   split, ``terminate_on_goal``) writes its learning history to ``histories.npz`` (resumable: rerun
   the same command and finished goals are skipped).
2. ``AD`` learns to predict the learners' actions from windows of their histories (``model.zip``).
3. With its weights frozen, AD plays trials of ``--episodes-per-trial`` episodes on the 23 held-out
   goals; ``adaptation.csv`` and ``adaptation.png`` hold its return per episode beside a random
   policy, the source learners' own first episodes of training, and the search-planner bound.
"""

import argparse
import json
import os
import time
from typing import Any

import numpy as np
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref.ad import AD, collect_histories
from sb3_pref.ad.evaluation import learner_curve, search_curve
from sb3_pref.ad.presets import NOISY_ROOM
from sb3_pref.envs.darkroom import AD_TEST_GOALS, DarkRoom, darkroom_trials, split_goals
from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, plot_adaptation, write_adaptation_csv

#: ``seed``: the paper's settings; ``small``: a cheap learner and a small model, for a CPU in minutes;
#: ``noisy_room``: :data:`sb3_pref.ad.presets.NOISY_ROOM` (AD^epsilon on a 5 x 5 room, in-context learning in minutes)
PRESETS: dict[str, dict[str, Any]] = {
    "seed": dict(learner="a2c", steps=2_500_000, max_history_steps=800_000, seq_len=256, embed_dim=64, n_layers=4,
                 n_heads=4, ff_dim=2048, attention_dropout=0.5, n_updates=22_000, batch_size=32, learning_rate=3e-4),
    "small": dict(learner="qlearning", steps=3_000, max_history_steps=3_000, seq_len=80, embed_dim=32, n_layers=2,
                  n_heads=2, ff_dim=128, attention_dropout=0.0, n_updates=1_500, batch_size=16, learning_rate=1e-3),
    "noisy_room": dict(
        learner=NOISY_ROOM["learner"], steps=NOISY_ROOM["episodes"] * NOISY_ROOM["room"]["episode_length"],
        max_history_steps=NOISY_ROOM["episodes"] * NOISY_ROOM["room"]["episode_length"],
        **{k: v for k, v in NOISY_ROOM["model"].items() if k in (
            "seq_len", "embed_dim", "n_layers", "n_heads", "ff_dim", "attention_dropout", "n_updates", "batch_size",
            "learning_rate")},
    ),
}
#: settings of the room, the split and the evaluation that a preset changes (the others keep the seed's)
ROOM_PRESETS: dict[str, dict[str, Any]] = {
    "noisy_room": dict(
        size=NOISY_ROOM["room"]["size"], episode_length=NOISY_ROOM["room"]["episode_length"], n_test=NOISY_ROOM["n_test"],
        no_terminate_on_goal=not NOISY_ROOM["room"]["terminate_on_goal"], learners_per_goal=NOISY_ROOM["learners_per_goal"],
        episodes_per_trial=NOISY_ROOM["episodes"], recency_bias=NOISY_ROOM["model"]["recency_bias"],
        residual_dropout=NOISY_ROOM["model"]["residual_dropout"], min_learning_rate=NOISY_ROOM["model"]["min_learning_rate"],
        anneal_fraction=NOISY_ROOM["learner_kwargs"]["anneal_fraction"],
    ),
}
ROOM_DEFAULTS: dict[str, Any] = dict(
    size=9, episode_length=20, n_test=AD_TEST_GOALS, no_terminate_on_goal=False, learners_per_goal=1, episodes_per_trial=20,
    recency_bias=False, residual_dropout=0.1, anneal_fraction=0.5, min_learning_rate=2e-6,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", choices=["darkroom"], required=True)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="seed")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--size", type=int, default=None, help="default: 9")
    parser.add_argument("--episode-length", type=int, default=None, help="default: 20")
    parser.add_argument("--n-test", type=int, default=None, help="held-out goals (the seed: 23 of 80)")
    parser.add_argument("--no-terminate-on-goal", action="store_true", default=None,
                        help="reward on every step on the goal instead")
    parser.add_argument("--observation", choices=["xy", "onehot"], default="xy")
    parser.add_argument("--learners-per-goal", type=int, default=None, help="default: 1")
    parser.add_argument("--episodes-per-trial", type=int, default=None, help="default: 20")
    parser.add_argument("--recency-bias", action="store_true", default=None, help="ALiBi in attention (not the seed's)")
    parser.add_argument("--residual-dropout", type=float, default=None, help="default: 0.1")
    parser.add_argument("--min-learning-rate", type=float, default=None, help="end of the cosine decay (default: 2e-6)")
    parser.add_argument("--anneal-fraction", type=float, default=None, help="noisy expert: share of steps to epsilon 0")
    parser.add_argument("--eval-trials", type=int, default=None, help="default: 4 per held-out goal")
    parser.add_argument("--verbose", type=int, default=1)
    for name, value in PRESETS["seed"].items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=None, help="default: the preset's")
    args = parser.parse_args()
    for name, value in {**ROOM_DEFAULTS, **ROOM_PRESETS.get(args.preset, {}), **PRESETS[args.preset]}.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main() -> None:
    args = parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "args.json"), "w") as handle:
        json.dump(vars(args), handle, indent=1)
    room = dict(size=args.size, episode_length=args.episode_length, terminate_on_goal=not args.no_terminate_on_goal,
                observation=args.observation)
    train_goals, test_goals = split_goals(args.seed, size=args.size, n_test=args.n_test)
    timings = {}

    start = time.perf_counter()
    histories = collect_histories(
        train_goals, os.path.join(args.output_dir, "histories.npz"), learner=args.learner, steps=args.steps,
        learners_per_goal=args.learners_per_goal, seed=args.seed, max_steps=args.max_history_steps, env_kwargs=room,
        learner_kwargs=dict(anneal_fraction=args.anneal_fraction) if args.learner == "noisy_expert" else None,
        verbose=args.verbose,
    )
    timings["histories_s"] = time.perf_counter() - start

    start = time.perf_counter()
    model_kwargs = {name: getattr(args, name) for name in PRESETS["seed"] if name not in ("learner", "steps")}
    model_kwargs.update(recency_bias=args.recency_bias, residual_dropout=args.residual_dropout,
                        min_learning_rate=args.min_learning_rate)
    model = AD(histories, device=args.device, seed=args.seed, verbose=args.verbose, **model_kwargs)
    model.learn(log_interval=max(args.n_updates // 20, 1))
    model.save(os.path.join(args.output_dir, "model"))
    timings["model_s"] = time.perf_counter() - start

    start = time.perf_counter()
    n_trials = args.eval_trials or 4 * len(test_goals)
    test_env = make_vec_env(
        darkroom_trials, n_envs=len(test_goals), seed=args.seed,
        env_kwargs=dict(split="test", split_seed=args.seed, n_test=args.n_test, episodes_per_trial=args.episodes_per_trial,
                        **room),
    )
    optimal = [DarkRoom(**room).optimal_return(tuple(int(v) for v in goal)) for goal in histories.tasks]
    results = {
        "AD": evaluate_adaptation(model, test_env, n_trials, seed=args.seed),
        "random": evaluate_adaptation(RandomAgent(test_env.action_space, seed=args.seed), test_env, n_trials, seed=args.seed),
        "source learners (own training)": learner_curve(histories, args.episodes_per_trial, optimal),
        "search bound": search_curve(test_goals, args.episodes_per_trial, args.size, args.episode_length,
                                     not args.no_terminate_on_goal),
    }
    timings["evaluation_s"] = time.perf_counter() - start
    write_adaptation_csv(os.path.join(args.output_dir, "adaptation.csv"), results)
    plot_adaptation(results, os.path.join(args.output_dir, "adaptation.png"),
                    optimal=float(np.nanmean(results["AD"].optimal)), title="AD on DarkRoom (held-out goals)")
    summary = dict(n_histories=histories.n_histories, history_length=histories.length, **timings,
                   curves={name: result.summary()["mean"].round(3).tolist() for name, result in results.items()})
    with open(os.path.join(args.output_dir, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)

    stages = ", ".join(f"{name} {seconds:.0f}" for name, seconds in timings.items())
    print(f"{histories.n_histories} histories x {histories.length} steps; {stages}")
    print(f"held-out goals, {n_trials} trials: mean return per episode in trial")
    for name, result in results.items():
        print(f"{name:>32}: " + " ".join(f"{m:5.2f}" for m in result.summary()["mean"]))
    print(f"{'optimal':>32}: {np.nanmean(results['AD'].optimal):5.2f}")
    print(f"saved histories.npz, model.zip, adaptation.csv, adaptation.png and summary.json in {args.output_dir}")


if __name__ == "__main__":
    main()
