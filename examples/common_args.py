"""
What ``train_PrefPPO.py`` and ``train_PPO.py`` share: the B-Pref command line, its validation, the
environment (dm_control or Meta-World, optionally ``VecNormalize``-d), the PPO keyword arguments,
the run directory and the files written at the end.

Both scripts accept exactly the same flags, so one line of a grid script can be pointed at either;
``train_PPO.py`` simply ignores the reward-learning flags.
"""

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import configure
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_pref import ScriptedTeacher
from sb3_pref.common.query import QUERY_METHODS, resolve_query_method
from sb3_pref.envs import (
    is_metaworld_env_name,
    make_vec_dmcontrol_env,
    make_vec_metaworld_env,
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


# ---------------------------------------------------------------------------- the command line
def build_parser(description: str) -> argparse.ArgumentParser:
    """
    B-Pref's ``train_PrefPPO.py`` flags, plus ``--teacher`` and ``--output-dir``.
    Defaults are B-Pref's walker_walk settings (3x256 separate pi/vf nets, lr 5e-5, 32 envs x 500
    steps, batch 64, gae 0.92, clip 0.4 annealed to 0, gSDE, observation normalisation, 4M steps,
    an oracle teacher asked 100 disagreement queries every 16000 steps up to 1000).

    :param description: shown by ``--help``
    :return: the parser (a script may add its own flags before parsing)
    """
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    run = parser.add_argument_group("run")
    run.add_argument("--env", default="walker_walk", help="dm_control 'domain_task' or Meta-World 'metaworld_<task>-v2'")
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
    ppo.add_argument("--clip-init", type=positive_float, default=0.4, help="PPO clip range, annealed linearly to 0")
    ppo.add_argument("--num-layer", type=positive_int, default=3, help="hidden layers of the policy and value nets")
    ppo.add_argument("--hidden-dim", type=positive_int, default=256, help="width of those layers")
    ppo.add_argument("--use-sde", type=flag, default=True, help="generalized state-dependent exploration (0/1)")
    ppo.add_argument("--sde-freq", type=sde_frequency, default=4, help="steps between gSDE noise draws")
    ppo.add_argument("--normalize", type=flag, default=True, help="VecNormalize the observations, not the reward (0/1)")

    pretrain = parser.add_argument_group("unsupervised pretraining")
    pretrain.add_argument("--unsuper-step", type=non_negative_int, default=32000, help="env steps maximising state entropy")
    pretrain.add_argument("--unsuper-n-epochs", type=positive_int, default=50, help="PPO epochs per rollout while pretraining")

    reward = parser.add_argument_group("reward learning (PrefPPO; accepted and ignored by train_PPO.py)")
    reward.add_argument("--re-lr", type=positive_float, default=3e-4, help="reward model learning rate")
    reward.add_argument("--re-act", choices=["tanh", "sig", "relu"], default="tanh", help="reward model output activation")
    reward.add_argument("--re-segment", type=positive_int, default=50, help="segment length")
    reward.add_argument("--re-num-interaction", type=positive_int, default=16000, help="env steps between query rounds")
    reward.add_argument("--re-num-feed", type=positive_int, default=1, help="kept for B-Pref compatibility (no effect)")
    reward.add_argument("--re-batch", type=positive_int, default=100, help="queries per round")
    reward.add_argument("--re-max-feed", type=positive_int, default=1000, help="total feedback budget")
    reward.add_argument("--re-update", type=positive_int, default=100, help="most reward-model epochs per round")
    reward.add_argument(
        "--re-feed-type",
        type=feed_type,
        default="disagreement",
        help="query selection: " + ", ".join(f"{i}={name}" for i, name in enumerate(QUERY_METHODS)),
    )
    reward.add_argument("--re-large-batch", type=positive_int, default=10, help="candidate pairs drawn per kept query")

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
    program with a parser error (exit status 2) before an environment is built.

    :param parser: from :func:`build_parser`
    :param argv: the arguments (default: ``sys.argv[1:]``)
    :param learns_reward: check the reward-learning flags against each other too (a script that
        ignores them should not fail on them)
    :return: the namespace, with ``metaworld`` and ``max_ep_len`` added and every ``teacher_*`` set
    """
    args = parser.parse_args(argv)
    _resolve_teacher(args)
    args.metaworld = is_metaworld_env_name(args.env)
    args.max_ep_len = METAWORLD_EP_LEN if args.metaworld else DMCONTROL_EP_LEN
    try:
        # Checked here so that a typo fails in a second, not after n_envs envs were built.
        if args.metaworld:
            resolve_metaworld_name(args.env)
        else:
            parse_dmcontrol_name(args.env)
    except (ValueError, ImportError) as error:
        parser.error(f"--env {args.env}: {error}")
    rollout = args.n_envs * args.n_steps
    if rollout < 2:
        parser.error("--n-envs x --n-steps must be at least 2 (PPO normalises advantages over the rollout)")
    if not 1 < args.batch_size <= rollout:
        parser.error(
            f"--batch-size {args.batch_size} must be in [2, n_envs x n_steps = {rollout}]: lower it or collect longer rollouts"
        )
    if learns_reward and args.re_segment > args.max_ep_len:
        parser.error(f"--re-segment {args.re_segment} is longer than an episode ({args.max_ep_len} steps)")
    if learns_reward and args.re_batch > args.re_max_feed:
        parser.error(f"--re-batch {args.re_batch} exceeds --re-max-feed {args.re_max_feed}: not even one round fits")
    return args


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


# ---------------------------------------------------------------------------- run set-up
@dataclass
class Run:
    """Where a run writes: the folder of its monitor files and logs, and the folder of its saved files."""

    run_dir: str
    output_dir: str
    tensorboard_log: Optional[str]


def make_run(args: argparse.Namespace, algo: str, tag: str = "") -> Run:
    """
    Create ``<tensorboard-log>/<algo>/<env>/<tag>seed<seed>`` (``runs/...`` without a log root) and
    write the flags to ``args.json`` there first, so that even a crashed run says how it was started.

    :param args: the parsed flags
    :param algo: e.g. ``"PrefPPO"``
    :param tag: what distinguishes runs of the same algorithm and env besides the seed
    :return: the run's folders
    """
    root = args.tensorboard_log or "runs"
    run_dir = os.path.join(root, algo, args.env, f"{tag}seed{args.seed}")
    output_dir = args.output_dir or run_dir
    os.makedirs(run_dir, exist_ok=True)
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "args.json"), "w") as file:
        json.dump({"algo": algo, **vars(args)}, file, indent=2, sort_keys=True)
    tensorboard_log = run_dir if args.tensorboard_log and _has_tensorboard() else None
    return Run(run_dir=run_dir, output_dir=output_dir, tensorboard_log=tensorboard_log)


def _has_tensorboard() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def make_env(args: argparse.Namespace, run: Run) -> VecEnv:
    """
    ``n_envs`` monitored copies of the task (env ``i`` seeded ``seed + i``, monitor files in the run
    folder), wrapped in ``VecNormalize(norm_reward=False)`` when ``--normalize``: B-Pref normalises
    the policy's observations only, the reward model sees raw observations.
    """
    factory = make_vec_metaworld_env if args.metaworld else make_vec_dmcontrol_env
    env = factory(args.env, n_envs=args.n_envs, seed=args.seed, monitor_dir=run.run_dir)
    if args.normalize:
        env = VecNormalize(env, norm_reward=False)
    return env


def ppo_kwargs(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """The PPO keyword arguments both scripts pass, B-Pref style (``clip_range`` annealed linearly to 0)."""
    hidden = [args.hidden_dim] * args.num_layer
    return dict(
        tensorboard_log=run.tensorboard_log,
        seed=args.seed,
        learning_rate=args.lr,
        batch_size=args.batch_size,
        n_steps=args.n_steps,
        ent_coef=args.ent_coef,
        policy_kwargs=dict(net_arch=dict(pi=hidden, vf=list(hidden))),
        use_sde=args.use_sde,
        sde_sample_freq=args.sde_freq,
        gae_lambda=args.gae_lambda,
        # progress_remaining goes 1 -> 0, so this is clip_init * progress_remaining, B-Pref's schedule.
        clip_range=LinearSchedule(args.clip_init, 0.0, 1.0),
        n_epochs=args.n_epochs,
        verbose=1,
    )


def configure_logging(model: BaseAlgorithm, run: Run) -> None:
    """Without tensorboard installed, log to ``progress.csv`` in the run folder instead of failing."""
    if run.tensorboard_log is None:
        model.set_logger(configure(run.run_dir, ["stdout", "csv"]))


def learn_and_save(model: BaseAlgorithm, run: Run, total_timesteps: int, **learn_kwargs: Any) -> None:
    """
    Train, then save the model and the ``VecNormalize`` statistics (needed to run the policy
    again) into the output folder, also after Ctrl-C so that a long run is never lost.
    """
    try:
        model.learn(total_timesteps=total_timesteps, **learn_kwargs)
    except KeyboardInterrupt:
        print(f"interrupted at {model.num_timesteps} steps: saving what was learned", file=sys.stderr)
    model.save(os.path.join(run.output_dir, "model.zip"))
    vec_normalize = model.get_vec_normalize_env()
    if vec_normalize is not None:
        vec_normalize.save(os.path.join(run.output_dir, "vecnormalize.pkl"))
    print(f"saved to {run.output_dir}")
