"""
PrefPPO on a B-Pref task: PPO trained on a reward model learned from a scripted teacher's
preferences, after state-entropy pretraining. Accepts B-Pref's ``train_PrefPPO.py`` flags, so its
grid scripts run unchanged, e.g.::

    python examples/train_PrefPPO.py --env walker_walk --seed 12345 --re-feed-type 1 \\
        --re-num-interaction 16000 --teacher mistake --re-max-feed 1000 --re-batch 100

Writes, in the run folder (``--output-dir`` to change): ``args.json``, the monitor files, the
logs, and at the end ``model.zip`` (policy, reward model, labels and learner state: continue with
``PPO_REWARD.load``), ``vecnormalize.pkl``, ``reward_model.pt`` and ``preferences.npz`` (the
labelled pairs, readable with ``numpy.load`` or ``PreferenceDataset.load``).
"""

import os
from collections.abc import Sequence
from typing import Optional

from common_args import build_parser, configure_logging, learn_and_save, make_env, make_run, parse_args, ppo_kwargs
from stable_baselines3.ppo import MlpPolicy

from sb3_pref import PPO_REWARD, RewardModel


def main(argv: Optional[Sequence[str]] = None) -> PPO_REWARD:
    """
    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: the trained model
    """
    args = parse_args(
        build_parser("PrefPPO (B-Pref): PPO on a reward model learned from a scripted teacher's preferences."), argv
    )
    tag = (
        f"{args.teacher_name}/feed{args.re_max_feed}x{args.re_batch}_inter{args.re_num_interaction}"
        f"_{args.re_feed_type}_seg{args.re_segment}_envs{args.n_envs}_"
    )
    run = make_run(args, "PrefPPO", tag)
    env = make_env(args, run)

    reward_model = RewardModel(
        env.observation_space,
        env.action_space,
        size_segment=args.re_segment,
        activation=args.re_act,
        lr=args.re_lr,
        mb_size=args.re_batch,
        teacher_beta=args.teacher_beta,
        teacher_gamma=args.teacher_gamma,
        teacher_eps_mistake=args.teacher_eps_mistake,
        teacher_eps_skip=args.teacher_eps_skip,
        teacher_eps_equal=args.teacher_eps_equal,
        large_batch=args.re_large_batch,
    )
    model = PPO_REWARD(
        reward_model,
        MlpPolicy,
        env,
        **ppo_kwargs(args, run),
        num_interaction=args.re_num_interaction,
        num_feed=args.re_num_feed,
        feed_type=args.re_feed_type,
        re_update=args.re_update,
        metaworld_flag=args.metaworld,
        max_feed=args.re_max_feed,
        unsuper_step=args.unsuper_step,
        unsuper_n_epochs=args.unsuper_n_epochs,
        size_segment=args.re_segment,
        max_ep_len=args.max_ep_len,
    )
    configure_logging(model, run)

    learn_and_save(model, run, args.total_timesteps, unsuper_flag=1)
    model.reward_model.save(os.path.join(run.output_dir, "reward_model.pt"))
    model.pref_learner.dataset.save(os.path.join(run.output_dir, "preferences.npz"))
    env.close()
    return model


if __name__ == "__main__":
    main()
