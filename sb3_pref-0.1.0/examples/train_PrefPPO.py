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

from collections.abc import Sequence
from typing import Optional

from sb3_pref import PPO_REWARD
from sb3_pref.experiments.bpref import configure_logging, learn_and_save, make_env, make_prefppo, make_run, prefppo_tag
from sb3_pref.experiments.flags import build_parser, parse_args


def main(argv: Optional[Sequence[str]] = None) -> PPO_REWARD:
    """
    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: the trained model
    """
    args = parse_args(
        build_parser("PrefPPO (B-Pref): PPO on a reward model learned from a scripted teacher's preferences."), argv
    )
    run = make_run(args, "PrefPPO", prefppo_tag(args))
    env = make_env(args, run.run_dir)
    model = make_prefppo(args, env, run.tensorboard_log)
    configure_logging(model, run)

    # Also saves reward_model.pt and preferences.npz next to model.zip.
    learn_and_save(model, run, args.total_timesteps, unsuper_flag=1)
    env.close()
    return model


if __name__ == "__main__":
    main()
