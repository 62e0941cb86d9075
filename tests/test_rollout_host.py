"""The recorder reaches the algorithm only through the declared ``RolloutHost`` interface (``sb3_pref/common/rollout.py``)."""

import inspect
import re

import pytest
from stable_baselines3.common.env_util import make_vec_env

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
