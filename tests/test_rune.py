"""RUNE's exploration bonus (issue 44): its schedule, what the policy's rewards carry, and its options."""

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.callbacks import BaseCallback

from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.experiments.flags import build_parser


def learner(**kwargs) -> PreferenceLearner:
    return PreferenceLearner(RewardModel(3, 1, size_segment=10, mb_size=10, seed=0), n_envs=1, **kwargs)


def test_beta_decays_geometrically_over_env_steps():
    rune = learner(rune_beta=0.05, rune_decay=1e-5)  # RUNE's PEBBLE setting
    assert rune.rune_weight(0) == 0.05
    assert rune.rune_weight(100_000) == pytest.approx(0.05 * (1 - 1e-5) ** 100_000)
    assert rune.rune_weight(100_000) == pytest.approx(0.0184, abs=1e-4)  # about e^-1 of the start after 1/rho steps
    assert learner(rune_beta=0.01).rune_weight(10**7) == 0.01  # PrefPPO's constant beta


def test_the_bonus_is_beta_times_the_members_std_and_only_when_asked():
    rune, plain = learner(rune_beta=0.3, rune_decay=1e-3), learner()
    obs, actions = np.random.default_rng(0).normal(size=(2, 50, 3)).astype(np.float32), np.zeros((2, 50, 1), np.float32)
    mean, std = rune.reward_model.predict(np.concatenate([obs, actions], axis=-1))
    assert std.min() > 0  # untrained members disagree
    np.testing.assert_array_equal(rune.predict_rewards(obs, actions), mean)  # no step count: the mean only
    np.testing.assert_allclose(rune.predict_rewards(obs, actions, 500), mean + 0.3 * (1 - 1e-3) ** 500 * std, rtol=1e-6)
    np.testing.assert_array_equal(plain.predict_rewards(obs, actions, 500), mean)  # off by default


class FirstPreferenceRollout(BaseCallback):
    """Keeps the rewards of the first rollout trained on learned rewards (after the recorder relabelled it)."""

    def __init__(self) -> None:
        super().__init__()
        self.rewards = None

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.rewards is None and self.model.pref_learner.n_rounds > 0:
            self.rewards = self.model.rollout_buffer.rewards.copy()


def first_preference_rewards(rune_beta: float) -> np.ndarray:
    env = gym.make("Pendulum-v1")
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, reward_model=reward_model, teacher="oracle",
        max_feed=20, num_interaction=64, unsuper_step=64, rune_beta=rune_beta, seed=0, device="cpu",
    )  # fmt: skip
    capture = FirstPreferenceRollout()
    model.learn(192, callback=capture)
    return capture.rewards


def test_the_policys_rewards_carry_the_bonus_in_proportion_to_beta():
    # Until the first rollout on learned rewards the runs are the same (the bonus only enters there), so the
    # difference of their rewards is the bonus alone: positive everywhere, and twice as large at twice the beta.
    plain, half, one = (first_preference_rewards(beta) for beta in (0.0, 0.5, 1.0))
    bonus_half, bonus_one = half - plain, one - plain
    assert bonus_half.min() > 0
    np.testing.assert_allclose(bonus_one, 2 * bonus_half, rtol=1e-4)


def test_the_options_are_checked_saved_and_set_by_flags(tmp_path):
    env = gym.make("Pendulum-v1")
    reward_model = RewardModel(env.observation_space, env.action_space, seed=0)
    with pytest.raises(ValueError, match="rune_beta must be a finite number >= 0"):
        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, rune_beta=-0.1, device="cpu")
    with pytest.raises(ValueError, match=r"rune_decay must be in \[0, 1\)"):
        SAC_REWARD("MlpPolicy", env, reward_model=reward_model, rune_decay=1.0, device="cpu")
    sac = SAC_REWARD("MlpPolicy", env, reward_model=reward_model, rune_beta=0.05, rune_decay=1e-5, device="cpu")
    assert sac.pref_learner.rune_weight(0) == 0.05
    sac.save(tmp_path / "sac")
    loaded = SAC_REWARD.load(tmp_path / "sac", env=env, device="cpu")
    assert (loaded.rune_beta, loaded.rune_decay, loaded.pref_learner.rune_decay) == (0.05, 1e-5, 1e-5)
    args = build_parser("t").parse_args(["--rune-beta", "0.01", "--rune-decay", "0.001"])
    assert (args.rune_beta, args.rune_decay) == (0.01, 0.001)
