"""
Algorithm Distillation end to end: learning histories -> transformer -> in-context evaluation on held-out goals.

    python examples/train_AD.py --env darkroom --output-dir runs/ad_darkroom                  # the seed's scale
    python examples/train_AD.py --env darkroom --preset small --output-dir runs/ad_small      # minutes on a CPU
    python examples/train_AD.py --env darkroom --preset noisy_room --output-dir runs/ad_noisy  # AD^epsilon, 5 x 5 room
    python examples/train_AD.py --env darkroom --preset noisy_room_20 --output-dir runs/ad_noisy20  # 20-episode context
    python examples/train_AD.py --env darkroom --preset noisy_room --with-rl2 --output-dir runs/ad_noisy  # + RL2 beside AD
    python examples/train_AD.py --env darkroom --preset a2c_room --output-dir runs/ad_a2c  # the seed's room, A2C, on a CPU

1. One source learner per training goal of DarkRoom (57 of the 80 goals of the 9 x 9 room, the seed's
   split, ``terminate_on_goal``) writes its learning history to ``histories.npz`` (resumable: rerun
   the same command and finished goals are skipped).
2. ``AD`` learns to predict the learners' actions from windows of their histories (``model.zip``).
3. With its weights frozen, AD plays trials of ``--episodes-per-trial`` episodes on the 23 held-out
   goals; ``adaptation.csv`` and ``adaptation.png`` hold its return per episode beside a random
   policy, the source learners' own first episodes of training, and the search-planner bound.
4. ``--with-rl2``: RL2 (the grid's DarkRoom preset) trains on the same training goals, in trials of the same
   room and length (``rl2_model.zip``), and plays the same held-out trials beside AD.

Every stage is resumable: finished history shards, ``model.zip`` and ``rl2_model.zip`` are read back, not redone.
"""

import argparse
import json
import os
import sys
import time
from typing import Any, Optional

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.ad import AD, Histories, collect_histories, first_success_views
from sb3_pref.ad.collect import CollectionIncomplete
from sb3_pref.ad.evaluation import learner_curve, search_curve
from sb3_pref.envs.darkroom import DarkRoom, darkroom_trials, split_goals
from sb3_pref.experiments.defaults import RL2_PRESETS
from sb3_pref.experiments.rl2_runs import make_rl2_model
from sb3_pref.rl2 import RL2
from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, plot_adaptation, write_adaptation_csv

# isort: split
# beside this script (examples/helpers/), not part of the package: the script's presets and flags
from helpers.ad_options import PRESETS, parse_options

#: exit status of a call that ran out of its ``--time-budget`` before the last stage (run the same command again)
INCOMPLETE_EXIT_CODE = 3


def parse_args() -> argparse.Namespace:
    """The command line (:func:`helpers.ad_options.parse_options`), its ``--help`` led by this script's docstring."""
    return parse_options(__doc__)


class StopAtDeadline(BaseCallback):
    """Stops ``learn`` once ``time.monotonic()`` passes ``deadline``, so a stage fits a time budget and resumes later."""

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def _on_step(self) -> bool:
        return time.monotonic() < self.deadline


def _incomplete(stage: str, detail: str) -> None:
    print(f"INCOMPLETE: {stage} ({detail}); run the same command again to continue", flush=True)
    sys.exit(INCOMPLETE_EXIT_CODE)


def learner_kwargs(args: argparse.Namespace) -> Optional[dict[str, Any]]:
    """The learner's own settings from the command line (None: its defaults)."""
    if args.learner == "noisy_expert":
        return dict(anneal_fraction=args.anneal_fraction, anneal_after_reward=args.anneal_after_reward)
    if args.learner == "a2c" and args.learner_lr is not None:
        return dict(learning_rate=args.learner_lr)
    return None


def room_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`DarkRoom` settings of a run."""
    return dict(
        size=args.size,
        episode_length=args.episode_length,
        terminate_on_goal=not args.no_terminate_on_goal,
        observation=args.observation,
    )


def held_out_trials(args: argparse.Namespace) -> VecEnv:
    """
    The trials of a run's evaluation: one env per held-out goal, seeded by ``args.seed`` (which also splits the goals).
    """
    return make_vec_env(
        darkroom_trials,
        n_envs=args.n_test,
        seed=args.seed,
        env_kwargs=dict(
            split="test",
            split_seed=args.seed,
            n_test=args.n_test,
            episodes_per_trial=args.episodes_per_trial,
            **room_kwargs(args),
        ),
    )


def train_ad(args: argparse.Namespace, histories: Any, deadline: float) -> AD:
    """Train AD, or continue the saved ``model.zip`` (weights, optimizer, sampler and update count)."""
    path = os.path.join(args.output_dir, "model.zip")
    if os.path.exists(path):
        model = AD.load(path, device=args.device, histories=histories, verbose=args.verbose)
    else:
        model_kwargs = {name: getattr(args, name) for name in PRESETS["seed"] if name not in ("learner", "steps")}
        model_kwargs.update(
            recency_bias=args.recency_bias,
            residual_dropout=args.residual_dropout,
            token_layout=args.token_layout,
            min_learning_rate=args.min_learning_rate,
            pad_short_histories=args.episode_stride > 1 or args.first_success_views > 0,
            burn_in=args.burn_in,
            first_window_fraction=args.first_window_fraction,
        )
        model = AD(histories, device=args.device, seed=args.seed, verbose=args.verbose, **model_kwargs)
    remaining = args.n_updates - model.num_timesteps
    if remaining > 0:
        model.learn(
            remaining, callback=StopAtDeadline(deadline), log_interval=max(args.n_updates // 20, 1), reset_num_timesteps=False
        )
        model.save(path)
    if model.num_timesteps < args.n_updates:
        _incomplete("AD training", f"{model.num_timesteps} of {args.n_updates} updates")
    return model


def train_rl2(args: argparse.Namespace, room: dict[str, Any], deadline: float) -> Any:
    """RL2 with the grid's DarkRoom preset on the training goals, in trials of the AD evaluation's room and length."""
    settings = dict(RL2_PRESETS["darkroom"], cell=args.rl2_cell or "gru", gamma=0.99, gae_lambda=0.95)
    steps = args.rl2_steps or settings["total_timesteps"]
    env = make_vec_env(
        darkroom_trials,
        n_envs=settings["n_envs"],
        seed=args.seed,
        env_kwargs=dict(
            split="train", split_seed=args.seed, n_test=args.n_test, episodes_per_trial=args.episodes_per_trial, **room
        ),
    )
    path = os.path.join(args.output_dir, "rl2_model.zip")
    model = RL2.load(path, env=env, device="cpu") if os.path.exists(path) else make_rl2_model(settings, env, args.seed)
    remaining = steps - model.num_timesteps
    if remaining > 0:
        model.learn(remaining, callback=StopAtDeadline(deadline), reset_num_timesteps=False)
        model.save(path)
    if model.num_timesteps < steps:
        _incomplete("RL2 training", f"{model.num_timesteps} of {steps} steps")
    return model


def main() -> None:
    args = parse_args()
    deadline = time.monotonic() + args.time_budget if args.time_budget is not None else float("inf")
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "args.json"), "w") as handle:
        json.dump(vars(args), handle, indent=1)
    room = room_kwargs(args)
    train_goals, test_goals = split_goals(args.seed, size=args.size, n_test=args.n_test)
    timings_path = os.path.join(args.output_dir, "timings.json")
    timings: dict[str, float] = {}
    if os.path.exists(timings_path):  # a resumed run adds this call's seconds to each stage's total
        with open(timings_path) as handle:
            timings = json.load(handle)

    def timed(stage: str, since: float, resumed: bool = True) -> None:
        # a resumable stage adds this call's seconds; the evaluation is redone whole on every call, so it replaces them
        timings[stage] = (timings.get(stage, 0.0) if resumed else 0.0) + time.perf_counter() - since
        with open(timings_path, "w") as handle:
            json.dump(timings, handle, indent=1)

    start = time.perf_counter()
    try:
        histories = collect_histories(
            train_goals,
            os.path.join(args.output_dir, "histories.npz"),
            learner=args.learner,
            steps=args.steps,
            learners_per_goal=args.learners_per_goal,
            seed=args.seed,
            max_steps=args.max_history_steps,
            env_kwargs=room,
            learner_kwargs=learner_kwargs(args),
            verbose=args.verbose,
            workers=args.workers,
            deadline=deadline,
        )
    except CollectionIncomplete as error:
        timed("histories_s", start)
        _incomplete("histories", str(error))
    timed("histories_s", start)

    # the model sees every k-th episode; the control the same transitions without the trend; the source curve
    # below stays the full, ordered one
    stride = args.episode_stride
    data = Histories.concatenate([histories.subsampled(stride, s) for s in range(stride)]) if stride > 1 else histories
    if args.first_success_views:
        data = first_success_views(
            histories, args.first_success_views, args.tail_episodes, args.tail_window, np.random.default_rng(args.seed)
        )
    data = data.shuffled(np.random.default_rng(args.seed)) if args.shuffled else data
    start = time.perf_counter()
    try:  # a stage that runs out of budget exits here: its seconds still count
        model = train_ad(args, data, deadline)
    finally:
        timed("model_s", start)
    if args.with_rl2:
        start = time.perf_counter()
        try:
            rl2 = train_rl2(args, room, deadline)
        finally:
            timed("rl2_s", start)

    start = time.perf_counter()
    n_trials = args.eval_trials or 4 * len(test_goals)
    test_env = held_out_trials(args)
    optimal = [DarkRoom(**room).optimal_return(tuple(int(v) for v in goal)) for goal in histories.tasks]
    ad_name = "AD, shuffled histories" if args.shuffled else "AD"
    results = {ad_name: evaluate_adaptation(model, test_env, n_trials, seed=args.seed)}
    if args.with_rl2:  # the same held-out trials: the same env, the same seed
        results["RL2"] = evaluate_adaptation(rl2, test_env, n_trials, seed=args.seed)
    results.update(
        {
            "random": evaluate_adaptation(
                RandomAgent(test_env.action_space, seed=args.seed), test_env, n_trials, seed=args.seed
            ),
            "source learners (own training)": learner_curve(histories, args.episodes_per_trial, optimal),
            "search bound": search_curve(
                test_goals, args.episodes_per_trial, args.size, args.episode_length, not args.no_terminate_on_goal
            ),
        }
    )
    timed("evaluation_s", start, resumed=False)
    write_adaptation_csv(os.path.join(args.output_dir, "adaptation.csv"), results)
    title = "AD and RL2 on DarkRoom (held-out goals)" if args.with_rl2 else "AD on DarkRoom (held-out goals)"
    plot_adaptation(
        results,
        os.path.join(args.output_dir, "adaptation.png"),
        optimal=float(np.nanmean(results[ad_name].optimal)),
        title=title,
    )
    summary = dict(
        n_histories=histories.n_histories,
        history_length=histories.length,
        trained_history_length=data.length,
        **timings,
        curves={name: result.summary()["mean"].round(3).tolist() for name, result in results.items()},
    )
    with open(os.path.join(args.output_dir, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)

    stages = ", ".join(f"{name} {seconds:.0f}" for name, seconds in timings.items())
    print(f"{histories.n_histories} histories x {histories.length} steps; {stages}")
    print(f"held-out goals, {n_trials} trials: mean return per episode in trial")
    for name, result in results.items():
        print(f"{name:>32}: " + " ".join(f"{m:5.2f}" for m in result.summary()["mean"]))
    print(f"{'optimal':>32}: {np.nanmean(results[ad_name].optimal):5.2f}")
    print(f"DONE: histories.npz, model.zip, adaptation.csv, adaptation.png and summary.json in {args.output_dir}")


if __name__ == "__main__":
    main()
