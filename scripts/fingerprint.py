"""
Fingerprints of short runs: a refactor that claims to change no behaviour must print the same lines before and after.

    python scripts/fingerprint.py > before.txt
    ... change the code ...
    python scripts/fingerprint.py | diff before.txt -

Each run trains a small PPO_REWARD or SAC_REWARD on Pendulum-v1 from a fixed seed, one torch thread, and hashes
what training produced: the policy's parameters, the reward model's parameters and optimizer state, the labelled
pairs, the rewards the algorithm trained on (the rollout or replay buffer), and the plan.
"""

import hashlib
import json
from typing import Any, Callable

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel


def digest(*arrays: Any) -> str:
    """:return: a short hash of arrays, tensors, state dicts and plain values, in order"""
    hasher = hashlib.sha256()
    for value in arrays:
        if isinstance(value, dict):
            for key in sorted(value):
                hasher.update(str(key).encode())
                hasher.update(digest(value[key]).encode())
        elif isinstance(value, th.Tensor):
            hasher.update(value.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(value, np.ndarray):
            hasher.update(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, (list, tuple)):
            for item in value:
                hasher.update(digest(item).encode())
        else:
            hasher.update(repr(value).encode())
    return hasher.hexdigest()[:16]


def ppo_run(**options: Any) -> Any:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=20, hidden_dim=16, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=60, n_steps=128, batch_size=64,
        n_epochs=2, seed=0, **options,
    )  # fmt: skip
    model.learn(3072)
    return model, model.rollout_buffer.rewards


def sac_run(**options: Any) -> Any:
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=20, hidden_dim=16, seed=0)
    model = SAC_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=40, learning_starts=100,
        batch_size=64, buffer_size=5000, policy_kwargs=dict(net_arch=[32]), seed=0, **options,
    )  # fmt: skip
    model.learn(1500)
    return model, model.replay_buffer.rewards[: model.replay_buffer.pos]


RUNS: dict[str, Callable[[], Any]] = {
    "ppo_reward auto": lambda: ppo_run(),
    "ppo_reward bpref uniform": lambda: ppo_run(feedback_schedule="bpref", unsuper_step=512, num_interaction=512),
    "ppo_reward no pretraining, entropy queries": lambda: ppo_run(unsuper_flag=0, feed_type="entropy"),
    "sac_reward auto": lambda: sac_run(),
    "sac_reward bpref": lambda: sac_run(feedback_schedule="bpref", unsuper_step=300, num_interaction=300),
}


def main() -> None:
    th.set_num_threads(1)
    for name, run in RUNS.items():
        model, rewards = run()
        dataset = model.pref_learner.dataset
        parts = {
            "policy": digest(model.policy.state_dict()),
            "reward_model": digest(model.reward_model.ensemble.state_dict(), model.reward_model.optimizer.state_dict()),
            "labels": digest(dataset.features_0, dataset.features_1, dataset.labels),
            "rewards": digest(rewards),
            "plan": digest(json.dumps(model.feedback_plan.to_dict(), sort_keys=True)),
        }
        print(json.dumps({"run": name, **parts}), flush=True)


if __name__ == "__main__":
    main()
