"""
Does a PEBBLE run's learned reward rank the states that matter? On walker_stand PEBBLE ends at 0.65 of SAC although
its reward model agrees with the oracle on 93-96% of the last queried pairs (benchmarks/pebble/README.md). This rolls out
SAC's final policy on the true reward (it stands tall), each PEBBLE run's own final policy and a random policy, and
compares each run's predicted reward (the ensemble mean, features as the run saw them) with the true reward, state by
state: its mean per band of true reward, and the rank correlation among upright states. It also says how many of the
run's labelled steps came from the top of the true reward.

    MUJOCO_GL=osmesa python -m benchmarks pebble reward-ranking --sac runs/pebble_quality/sac/walker_stand/seed0 \
        runs/pebble_quality/pebble/walker_stand/oracle/1000x100/seed* runs/pebble_walker_early/pebble/.../seed*
"""

import argparse
import os

import numpy as np
from scipy.stats import spearmanr
from stable_baselines3 import SAC
from stable_baselines3.common.base_class import BaseAlgorithm

from benchmarks.study import Option, probe, shared
from sb3_pref import SAC_REWARD, RewardModel
from sb3_pref.envs import make_dmcontrol_env

BANDS = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0001])


def rollout(env_name: str, policy: "BaseAlgorithm | None", episodes: int, seed: int) -> tuple[np.ndarray, ...]:
    """:return: observations, actions and true rewards of ``episodes`` deterministic episodes (random if no policy)"""
    env = make_dmcontrol_env(env_name, seed=seed)
    rng = np.random.default_rng(seed)
    observations, actions, rewards = [], [], []
    for _ in range(episodes):
        obs, _ = env.reset()
        done = False
        while not done:
            if policy is None:
                action = rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32)
            else:
                action = policy.predict(obs, deterministic=True)[0]
            observations.append(obs)
            actions.append(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
    env.close()
    return np.array(observations), np.array(actions), np.array(rewards)


@probe(
    "reward-ranking",
    "whether PEBBLE runs' learned rewards rank the states of SAC's, a random and their own policies like the true one",
    Option("runs", "PEBBLE run folders (model.zip, reward_model.pt, preferences.npz)", nargs="+"),
    Option("--sac", "a SAC run folder on the true reward (model.zip)", required=True),
    shared("env", default="walker_stand"),
    Option("--episodes", "episodes per policy", type=int, default=2),
)
def reward_ranking(args: argparse.Namespace) -> None:
    """
    One row per PEBBLE run: its labelled steps from the top of the true reward, its predicted reward per band of true
    reward, and the rank correlation among upright states.

    :param args: the options
    """

    states = [
        rollout(args.env, SAC.load(os.path.join(args.sac, "model.zip"), device="cpu"), args.episodes, 100),
        rollout(args.env, None, args.episodes, 101),
    ]
    states += [
        rollout(args.env, SAC_REWARD.load(os.path.join(run, "model.zip"), device="cpu"), args.episodes, 102)
        for run in args.runs
    ]
    obs, actions, true = (np.concatenate(part) for part in zip(*states))
    counts = np.histogram(true, BANDS)[0]
    print(
        f"{args.env}: {len(true)} states from SAC's, a random and {len(args.runs)} PEBBLE policies, "
        f"{args.episodes} episodes each"
    )
    bands = [f"{lo:.1f}-{min(hi, 1.0):.1f}" for lo, hi in zip(BANDS[:-1], BANDS[1:])]
    print(
        f"| run | labelled steps with true reward > 0.5 | {' | '.join(f'r_hat at {b}' for b in bands)} "
        "| Spearman, true >= 0.3 |"
    )
    print("|---" * (len(bands) + 3) + "|")
    print(f"| states per band | | {' | '.join(str(c) for c in counts)} | |")
    upright = true >= 0.3
    for run in args.runs:
        model = RewardModel.load(os.path.join(run, "reward_model.pt"), device="cpu")
        predicted = model.predict_obs_action(obs, actions)
        labelled = np.load(os.path.join(run, "preferences.npz"))
        top = np.mean(np.concatenate([labelled["rewards_0"], labelled["rewards_1"]]) > 0.5)
        means = [
            predicted[(true >= lo) & (true < hi)].mean() if c else float("nan")
            for lo, hi, c in zip(BANDS[:-1], BANDS[1:], counts)
        ]
        name = os.path.relpath(run, os.path.commonpath([*args.runs, args.sac]))
        rho = spearmanr(true[upright], predicted[upright])[0]
        print(f"| {name} | {top:.3f} | {' | '.join(f'{m:+.2f}' for m in means)} | {rho:.2f} |", flush=True)
