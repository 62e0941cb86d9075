"""
Models saved by an earlier release (``tests/data/*_release.zip``, written once by ``tests/data/make_release_models.py``)
load with the current code and continue: labels, budget and reward-model weights survive, and ``learn`` goes on.
"""

import json
import os

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref import PPO_REWARD, SAC_REWARD

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
with open(os.path.join(DATA, "release_models.json")) as _file:
    RECORD = json.load(_file)


def _probe() -> tuple[np.ndarray, np.ndarray]:
    # The same inputs make_release_models.py recorded the predictions on.
    rng = np.random.default_rng(123)
    return rng.normal(size=(8, 3)).astype(np.float32), rng.uniform(-2, 2, size=(8, 1)).astype(np.float32)


def _check_saved_state(model, saved: dict) -> None:
    learner = model.pref_learner
    assert model.num_timesteps == saved["num_timesteps"]
    assert (learner.total_feed, learner.n_rounds, len(learner.dataset)) == (
        saved["total_feed"], saved["n_rounds"], saved["n_labels"],
    )  # fmt: skip
    np.testing.assert_array_equal(learner.dataset.labels[: len(learner.dataset)].reshape(-1), saved["labels"])
    assert model.reward_model.n_updates == saved["reward_model_updates"]
    predictions = model.reward_model.predict_obs_action(*_probe()).reshape(-1)
    np.testing.assert_allclose(predictions, saved["predictions"], rtol=1e-5, atol=1e-6)
    assert model._pretrain_done


@pytest.mark.parametrize(
    "algorithm, file, key, more_steps",
    [(PPO_REWARD, "ppo_reward_release.zip", "ppo_reward", 128), (SAC_REWARD, "sac_reward_release.zip", "sac_reward", 130)],
)
def test_a_model_saved_by_the_release_loads_and_continues(algorithm, file, key, more_steps):
    saved = RECORD[key]
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=1)
    model = algorithm.load(os.path.join(DATA, file), env=env)
    _check_saved_state(model, saved)
    model.learn(more_steps, reset_num_timesteps=False)
    learner = model.pref_learner
    assert model.num_timesteps == saved["num_timesteps"] + more_steps
    # The budget goes on from where it stopped: more labels, the saved ones first and unchanged.
    assert saved["total_feed"] < learner.total_feed <= model.max_feed
    np.testing.assert_array_equal(learner.dataset.labels[: saved["n_labels"]].reshape(-1), saved["labels"])
    assert model.reward_model.n_updates > saved["reward_model_updates"]
