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

from common_args import build_parser, configure_logging, flag, learn_and_save, make_env, make_run, parse_args, ppo_kwargs
from stable_baselines3 import PPO
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.ppo import MlpPolicy

from sb3_pref import PPO_REWARD


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
    env = make_env(args, run)

    if args.pretrain:
        # No reward model: PPO_REWARD only adds the pretraining phase, then trains on the env's reward.
        model = PPO_REWARD(
            MlpPolicy,
            env,
            **ppo_kwargs(args, run),
            unsuper_step=args.unsuper_step,
            unsuper_n_epochs=args.unsuper_n_epochs,
            max_ep_len=args.max_ep_len,
            unsuper_flag=2,
        )
    else:
        model = PPO(MlpPolicy, env, **ppo_kwargs(args, run))
    configure_logging(model, run)

    learn_and_save(model, run, args.total_timesteps)
    env.close()
    return model


if __name__ == "__main__":
    main()
