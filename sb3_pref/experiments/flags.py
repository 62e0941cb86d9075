"""
B-Pref's command line (the flags of its ``train_PrefPPO.py``), shared by ``examples/train_PrefPPO.py``,
``examples/train_PPO.py`` and the grid runner, which turns a config's hyperparameters into the same
flags so that a grid and a script validate a setting the same way.
"""

import argparse
import difflib
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Callable, NoReturn, Optional, cast

from sb3_pref.common.options import OPTIONS_BY_NAME
from sb3_pref.core.ensemble import BPREF_HIDDEN_DIM, BPREF_N_LAYERS
from sb3_pref.core.query import QUERY_METHODS, resolve_query_method
from sb3_pref.core.teachers import ScriptedTeacher
from sb3_pref.envs import (
    gymnasium_episode_length,
    is_gymnasium_env_name,
    is_metaworld_env_name,
    parse_dmcontrol_name,
    resolve_metaworld_name,
)

# B-Pref's episode lengths: Meta-World tasks are cut at 500 steps, dm_control tasks run 1000.
METAWORLD_EP_LEN, DMCONTROL_EP_LEN = 500, 1000

# ``--teacher-*`` flag -> ScriptedTeacher argument (the preset table uses the latter).
TEACHER_FLAGS = {
    "teacher_beta": "beta",
    "teacher_gamma": "gamma",
    "teacher_eps_mistake": "eps_mistake",
    "teacher_eps_skip": "eps_skip",
    "teacher_eps_equal": "eps_equal",
}


# ---------------------------------------------------------------------------- argument types
def _number(cast: Callable[[str], Any], test: Callable[[Any], bool], requirement: str) -> Callable[[str], Any]:
    """An argparse ``type`` that casts, then rejects values failing ``test`` with a readable message."""

    def parse(text: str) -> Any:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {requirement}")
        return value

    parse.__name__ = requirement  # argparse shows this name in "invalid <name> value" errors
    return parse


positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")
non_negative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")
non_negative_float = _number(float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")
finite_float = _number(float, math.isfinite, "a finite number")
probability = _number(float, lambda v: 0.0 <= v <= 1.0, "a probability in [0, 1]")
discount = _number(float, lambda v: 0.0 < v <= 1.0, "in (0, 1]")
sde_frequency = _number(int, lambda v: v >= -1, "an integer >= -1 (-1: new noise only at the start of each rollout)")


def flag(text: str) -> bool:
    """B-Pref passes switches as ``0``/``1``; words are accepted too."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a switch: use 0 or 1")


def feed_type(text: str) -> str:
    """A query method given as B-Pref's id (``1``) or by name (``disagreement``), returned as its name."""
    try:
        return resolve_query_method(int(text) if text.strip().lstrip("-").isdigit() else text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


class _RaisingParser(argparse.ArgumentParser):
    """A parser whose errors are ``ValueError`` instead of a message and ``sys.exit(2)`` (for configs)."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


# ---------------------------------------------------------------------------- the command line
def build_parser(description: str, raise_errors: bool = False) -> argparse.ArgumentParser:
    """
    B-Pref's ``train_PrefPPO.py`` flags, plus ``--teacher`` and ``--output-dir``.
    Defaults are B-Pref's walker_walk settings (3x256 separate pi/vf nets, lr 5e-5, 32 envs x 500
    steps, batch 64, gae 0.92, clip 0.4 annealed to 0, gSDE, observation normalisation, 4M steps,
    an oracle teacher asked 100 disagreement queries every 16000 steps up to 1000).

    :param description: shown by ``--help``
    :param raise_errors: raise ``ValueError`` on a bad flag instead of printing usage and exiting
    :return: the parser (a script may add its own flags before parsing)
    """
    parser_class = _RaisingParser if raise_errors else argparse.ArgumentParser
    parser = parser_class(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    run = parser.add_argument_group("run")
    run.add_argument(
        "--env",
        default="walker_walk",
        help="dm_control 'domain_task', Meta-World 'metaworld_<task>-v2' or a gymnasium id such as 'Pendulum-v1'",
    )
    run.add_argument("--seed", type=non_negative_int, default=12345, help="seed of the envs, the policy and the teacher")
    run.add_argument("--total-timesteps", type=positive_int, default=4_000_000, help="env steps, summed over envs")
    run.add_argument(
        "-tb", "--tensorboard-log", default="logs", help="root of the run folders ('' for none: runs go under runs/)"
    )
    run.add_argument("--output-dir", default=None, help="where model, VecNormalize stats and labels go; None: the run folder")

    ppo = parser.add_argument_group("PPO")
    ppo.add_argument("--lr", type=positive_float, default=5e-5, help="policy learning rate")
    ppo.add_argument("-b", "--batch-size", type=positive_int, default=64, help="PPO minibatch size")
    ppo.add_argument("--n-envs", type=positive_int, default=32, help="parallel environments")
    ppo.add_argument("--n-steps", type=positive_int, default=500, help="steps per env per rollout")
    ppo.add_argument("--n-epochs", type=positive_int, default=20, help="PPO epochs per rollout")
    ppo.add_argument("--ent-coef", type=non_negative_float, default=0.0, help="entropy bonus")
    ppo.add_argument("--gae-lambda", type=probability, default=0.92, help="GAE lambda")
    ppo.add_argument("--gamma", type=discount, default=0.99, help="discount factor")
    ppo.add_argument("--clip-init", type=positive_float, default=0.4, help="PPO clip range, annealed linearly to 0")
    ppo.add_argument(
        "--clip-anneal", type=flag, default=True, help="anneal the clip range to 0 as B-Pref does (0: SB3's constant clip)"
    )
    ppo.add_argument("--num-layer", type=positive_int, default=3, help="hidden layers of the policy and value nets")
    ppo.add_argument("--hidden-dim", type=positive_int, default=256, help="width of those layers")
    ppo.add_argument("--use-sde", type=flag, default=True, help="generalized state-dependent exploration (0/1)")
    ppo.add_argument("--sde-freq", type=sde_frequency, default=4, help="steps between gSDE noise draws")
    ppo.add_argument("--normalize", type=flag, default=True, help="VecNormalize the observations, not the reward (0/1)")

    pretrain = parser.add_argument_group("unsupervised pretraining")
    pretrain.add_argument("--unsuper-step", type=non_negative_int, default=32000, help="env steps maximising state entropy")
    pretrain.add_argument("--unsuper-n-epochs", type=positive_int, default=50, help="PPO epochs per rollout while pretraining")
    pretrain.add_argument(
        "--unsuper-reset-policy",
        type=flag,
        default=False,
        help="restore the policy pretraining started from when it ends (0/1; not in B-Pref)",
    )

    reward = parser.add_argument_group("reward learning (PrefPPO; accepted and ignored by train_PPO.py)")
    reward.add_argument("--re-lr", type=positive_float, default=3e-4, help="reward model learning rate")
    reward.add_argument("--re-act", choices=["tanh", "sig", "relu"], default="tanh", help="reward model output activation")
    reward.add_argument("--re-segment", type=positive_int, default=50, help="segment length")
    reward.add_argument("--re-num-interaction", type=positive_int, default=16000, help="env steps between query rounds")
    reward.add_argument("--re-num-feed", type=positive_int, default=1, help="kept for B-Pref compatibility (no effect)")
    reward.add_argument("--re-batch", type=positive_int, default=100, help="queries per round")
    reward.add_argument(
        "--re-initial-batch", type=positive_int, default=None, help="queries at the first round (default: --re-batch)"
    )
    # B-Pref's train_PrefPPO.py default, which is the option's: read from its declaration, one default wherever read
    reward.add_argument(
        "--re-max-feed", type=positive_int, default=OPTIONS_BY_NAME["max_feed"].default, help="total feedback budget"
    )
    reward.add_argument("--re-update", type=positive_int, default=100, help="most reward-model epochs per round")
    reward.add_argument(
        "--re-feed-type",
        type=feed_type,
        default="disagreement",
        help="query selection: " + ", ".join(f"{i}={name}" for i, name in enumerate(QUERY_METHODS)),
    )
    reward.add_argument(
        "--re-hidden-dim", type=positive_int, default=BPREF_HIDDEN_DIM, help="width of the reward model's hidden layers"
    )
    reward.add_argument("--re-num-layer", type=positive_int, default=BPREF_N_LAYERS, help="hidden layers of the reward model")
    reward.add_argument("--re-large-batch", type=positive_int, default=10, help="candidate pairs drawn per kept query")
    reward.add_argument(
        "--re-schedule",
        choices=["bpref", "auto"],
        default="bpref",
        help="reward-model training per round: bpref (B-Pref's, up to --re-update passes over all labels) or "
        "auto (the library default: early stop on held-out labels, at most --re-update passes)",
    )
    reward.add_argument(
        "--feedback-schedule",
        choices=["bpref", "auto"],
        default="bpref",
        help="what the schedule flags leave unset (only --re-initial-batch here): bpref (B-Pref's: the first round "
        "asks --re-batch) or auto (the library default: planned from the budget)",
    )
    reward.add_argument(
        "--re-input-norm",
        type=flag,
        default=False,
        help="standardise the reward model's inputs by the first round's labelled segments (0/1; not in B-Pref)",
    )
    reward.add_argument(
        "--re-train-dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="precision of reward-model training passes (not in B-Pref; bfloat16 is ~2.8x faster with AMX)",
    )

    robust = parser.add_argument_group("successors of B-Pref (not in B-Pref)")
    robust.add_argument(
        "--rime",
        type=flag,
        default=False,
        help="RIME's robust label filter for noisy teachers: train on the labels the reward model finds plausible, "
        "flip the very implausible ones (0/1)",
    )
    robust.add_argument(
        "--rune-beta",
        type=non_negative_float,
        default=0.0,
        help="RUNE's exploration bonus: the policy's reward is the ensemble mean plus beta_t x the members' std "
        "(0: off; RUNE used 0.01 with PrefPPO, 0.05 with PEBBLE)",
    )
    robust.add_argument(
        "--rune-decay", type=probability, default=0.0, help="RUNE's decay of beta_t per env step (1e-5 with PEBBLE)"
    )
    robust.add_argument(
        "--surf",
        type=flag,
        default=False,
        help="SURF's semi-supervised reward learning: unlabelled pairs pseudo-labelled where the model is confident, "
        "on temporal crops (0/1)",
    )
    robust.add_argument(
        "--qpa-episodes",
        type=non_negative_int,
        default=0,
        help="QPA's policy-aligned queries: pairs from the last N episodes only, and (SAC) half of each batch from "
        "them while labels remain (0: off; QPA used 10 on DMC)",
    )
    robust.add_argument(
        "--qpa-crops",
        type=non_negative_int,
        default=0,
        help="QPA's data augmentation: each labelled pair counted N times in the reward loss, each on random crops "
        "of 70-90%% of its segments (0: off; QPA used 20)",
    )

    teacher = parser.add_argument_group("scripted teacher (default: oracle)")
    teacher.add_argument(
        "--teacher", choices=list(ScriptedTeacher.PRESETS), default=None, help="B-Pref preset; overrides --teacher-*"
    )
    teacher.add_argument("--teacher-beta", type=finite_float, default=None, help="rationality (<= 0: perfectly rational)")
    teacher.add_argument("--teacher-gamma", type=discount, default=None, help="myopic discount")
    teacher.add_argument("--teacher-eps-mistake", type=probability, default=None, help="label flip probability")
    teacher.add_argument("--teacher-eps-skip", type=probability, default=None, help="skip threshold factor")
    teacher.add_argument("--teacher-eps-equal", type=probability, default=None, help="equal threshold factor")
    return parser


def parse_args(
    parser: argparse.ArgumentParser, argv: Optional[Sequence[str]] = None, learns_reward: bool = True
) -> argparse.Namespace:
    """
    Parse, resolve the teacher and check the flags against each other; any problem ends the
    program with a parser error (exit status 2) before an environment is built (or raises
    ``ValueError`` with a parser built with ``raise_errors=True``).

    :param parser: from :func:`build_parser`
    :param argv: the arguments (default: ``sys.argv[1:]``)
    :param learns_reward: check the reward-learning flags against each other too (a script that
        ignores them should not fail on them)
    :return: the namespace, with ``metaworld``, ``gymnasium`` and ``max_ep_len`` added and every ``teacher_*`` set
    """
    args = parser.parse_args(argv)
    _resolve_teacher(args)
    try:
        check_args(args, learns_reward)
    except ValueError as error:
        parser.error(str(error))
    return args


def check_args(args: argparse.Namespace, learns_reward: bool = True) -> None:
    """
    Set ``args.metaworld``, ``args.gymnasium`` and ``args.max_ep_len``, and check the flags against each other.

    :param args: parsed flags
    :param learns_reward: check the reward-learning flags too
    :raises ValueError: naming the flag to change
    """
    args.metaworld = is_metaworld_env_name(args.env)
    args.gymnasium = is_gymnasium_env_name(args.env)
    args.max_ep_len = METAWORLD_EP_LEN if args.metaworld else DMCONTROL_EP_LEN
    try:
        # Checked here so that a typo fails in a second, not after n_envs envs were built.
        if args.metaworld:
            resolve_metaworld_name(args.env)
        elif args.gymnasium:
            args.max_ep_len = gymnasium_episode_length(args.env)
        else:
            parse_dmcontrol_name(args.env)
    except (ValueError, ImportError) as error:
        raise ValueError(f"--env {args.env}: {error}") from None
    rollout = args.n_envs * args.n_steps
    if rollout < 2:
        raise ValueError("--n-envs x --n-steps must be at least 2 (PPO normalises advantages over the rollout)")
    if not 1 < args.batch_size <= rollout:
        raise ValueError(
            f"--batch-size {args.batch_size} must be in [2, n_envs x n_steps = {rollout}]: lower it or collect longer rollouts"
        )
    if learns_reward and args.re_segment > args.max_ep_len:
        raise ValueError(f"--re-segment {args.re_segment} is longer than an episode ({args.max_ep_len} steps)")
    if learns_reward and args.re_batch > args.re_max_feed:
        raise ValueError(f"--re-batch {args.re_batch} exceeds --re-max-feed {args.re_max_feed}: not even one round fits")


def _resolve_teacher(args: argparse.Namespace) -> None:
    """Fill the ``teacher_*`` values from ``--teacher`` (winning over explicit flags) or from the oracle."""
    preset = ScriptedTeacher.PRESETS[args.teacher or "oracle"]
    for option, key in TEACHER_FLAGS.items():
        given = getattr(args, option)
        if args.teacher is not None and given is not None and given != preset[key]:
            print(
                f"note: --teacher {args.teacher} sets --{option.replace('_', '-')} {preset[key]} (ignoring {given})",
                file=sys.stderr,
            )
        if args.teacher is not None or given is None:
            setattr(args, option, float(preset[key]))
    args.teacher_name = teacher_name(args)


def teacher_name(args: argparse.Namespace) -> str:
    """The preset that the resolved ``teacher_*`` values match, else a name spelling them out."""
    values = {key: getattr(args, option) for option, key in TEACHER_FLAGS.items()}
    for name, preset in ScriptedTeacher.PRESETS.items():
        if all(math.isclose(values[key], preset[key]) for key in values):
            return name
    return "teacher_b{beta:g}_g{gamma:g}_m{eps_mistake:g}_s{eps_skip:g}_e{eps_equal:g}".format(**values)


# ---------------------------------------------------------------------------- from a config
def flag_names() -> list[str]:
    """The hyperparameter names a config may set: the flags' ``dest`` names (``re_max_feed``...)."""
    parser = build_parser("", raise_errors=True)
    return [action.dest for action in parser._actions if action.dest != "help"]


def typed_flags(values: Mapping[str, Any]) -> dict[str, Any]:
    """
    Values converted as the flags convert them (so that ``"3e-4"`` and ``0.0003`` are the same setting).

    :raises ValueError: for a value a flag would reject
    """
    # every typed flag of build_parser has a converter function (none is named by a string)
    types = {
        action.dest: cast(Callable[[str], Any], action.type)
        for action in build_parser("", raise_errors=True)._actions
        if action.type is not None
    }
    typed = {}
    for key, value in values.items():
        try:
            typed[key] = types[key](str(value)) if key in types and value is not None else value
        except argparse.ArgumentTypeError as error:
            raise ValueError(f"{key}: {error}") from None
    return typed


def args_from_mapping(values: Mapping[str, Any], learns_reward: bool = True) -> argparse.Namespace:
    """
    The namespace the scripts would get from the flags that ``values`` spells out, checked the same way.

    :param values: ``{"lr": 3e-4, "re_max_feed": 1000, "use_sde": True, ...}`` (flag ``dest`` names)
    :param learns_reward: check the reward-learning flags too
    :return: the parsed and checked namespace
    :raises ValueError: for an unknown name (with the closest known ones) or a bad value
    """
    known = flag_names()
    argv: list[str] = []
    for name, value in values.items():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            raise ValueError(f"unknown hyperparameter {name!r}" + (f": did you mean {', '.join(close)}?" if close else ""))
        if value is None:
            continue
        text = str(int(value)) if isinstance(value, bool) else str(value)
        # "--name=value", so that a negative number is never taken for a flag.
        argv.append("--{}={}".format(name.replace("_", "-"), text))
    return parse_args(build_parser("", raise_errors=True), argv, learns_reward)
