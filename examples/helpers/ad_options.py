"""
The options of ``examples/train_AD.py``: its named presets and its command line.

A preset names a whole run (learners, histories, model, room and evaluation) as the script's flags would set them:
:data:`PRESETS` holds the learner and model settings, :data:`ROOM_PRESETS` what a preset changes of the room, the
split and the evaluation, and :data:`ROOM_DEFAULTS` the seed's room for everything else; a flag given on the command
line overrides them all. Kept beside the script rather than in it, so that the script reads as the pipeline it runs
(histories, model, evaluation), and rather than in ``sb3_pref.ad.presets``, because these are the script's flags:
:data:`sb3_pref.ad.presets.NOISY_ROOM` is the library's form of the presets that both share.
"""

import argparse
from typing import Any

from sb3_pref.ad.presets import NOISY_ROOM, NOISY_ROOM_20
from sb3_pref.envs.darkroom import AD_TEST_GOALS


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
#: what a flag takes when neither the command line nor the preset sets it: the seed's room, split and evaluation
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


def parse_options(description: str) -> argparse.Namespace:
    """
    The command line of ``examples/train_AD.py``: a flag left out that a preset sets takes the ``--preset``'s value,
    then :data:`ROOM_DEFAULTS`' (the seed's room).

    :param description: the text ``--help`` shows above the flags (the script's docstring)
    :return: the run's settings, one attribute per flag
    """
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
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
