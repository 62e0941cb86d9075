"""
The README's main job: teach a dm_control agent from preferences of a scripted teacher, never
showing the policy the task's reward, and report what a user wants to see.

    python examples/quickstart.py --env cartpole_balance --total-timesteps 120000 [--compare-ppo]
"""

import argparse
import time
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.envs import make_vec_dmcontrol_env


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="cartpole_balance", help="dm_control task as domain_task")
    parser.add_argument("--total-timesteps", type=int, default=120_000)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--teacher", default="oracle", help="oracle, noisy, myopic, mistake, skip or equal")
    parser.add_argument("--max-feed", type=int, default=400, help="total number of preference queries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare-ppo", action="store_true", help="also train PPO on the true reward, as the bar")
    parser.add_argument("--output", default="runs/quickstart/model", help="where to save the trained model")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. when the output is a log file)")
    return parser.parse_args()


# The PPO settings the demo shares with its bar, PPO on the true reward (--compare-ppo): with them PPO
# balances the pole by about 100k steps on every seed measured (benchmarks/demo/README.md).
PPO_SETTINGS: dict = dict(
    policy="MlpPolicy",
    n_steps=250,
    batch_size=250,
    n_epochs=10,
    learning_rate=3e-4,
    gae_lambda=0.92,
    policy_kwargs={"net_arch": {"pi": [128, 128], "vf": [128, 128]}},
)


def build(env: VecEnv, seed: int, teacher: str = "oracle", max_feed: int = 400, **options: Any) -> PPO_REWARD:
    """
    The demo's PPO_REWARD: the PPO it replaces, plus what a user gives (a reward model, a teacher, a label budget).
    Everything else is the library's default: the schedule of pretraining and query rounds is planned from
    ``learn``'s budget (``model.feedback_plan``); ``options`` override any setting.

    :param env: the training env
    :param seed: seed of the policy, reward model and teacher
    :param teacher: a scripted teacher preset
    :param max_feed: total number of preference queries
    """
    reward_model = RewardModel(env.observation_space, env.action_space)
    settings: dict = dict(PPO_SETTINGS, reward_model=reward_model, teacher=teacher, max_feed=max_feed, seed=seed, verbose=0)
    settings.update(options)
    return PPO_REWARD(env=env, **settings)


def main() -> None:
    args = parse_args()
    th.set_num_threads(2)
    env = make_vec_dmcontrol_env(args.env, n_envs=args.n_envs, seed=args.seed)
    eval_env = make_vec_dmcontrol_env(args.env, n_envs=1, seed=args.seed + 1000)
    model = build(env, args.seed, teacher=args.teacher, max_feed=args.max_feed)
    before, _ = evaluate_policy(model, eval_env, n_eval_episodes=3)
    start = time.time()
    model.learn(args.total_timesteps, progress_bar=not args.no_progress)
    minutes = (time.time() - start) / 60
    after, after_std = evaluate_policy(model, eval_env, n_eval_episodes=5)
    model.save(args.output)

    learner = model.pref_learner
    obs, actions, true = learner.store.last_transitions(20_000)
    correlation = np.corrcoef(learner.predict_rewards(obs, actions), true)[0, 1]
    counters = learner.counters()
    header = f"{args.env}, {args.teacher} teacher, {args.total_timesteps} steps in {minutes:.1f} min"
    print(f"\n== sb3-pref quickstart: {header} ==")
    print(f"true return (never seen by the policy): {before:7.1f} before  ->  {after:7.1f} ± {after_std:.1f} after")
    print(
        f"feedback used: {counters['total_feed']:.0f} of {args.max_feed} queries "
        f"({counters['labeled_feedback']:.0f} labelled, {counters['skipped']:.0f} skipped, {counters['equal']:.0f} equal)"
    )
    print(model.feedback_plan.describe())
    print(f"learned vs true reward: {learner.oracle_agreement(4000):.1%} agreement on fresh segment pairs")
    print(f"                        {correlation:.2f} correlation per step over the last {len(true)} transitions")
    if args.compare_ppo:
        # The bar: PPO with the same settings and seed, trained on the true reward.
        ppo = PPO(env=make_vec_dmcontrol_env(args.env, n_envs=args.n_envs, seed=args.seed), seed=args.seed, **PPO_SETTINGS)
        ppo_before, _ = evaluate_policy(ppo, eval_env, n_eval_episodes=3)
        ppo.learn(args.total_timesteps)
        ppo_after, ppo_std = evaluate_policy(ppo, eval_env, n_eval_episodes=5)
        print(f"PPO on the true reward, same settings:  {ppo_before:7.1f} before  ->  {ppo_after:7.1f} ± {ppo_std:.1f} after")
    print(f"model saved to {args.output}.zip")


if __name__ == "__main__":
    main()
