"""
The true-reward PPO baseline of B-Pref, with the same environments, normalisation and networks as
``train_PrefPPO.py``. It accepts every flag of that script (the reward-learning and teacher flags
are ignored) so that one grid line can run either, e.g.::

    python examples/train_PPO.py --env quadruped_walk --seed 12345 --batch-size 128 --n-envs 16 --gae-lambda 0.9

``--pretrain 1`` is B-Pref's "PPO + unsupervised pre-training" baseline: ``--unsuper-step`` steps
of state-entropy pretraining, then the true reward. Writes ``args.json``, the monitor files, the
logs, ``model.zip`` and ``vecnormalize.pkl`` into the run folder (``--output-dir`` to change).
"""

from collections.abc import Sequence
from typing import Optional

from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from sb3_pref.experiments.bpref import configure_logging, learn_and_save, make_env, make_ppo, make_run
from sb3_pref.experiments.flags import build_parser, flag, parse_args


def main(argv: Optional[Sequence[str]] = None) -> OnPolicyAlgorithm:
    """
    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: the trained model
    """
    parser = build_parser("B-Pref's PPO baseline on the true reward (the reward-learning flags are ignored).")
    parser.add_argument(
        "--pretrain", type=flag, default=False, help="state-entropy pretraining for --unsuper-step steps first (0/1)"
    )
    args = parse_args(parser, argv, learns_reward=False)
    run = make_run(args, "PPO_unsuper" if args.pretrain else "PPO", f"envs{args.n_envs}_")
    env = make_env(args, run.run_dir)
    model = make_ppo(args, env, pretrain=args.pretrain, tensorboard_log=run.tensorboard_log)
    configure_logging(model, run)

    learn_and_save(model, run, args.total_timesteps)
    env.close()
    return model


if __name__ == "__main__":
    main()
