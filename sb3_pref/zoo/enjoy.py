"""``python -m sb3_pref.zoo.enjoy``: RL Zoo's ``enjoy`` with ``ppo_reward`` and ``sac_reward`` registered (same flags)."""

from sb3_pref.zoo import register


def main() -> None:
    """Register our algorithms and run the Zoo's ``enjoy`` (it reads the run's saved config, not ours)."""
    from rl_zoo3.enjoy import enjoy

    register()
    enjoy()


if __name__ == "__main__":
    main()
