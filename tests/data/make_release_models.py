"""
Writes the small models that ``tests/test_load_release.py`` loads: a ``PPO_REWARD`` and a ``SAC_REWARD``
saved by the code of the commit named in ``release_models.json``, after at least one labelling round.

Run it once, from the repository root, with the release's code (``PYTHONPATH=. python tests/data/make_release_models.py``);
the files it writes are committed and never regenerated: they stand for models users saved with that release.
"""

import json
import os
import subprocess

import numpy as np
from stable_baselines3.common.env_util import make_vec_env

import sb3_pref
from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_KWARGS = dict(size_segment=10, mb_size=10, hidden_dim=16, ensemble_size=2)


def probe_inputs() -> tuple[np.ndarray, np.ndarray]:
    """Fixed Pendulum observations and actions on which the saved reward model's predictions are recorded."""
    rng = np.random.default_rng(123)
    return rng.normal(size=(8, 3)).astype(np.float32), rng.uniform(-2, 2, size=(8, 1)).astype(np.float32)


def summary(model) -> dict:
    """What the loading test checks: the preference state and the reward model's predictions on the probe."""
    learner = model.pref_learner
    obs, actions = probe_inputs()
    return {
        "num_timesteps": int(model.num_timesteps),
        "total_feed": int(learner.total_feed),
        "n_rounds": int(learner.n_rounds),
        "n_labels": len(learner.dataset),
        "labels": learner.dataset.labels[: len(learner.dataset)].reshape(-1).tolist(),
        "reward_model_updates": int(model.reward_model.n_updates),
        "predictions": model.reward_model.predict_obs_action(obs, actions).reshape(-1).tolist(),
    }


def main() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    ppo = PPO_REWARD(
        "MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space, **MODEL_KWARGS),
        teacher="oracle", n_steps=64, batch_size=64, n_epochs=1, policy_kwargs={"net_arch": [16]}, seed=0,
        num_interaction=64, max_feed=100, unsuper_step=64, unsuper_n_epochs=1, re_update=3,
    )  # fmt: skip
    ppo.learn(64 * 4)
    ppo.save(os.path.join(HERE, "ppo_reward_release.zip"))

    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    sac = SAC_REWARD(
        "MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space, **MODEL_KWARGS),
        teacher="oracle", batch_size=32, policy_kwargs={"net_arch": [16, 16]}, learning_starts=40, buffer_size=2000,
        seed=0, max_feed=40, num_interaction=60, unsuper_step=60, re_update=3, reset_update=5,
    )  # fmt: skip
    sac.learn(200)
    sac.save(os.path.join(HERE, "sac_reward_release.zip"))

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    record = {"sb3_pref": sb3_pref.__version__, "commit": commit, "ppo_reward": summary(ppo), "sac_reward": summary(sac)}
    with open(os.path.join(HERE, "release_models.json"), "w") as file:
        json.dump(record, file, indent=1)


if __name__ == "__main__":
    main()
