"""The recorder reaches the algorithm only through the declared ``RolloutHost`` interface (``sb3_pref/common/rollout.py``)."""

import inspect
import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel
from sb3_pref.common.rollout import RolloutHost, RolloutRecorder


@pytest.mark.parametrize("algorithm", [PPO_REWARD, SAC_REWARD])
def test_the_algorithms_implement_the_interface_the_recorder_uses(algorithm):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, hidden_dim=16)
    model = algorithm("MlpPolicy", env, reward_model=reward_model, seed=0)
    assert isinstance(model, RolloutHost)
    obs = env.reset()
    features = model._reward_features(obs)
    assert features.shape == (1, 3) and model._reward_actions(env.action_space.sample()[None]).shape == (1, 1)


def test_the_recorder_uses_no_other_member_of_the_algorithm():
    source = inspect.getsource(RolloutRecorder)
    declared = {name for name in dir(RolloutHost) if not name.startswith("__")} | set(RolloutHost.__annotations__)
    used = set(re.findall(r"\bhost\.(\w+)", source))
    assert used and used <= declared, used - declared
    # SB3's self.model appears once: where the property hands it out as the declared interface.
    assert "self.model." not in source and source.count("cast(RolloutHost, self.model)") == 1


class CountingEnv(gym.Env):
    """Observes its own step count and id (a Dict), and keeps the MultiDiscrete actions it was given, by step."""

    observation_space = spaces.Dict({"pos": spaces.Box(-np.inf, np.inf, (2,), np.float32), "tag": spaces.Discrete(3)})
    action_space = spaces.MultiDiscrete([2, 3])

    def __init__(self, env_id: int) -> None:
        self.env_id, self.t, self.actions = env_id, 0, {}

    def _obs(self) -> dict:
        return {"pos": np.array([self.t, self.env_id], dtype=np.float32), "tag": self.t % 3}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.actions[self.t] = np.array(action)
        self.t += 1
        return self._obs(), 0.0, False, False, {}


def test_each_recorded_row_pairs_a_state_with_the_action_taken_in_it():
    # Two envs, a Dict observation and MultiDiscrete actions: the recorder encodes a whole rollout at its end, and
    # every row must still be the state an env was in with the action that env then took (encoded as one-hot).
    envs = [CountingEnv(0), CountingEnv(1)]
    vec_env = DummyVecEnv([lambda env=env: env for env in envs])
    reward_model = RewardModel(vec_env.observation_space, vec_env.action_space, size_segment=5, mb_size=4, hidden_dim=8)
    model = PPO_REWARD(
        "MultiInputPolicy", vec_env, reward_model=reward_model, max_feed=8, num_interaction=32, unsuper_flag=0,
        n_steps=32, batch_size=32, n_epochs=1, seed=0,
    )  # fmt: skip
    model.learn(128)
    obs, actions, _ = model.pref_learner.store.last_transitions(128)
    assert obs.shape == (128, 5) and actions.shape == (128, 5)
    steps, ids = obs[:, 0].astype(int), obs[:, 1].astype(int)
    assert sorted(zip(ids, steps)) == [(i, t) for i in (0, 1) for t in range(64)]  # each (env, step) once
    np.testing.assert_array_equal(obs[:, 2:], np.eye(3)[steps % 3])
    taken = np.array([envs[i].actions[t] for i, t in zip(ids, steps)])
    np.testing.assert_array_equal(actions, np.concatenate([np.eye(2)[taken[:, 0]], np.eye(3)[taken[:, 1]]], axis=1))
    assert len({tuple(row) for row in taken}) > 1  # the policy took more than one action: the check can fail
