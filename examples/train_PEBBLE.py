"""
PEBBLE on a B-Pref task: SAC on a reward model learned from a scripted teacher's preferences, after
state-entropy pretraining, with the replay buffer relabelled after every reward update. Takes
B-Pref's ``train_PEBBLE.py`` overrides (``key=value``), so its run scripts work unchanged, e.g.::

    python examples/train_PEBBLE.py env=walker_walk seed=12345 agent.params.actor_lr=0.0005 \\
        agent.params.critic_lr=0.0005 gradient_update=1 activation=tanh num_unsup_steps=9000 \\
        num_train_steps=500000 num_interact=20000 max_feedback=1000 reward_batch=100 reward_update=50 \\
        feed_type=1 teacher_beta=-1 teacher_gamma=1 teacher_eps_mistake=0 teacher_eps_skip=0 teacher_eps_equal=0

The other examples' flags work too: ``--env walker_walk --max-feedback 1000`` is ``env=walker_walk
max_feedback=1000``. ``env`` takes B-Pref's names or the ids in gymnasium's form (``sb3_pref/dmc-walker-walk-v0``).

Settings not given come from the task's B-Pref script (``sb3_pref.experiments.pebble.PEBBLE_TASKS``; for
``env=Pendulum-v1``, a quick CPU-sized run of 20k steps and 200 labels, ``QUICK_TASKS``),
then B-Pref's config defaults. Writes ``runs/PEBBLE/<env>/seed<seed>/``: ``config.json``, the monitor
file, ``progress.csv``, and at the end ``model.zip``, ``replay_buffer.pkl``, ``reward_model.pt`` and
``preferences.npz``.
"""

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Optional

import torch as th
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure

from sb3_pref import SAC_REWARD
from sb3_pref.envs import make_benchmark_vec_env
from sb3_pref.experiments.pebble import PEBBLE_DEFAULTS, PEBBLE_TASKS, QUICK_TASKS, make_pebble, parse_overrides


def settings_help() -> str:
    """:return: every setting with its default, then each task's own settings, for ``--help``"""
    lines = ["settings, as key=default:"]
    lines += [f"  {key}={value}" for key, value in PEBBLE_DEFAULTS.items()]
    lines += ["", "the task's B-Pref script (Pendulum-v1: a quick CPU-sized run) replaces some defaults (env=TASK):"]
    for task, settings in {**PEBBLE_TASKS, **QUICK_TASKS}.items():
        replaced = " ".join(f"{key}={value}" for key, value in settings.items() if key != "budgets")
        lines += textwrap.wrap(replaced, width=100, initial_indent=f"  env={task}: ", subsequent_indent="      ")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """:return: the command line: B-Pref's ``key=value`` overrides, and ``--help`` listing them"""
    parser = argparse.ArgumentParser(
        description=__doc__, epilog=settings_help(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value",
        help="a setting of the list below; --key value (dashes for underscores) works too, as in the other examples",
    )  # fmt: skip
    return parser


def main(argv: Optional[Sequence[str]] = None, eval_episodes: int = 10) -> SAC_REWARD:
    """
    :param argv: ``key=value`` overrides (default: ``sys.argv[1:]``)
    :param eval_episodes: episodes of the closing deterministic evaluation (the command line's: 10)
    :return: the trained model
    """
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        parser.parse_args(["--help"])
    try:
        # Read by parse_overrides, not argparse: it takes B-Pref's key=value and the --flag value of the others.
        config = parse_overrides(args)
    except ValueError as error:
        parser.error(str(error))
    if "OMP_NUM_THREADS" not in os.environ:
        # SAC's networks are too small to gain from a second thread, and two threads on a machine whose other
        # core is busy wait for each other at every op: 40 times slower per step measured on 2 cores.
        th.set_num_threads(1)
    run_dir = os.path.join("runs", "PEBBLE", config["env"], f"seed{config['seed']}")
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
    env = make_benchmark_vec_env(config["env"], n_envs=1, seed=config["seed"], monitor_dir=run_dir)
    model = make_pebble(config, env, verbose=1)
    model.set_logger(configure(run_dir, ["stdout", "csv"]))
    try:
        # log_interval=1: a log row per episode, as B-Pref's train log (SB3's SAC default is every 4th).
        model.learn(config["num_train_steps"], unsuper_flag=1, log_interval=1)
    except KeyboardInterrupt:
        print(f"interrupted at {model.num_timesteps} steps: saving what was learned", file=sys.stderr)
    model.save(os.path.join(run_dir, "model.zip"))
    model.save_replay_buffer(os.path.join(run_dir, "replay_buffer.pkl"))
    model.reward_model.save(os.path.join(run_dir, "reward_model.pt"))
    model.pref_learner.dataset.save(os.path.join(run_dir, "preferences.npz"))
    env.close()
    # The true return of the deterministic policy on a fresh env (not logged into the training monitor).
    eval_env = make_benchmark_vec_env(config["env"], n_envs=1, seed=config["seed"] + 10_000)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=eval_episodes, deterministic=True)
    eval_env.close()
    print(f"saved to {run_dir}; deterministic true return over {eval_episodes} episodes: {mean:.1f} +- {std:.1f}")
    return model


if __name__ == "__main__":
    main()
