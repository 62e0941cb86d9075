"""PPO_REWARD as an SB3 citizen: VecNormalize, SubprocVecEnv, callbacks, progress bar, tensorboard, logger keys."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback, EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import SubprocVecEnv, VecNormalize

from sb3_pref import PPO_REWARD, RewardModel


def small_model(env, **kwargs) -> PPO_REWARD:
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, hidden_dim=32)
    settings = dict(
        reward_model=reward_model,
        teacher="oracle",
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        num_interaction=128,
        max_feed=40,
        unsuper_step=128,
        unsuper_n_epochs=1,
        re_update=3,
        policy_kwargs={"net_arch": [16]},
        seed=0,
    )
    settings.update(kwargs)
    return PPO_REWARD("MlpPolicy", env, **settings)


class RawObsProbe(BaseCallback):
    """Keeps VecNormalize's original observations, to compare with what the reward model stored."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: list[np.ndarray] = []
        self.normalized: list[np.ndarray] = []

    def _on_rollout_start(self) -> None:
        self.raw = [self.training_env.get_original_obs()]
        self.normalized = [self.model._last_obs.copy()]

    def _on_step(self) -> bool:
        self.raw.append(self.training_env.get_original_obs())
        self.normalized.append(self.locals["new_obs"].copy())
        return True


@pytest.mark.parametrize("norm_reward, unsuper_flag", [(False, 0), (True, 2)])
def test_vecnormalize_is_not_warned_about_where_it_does_what_it_says(norm_reward, unsuper_flag):
    # without reward normalisation; or with it where the policy trains on the env's reward after pretraining
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_reward=norm_reward)
    model = small_model(env, unsuper_flag=unsuper_flag)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*norm_reward")
        model.learn(128)


def test_reward_model_sees_raw_observations_under_vecnormalize():
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_reward=True)
    model = small_model(env, unsuper_flag=0)
    probe = RawObsProbe()
    # SB3's default norm_reward=True rescales the env's reward, which the policy no longer trains on: the user is told
    with pytest.warns(UserWarning, match=r"norm_reward=True\) rescales the env's reward, which PPO_REWARD does not"):
        model.learn(64 * 2 * 2, callback=probe)
    stored_obs, _, stored_rewards = model.pref_learner.store.last_transitions(128)
    raw = np.stack(probe.raw[:-1]).reshape(-1, 3)
    normalized = np.stack(probe.normalized[:-1]).reshape(-1, 3)
    np.testing.assert_allclose(stored_obs, raw, atol=1e-6)
    assert np.abs(stored_obs - normalized).max() > 0.1  # the check would catch normalised inputs
    # True (unnormalised) rewards reach the teacher: Pendulum's lie in [-16.3, 0].
    assert stored_rewards.min() >= -16.3 and stored_rewards.max() <= 0 and stored_rewards.min() < -1


def test_subproc_vecenv_callbacks_progress_bar_and_logger(tmp_path):
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv), norm_reward=False)
    eval_env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=5), training=False, norm_reward=False)
    model = small_model(env, tensorboard_log=str(tmp_path / "tb"))
    model.set_logger(configure(str(tmp_path / "log"), ["csv", "tensorboard"]))
    fired = {"step": 0, "rollout_end": 0}

    class Count(BaseCallback):
        def _on_step(self) -> bool:
            fired["step"] += 1
            return True

        def _on_rollout_end(self) -> None:
            fired["rollout_end"] += 1

    eval_callback = EvalCallback(eval_env, eval_freq=128, n_eval_episodes=1, log_path=str(tmp_path / "eval"), verbose=0)
    checkpoints = CheckpointCallback(save_freq=128, save_path=str(tmp_path / "ckpt"), name_prefix="pref")
    model.learn(128 * 4, callback=CallbackList([Count(), eval_callback, checkpoints]), progress_bar=True)
    env.close()
    assert fired == {"step": 64 * 4, "rollout_end": 4}
    assert len(eval_callback.evaluations_results) == 2
    saved = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    # save_freq counts callback calls, one per VecEnv step of 2 envs.
    assert saved == ["pref_256_steps.zip", "pref_512_steps.zip"]
    loaded = PPO_REWARD.load(tmp_path / "ckpt" / "pref_512_steps.zip")
    # The last checkpoint is written at the rollout's last step, before that rollout's query round.
    assert (loaded.pref_learner.total_feed, model.pref_learner.total_feed) == (30, 40)
    header = (tmp_path / "log" / "progress.csv").read_text().splitlines()[0].split(",")
    for key in ("reward/total_feed", "reward/labeled_feedback", "reward/true_pref_accuracy", "reward/pred_true_corr"):
        assert key in header
    assert "rollout/ep_rew_mean" in header


def test_reward_model_none_trains_on_true_reward():
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = PPO_REWARD("MlpPolicy", env, n_steps=64, batch_size=64, unsuper_flag=0, seed=0)
    model.learn(256)
    assert model.pref_learner is None and model.num_timesteps == 256


def test_discrete_actions_are_one_hot_in_the_store():
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = small_model(env, unsuper_flag=0)
    model.learn(128 * 2)
    _, actions, _ = model.pref_learner.store.last_transitions(100)
    assert actions.shape == (100, 2)
    np.testing.assert_array_equal(actions.sum(1), np.ones(100))


class TinyImageEnv(gym.Env):
    observation_space = spaces.Box(0, 255, (36, 36, 3), np.uint8)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, False, False, {}


def test_image_observations_are_refused_at_construction():
    env = make_vec_env(TinyImageEnv, n_envs=1)
    with pytest.raises(ValueError, match="observation_space is an image"):
        PPO_REWARD("CnnPolicy", env, reward_model=RewardModel(36 * 36 * 3, spaces.Discrete(2)), n_steps=64)
    # Without a reward model or pretraining, image envs train on the true reward as with PPO.
    model = PPO_REWARD("CnnPolicy", env, n_steps=64, batch_size=64, n_epochs=1, unsuper_flag=0)
    model.learn(64)
    assert model.num_timesteps == 64


@pytest.mark.parametrize("name", ["walker_walk", "metaworld_button-press-topdown-v2"])
def test_ppo_reward_runs_on_benchmark_envs(name):
    from sb3_pref.envs import make_benchmark_vec_env

    env = make_benchmark_vec_env(name, n_envs=2, seed=0)
    model = small_model(env, n_steps=100, batch_size=100, num_interaction=200, unsuper_step=200, size_segment=25)
    model.learn(200 * 3)
    learner = model.pref_learner
    assert learner.total_feed == 30 and learner.reward_model.obs_dim == env.observation_space.shape[0]
    assert learner.dataset.features_0.shape[1:] == (25, learner.reward_model.input_dim)
