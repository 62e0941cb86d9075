"""
Migrating an SB3 PPO script to preference-based RL: the same training written with ``PPO`` and
with ``PPO_REWARD``. Only the statement that builds the model differs (compare ``make_ppo`` and
``make_pref_ppo``); the env, the hyperparameters, ``learn`` and the evaluation (``evaluate_policy``
calls ``predict``) stay as they are.

``PPO_REWARD`` never trains on Pendulum's reward: a scripted oracle teacher compares pairs of
50-step segments, a reward model learns from its answers, and the policy is trained on the
model's predictions. The true return printed at the end is measured on the env's own reward.

    python examples/migrate_from_ppo.py                # both, one to two minutes each on one core
    python examples/migrate_from_ppo.py --algo pref --timesteps 20000
"""

import argparse
import time
from typing import Callable

from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref import PPO_REWARD, RewardModel

ENV_ID = "Pendulum-v1"

# RL Zoo's tuned PPO settings for Pendulum: both models get exactly these.
HYPERPARAMS = dict(
    n_steps=1024,
    gae_lambda=0.95,
    gamma=0.9,
    n_epochs=10,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
    use_sde=True,
    sde_sample_freq=4,
    verbose=0,
)


def make_ppo(env: VecEnv, seed: int) -> OnPolicyAlgorithm:
    """The original script: PPO on the env's reward."""
    return PPO("MlpPolicy", env, seed=seed, **HYPERPARAMS)


def make_pref_ppo(env: VecEnv, seed: int) -> OnPolicyAlgorithm:
    """The migrated script: one statement changed (500 labels, 50 per round every 8192 steps, after pretraining)."""
    return PPO_REWARD(
        "MlpPolicy",
        env,
        seed=seed,
        **HYPERPARAMS,
        reward_model=RewardModel(env.observation_space, env.action_space, size_segment=50, mb_size=50),
        teacher="oracle",
        max_feed=500,
        num_interaction=8192,
        unsuper_step=4096,
        re_update=50,
    )


def train_and_evaluate(make_model: Callable[[VecEnv, int], OnPolicyAlgorithm], timesteps: int, seed: int) -> float:
    """
    Everything a user's script already does, unchanged by the migration.

    :param make_model: ``make_ppo`` or ``make_pref_ppo``
    :param timesteps: env steps to train for
    :param seed: seed of the envs and of the model
    :return: mean true return over 10 evaluation episodes
    """
    env = make_vec_env(ENV_ID, n_envs=4, seed=seed)
    model = make_model(env, seed)
    model.learn(total_timesteps=timesteps)
    eval_env = make_vec_env(ENV_ID, n_envs=1, seed=seed + 1000)
    mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    env.close()
    eval_env.close()
    return float(mean_return)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--algo", choices=["both", "ppo", "pref"], default="both", help="which version to run")
    parser.add_argument("--timesteps", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.timesteps < 1:
        parser.error(f"--timesteps must be >= 1, got {args.timesteps}")

    versions = {"ppo": ("PPO", make_ppo), "pref": ("PPO_REWARD", make_pref_ppo)}
    chosen = ["ppo", "pref"] if args.algo == "both" else [args.algo]
    print(f"{ENV_ID}, {args.timesteps} steps, seed {args.seed} (a random policy returns about -1200)")
    for key in chosen:
        name, make_model = versions[key]
        start = time.perf_counter()
        mean_return = train_and_evaluate(make_model, args.timesteps, args.seed)
        print(f"{name:<10} true return {mean_return:8.1f}   ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
