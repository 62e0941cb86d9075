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
from sb3_pref.ad.presets import NOISY_ROOM, NOISY_ROOM_20
from sb3_pref.envs.darkroom import AD_TEST_GOALS, DarkRoom, darkroom_trials, split_goals
from sb3_pref.experiments.defaults import RL2_PRESETS
from sb3_pref.experiments.rl2_runs import make_rl2_model
from sb3_pref.rl2 import RL2
from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, plot_adaptation, write_adaptation_csv


def _model_preset(preset: dict[str, Any]) -> dict[str, Any]:
    """The learner and model settings of a library preset (:mod:`sb3_pref.ad.presets`) as this script's options."""
    steps = preset["episodes"] * preset["room"]["episode_length"]
    names = (
        "seq_len",
        "embed_dim",
        "n_layers",
        "n_heads",
        "ff_dim",
        "attention_dropout",
        "n_updates",
        "batch_size",
        "learning_rate",
    )
    return dict(
        learner=preset["learner"],
        steps=steps,
        max_history_steps=steps,
        **{k: v for k, v in preset["model"].items() if k in names},
    )


def _room_preset(preset: dict[str, Any]) -> dict[str, Any]:
    """The room, split, evaluation and the remaining model settings of a library preset as this script's options."""
    room, model = preset["room"], preset["model"]
    return dict(
        size=room["size"],
        episode_length=room["episode_length"],
        n_test=preset["n_test"],
        no_terminate_on_goal=not room["terminate_on_goal"],
        learners_per_goal=preset["learners_per_goal"],
        episodes_per_trial=preset["episodes"],
        recency_bias=model["recency_bias"],
        residual_dropout=model["residual_dropout"],
        min_learning_rate=model["min_learning_rate"],
        anneal_fraction=preset["learner_kwargs"]["anneal_fraction"],
        anneal_after_reward=preset["learner_kwargs"].get("anneal_after_reward", False),
    )


#: ``seed``: the paper's settings; ``small``: a cheap learner and a small model, for a CPU in minutes;
#: ``noisy_room``: :data:`sb3_pref.ad.presets.NOISY_ROOM` (AD^epsilon on a 5 x 5 room, in-context learning in minutes);
#: ``noisy_room_20``: :data:`sb3_pref.ad.presets.NOISY_ROOM_20` (the same room, a context of 20 episodes);
#: ``a2c_room``: the seed's room, goals and A2C learners, sized for a CPU: each learner trains 40k steps at a
#: learning rate of 1e-3 (2,000-2,600 episodes from random to about 90% success), and the model sees its history
#: through the 100 views that keep every 100th episode (about 24 episodes, 400 transitions each), whole in a
#: context of 420 transitions (benchmarks/ad/README.md, "The seed's room")
PRESETS: dict[str, dict[str, Any]] = {
    "seed": dict(
        learner="a2c",
        steps=2_500_000,
        max_history_steps=800_000,
        seq_len=256,
        embed_dim=64,
        n_layers=4,
        n_heads=4,
        ff_dim=2048,
        attention_dropout=0.5,
        n_updates=22_000,
        batch_size=32,
        learning_rate=3e-4,
    ),
    "small": dict(
        learner="qlearning",
        steps=3_000,
        max_history_steps=3_000,
        seq_len=80,
        embed_dim=32,
        n_layers=2,
        n_heads=2,
        ff_dim=128,
        attention_dropout=0.0,
        n_updates=1_500,
        batch_size=16,
        learning_rate=1e-3,
    ),
    "noisy_room": _model_preset(NOISY_ROOM),
    "noisy_room_20": _model_preset(NOISY_ROOM_20),
    "a2c_room": dict(
        learner="a2c",
        steps=40_000,
        max_history_steps=None,
        seq_len=420,
        embed_dim=64,
        n_layers=2,
        n_heads=4,
        ff_dim=256,
        attention_dropout=0.0,
        n_updates=1_500,
        batch_size=16,
        learning_rate=2e-3,
    ),
}
#: ``a2c_room_transition``: ``a2c_room``'s histories and model with one token per transition, whose updates cost a
#: seventh as much on a CPU, spent on four times as many updates (benchmarks/ad/README.md, "The seed's room")
PRESETS["a2c_room_transition"] = dict(PRESETS["a2c_room"], n_updates=6_000)
#: ``a2c_room_150k``: learners that converge (150k steps each, 8,800-82,000 episodes, 44 of 57 ending at 0.8-1.0 success; at
#: 40k steps they end at 0.5), views of every 400th episode, and a context of 160 transitions (about 8 episodes)
#: that slides over a view instead of holding it whole, so the context shows how far a learner has got, not which of
#: its episodes it is at (benchmarks/ad/README.md, "The seed's room, third run")
PRESETS["a2c_room_150k"] = dict(PRESETS["a2c_room_transition"], steps=150_000, seq_len=160)
#: ``dqn_room``: the seed's room with SB3 DQN learners that search like tabular Q-learning (``make_dqn_learner``,
#: 30k steps each, two learners per training goal), the model trained 15,000 updates on first-success views, and 230
#: evaluation trials (benchmarks/ad/README.md, "The seed's room, sixth run")
PRESETS["dqn_room"] = dict(PRESETS["a2c_room_150k"], learner="dqn", steps=30_000, max_history_steps=30_000, n_updates=15_000)
#: settings of the room, the split and the evaluation that a preset changes (the others keep the seed's)
ROOM_PRESETS: dict[str, dict[str, Any]] = {
    "noisy_room": _room_preset(NOISY_ROOM),
    "noisy_room_20": _room_preset(NOISY_ROOM_20),
    "a2c_room": dict(learner_lr=1e-3, episode_stride=100, recency_bias=True, residual_dropout=0.0, min_learning_rate=1e-4),
}
ROOM_PRESETS["a2c_room_transition"] = dict(ROOM_PRESETS["a2c_room"], token_layout="transition")
ROOM_PRESETS["a2c_room_150k"] = dict(ROOM_PRESETS["a2c_room_transition"], episode_stride=400)
ROOM_PRESETS["dqn_room"] = dict(
    ROOM_PRESETS["a2c_room_150k"],
    learners_per_goal=2,
    episode_stride=1,
    first_success_views=100,
    tail_window=300,
    eval_trials=230,
)
#: exit status of a call that ran out of its ``--time-budget`` before the last stage (run the same command again)
INCOMPLETE_EXIT_CODE = 3
ROOM_DEFAULTS: dict[str, Any] = dict(
    size=9,
    episode_length=20,
    n_test=AD_TEST_GOALS,
    no_terminate_on_goal=False,
    learners_per_goal=1,
    episodes_per_trial=20,
    recency_bias=False,
    residual_dropout=0.1,
    anneal_fraction=0.5,
    anneal_after_reward=False,
    min_learning_rate=2e-6,
    episode_stride=1,
    token_layout="triplet",
    burn_in=0,
    first_window_fraction=0.0,
    first_success_views=0,
    tail_episodes=30,
    tail_window=2000,
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
    parser.add_argument(
        "--no-terminate-on-goal", action="store_true", default=None, help="reward on every step on the goal instead"
    )
    parser.add_argument("--observation", choices=["xy", "onehot"], default="xy")
    parser.add_argument("--learners-per-goal", type=int, default=None, help="default: 1")
    parser.add_argument("--episodes-per-trial", type=int, default=None, help="default: 20")
    parser.add_argument("--recency-bias", action="store_true", default=None, help="ALiBi in attention (not the seed's)")
    parser.add_argument(
        "--token-layout",
        choices=["triplet", "transition"],
        default=None,
        help="triplet: the seed's three tokens per transition (default); transition: one, cheaper",
    )
    parser.add_argument("--residual-dropout", type=float, default=None, help="default: 0.1")
    parser.add_argument("--min-learning-rate", type=float, default=None, help="end of the cosine decay (default: 2e-6)")
    parser.add_argument("--anneal-fraction", type=float, default=None, help="noisy expert: share of steps to epsilon 0")
    parser.add_argument(
        "--anneal-after-reward",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="noisy expert: epsilon starts to fall at the first reward, not the first step",
    )
    parser.add_argument("--eval-trials", type=int, default=None, help="default: 4 per held-out goal")
    parser.add_argument("--verbose", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="processes recording histories in parallel")
    parser.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="seconds this call may work; it then saves its stage and exits with code 3 (run it again)",
    )
    parser.add_argument(
        "--episode-stride",
        type=int,
        default=None,
        help="train on the k views of each history that keep every k-th episode (offsets 0 .. k-1, "
        "Histories.subsampled), each whole in the context, so that a slow learner's progress fits "
        "it (default: 1); the source curve stays the full one",
    )
    parser.add_argument(
        "--first-success-views",
        type=int,
        default=None,
        metavar="N",
        help="train on first-success views instead (sb3_pref.ad.first_success_views): from each of the "
        "first N episodes of a history, its episodes up to its first success, then --tail-episodes "
        "of its last --tail-window (default: 0, off)",
    )
    parser.add_argument("--tail-episodes", type=int, default=None, help="first-success views: default 30")
    parser.add_argument("--tail-window", type=int, default=None, help="first-success views: default 2000")
    parser.add_argument(
        "--burn-in",
        type=int,
        default=None,
        help="steps at the start of a window that begins mid-history that carry no loss (default: 0)",
    )
    parser.add_argument(
        "--first-window-fraction",
        type=float,
        default=None,
        help="share of windows that start at their history's first transition (default: 0)",
    )
    parser.add_argument(
        "--learner-lr", type=float, default=None, help="a2c learner: its learning rate (default: the seed's 1e-4)"
    )
    parser.add_argument(
        "--shuffled",
        action="store_true",
        help="control: train on the same histories with the episodes of each one permuted (no learning trend)",
    )
    parser.add_argument("--with-rl2", action="store_true", help="also train RL2 on the training goals, evaluate it beside AD")
    parser.add_argument("--rl2-steps", type=int, default=None, help="RL2's env steps (default: the grid's DarkRoom preset)")
    parser.add_argument("--rl2-cell", choices=["gru", "lstm"], default=None, help="default: gru (lstm is faster on CPU)")
    for name, value in PRESETS["seed"].items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=None, help="default: the preset's")
    args = parser.parse_args()
    for name, value in {**ROOM_DEFAULTS, **ROOM_PRESETS.get(args.preset, {}), **PRESETS[args.preset]}.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.first_success_views and args.episode_stride > 1:
        parser.error(
            f"--first-success-views replaces the episode-stride views: pass --episode-stride 1 with it "
            f"(the preset {args.preset!r} sets {args.episode_stride})"
        )
    return args


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
