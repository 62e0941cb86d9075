"""``python -m sb3_pref.zoo.train``: RL Zoo's ``train`` with ``ppo_reward`` and ``sac_reward`` registered (same flags)."""

import sys

from sb3_pref.zoo import register, with_default_config


def main() -> None:
    """Register our algorithms, add the shipped hyperparameters when no ``-conf`` is given, run the Zoo."""
    from rl_zoo3.train import train

    register()
    sys.argv = [sys.argv[0], *with_default_config(sys.argv[1:])]
    train()


if __name__ == "__main__":
    main()
