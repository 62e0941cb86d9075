"""PPO_REWARD on real gymnasium envs: what reaches the rollout buffer, when queries happen, the budget, save/load."""

import warnings

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.ppo import MlpPolicy

from sb3_pref import PPO_REWARD, PrefPPO, RewardModel
from sb3_pref.common.controller import PHASE_PREFERENCE, PHASE_PRETRAIN
from sb3_pref.common.onpolicy import PreferenceRewardMixin
from sb3_pref.core.learner import PreferenceLearner

SMALL_NET = {"net_arch": [32, 32]}


def pendulum(n_envs: int = 1, seed: int = 0):
    return make_vec_env("Pendulum-v1", n_envs=n_envs, seed=seed)


def reward_model_for(env, **kwargs) -> RewardModel:
    kwargs = {"size_segment": 10, "mb_size": 20, "hidden_dim": 32, **kwargs}
    return RewardModel(env.observation_space, env.action_space, **kwargs)


def make_model(env, reward_model=None, **kwargs) -> PPO_REWARD:
    settings = dict(
        n_steps=64,
        batch_size=64,
        n_epochs=2,
        num_interaction=128,
        max_feed=100,
        unsuper_step=128,
        unsuper_n_epochs=3,
        re_update=5,
        policy_kwargs=SMALL_NET,
        seed=0,
        teacher="oracle",
    )
    settings.update(kwargs)
    return PPO_REWARD("MlpPolicy", env, reward_model=reward_model or reward_model_for(env), **settings)


class RolloutProbe(BaseCallback):
    """Records, independently of the library, what each step saw, and checks the buffer at rollout end."""

    def __init__(self) -> None:
        super().__init__()
        self.checked_rollouts = 0
        self.truncations = 0
        self.max_reward_error = 0.0
        self.max_advantage_error = 0.0
        self.phases: list[int] = []

    def _on_rollout_start(self) -> None:
        self.raw_obs, self.actions, self.bootstrap = [self.model._last_obs.copy()], [], []

    def _on_step(self) -> bool:
        self.actions.append(self.locals["clipped_actions"].copy())
        self.raw_obs.append(self.locals["new_obs"].copy())
        bootstrap = np.zeros(self.training_env.num_envs, dtype=np.float32)
        for env_index, info in enumerate(self.locals["infos"]):
            if self.locals["dones"][env_index] and info.get("TimeLimit.truncated"):
                terminal = self.model.policy.obs_to_tensor(info["terminal_observation"])[0]
                with th.no_grad():
                    bootstrap[env_index] = self.model.gamma * self.model.policy.predict_values(terminal).item()
                self.truncations += 1
        self.bootstrap.append(bootstrap)
        return True

    def _on_rollout_end(self) -> None:
        model, buffer = self.model, self.model.rollout_buffer
        self.phases.append(model._rollout_phase)
        if model._rollout_phase != PHASE_PREFERENCE:
            return
        obs = np.stack(self.raw_obs[:-1])
        actions = np.stack(self.actions)
        features = np.concatenate([obs, actions], axis=-1).astype(np.float32)
        expected = model.reward_model.predict(features)[0] + np.stack(self.bootstrap)
        self.max_reward_error = max(self.max_reward_error, float(np.abs(buffer.rewards - expected).max()))
        # GAE from scratch on the buffer's rewards must give the buffer's advantages.
        with th.no_grad():
            last_values = model.policy.predict_values(obs_as_tensor(model._last_obs, model.device)).numpy().ravel()
        dones = self.locals["dones"].astype(np.float32)
        advantages = np.zeros_like(buffer.rewards)
        last_gae = 0.0
        for step in reversed(range(buffer.buffer_size)):
            if step == buffer.buffer_size - 1:
                next_non_terminal, next_values = 1.0 - dones, last_values
            else:
                next_non_terminal, next_values = 1.0 - buffer.episode_starts[step + 1], buffer.values[step + 1]
            delta = buffer.rewards[step] + model.gamma * next_values * next_non_terminal - buffer.values[step]
            last_gae = delta + model.gamma * model.gae_lambda * next_non_terminal * last_gae
            advantages[step] = last_gae
        self.max_advantage_error = max(self.max_advantage_error, float(np.abs(advantages - buffer.advantages).max()))
        assert np.allclose(buffer.returns, buffer.advantages + buffer.values, atol=1e-5)
        self.checked_rollouts += 1


def test_buffer_rewards_are_predictions_with_the_bootstrap_applied_once():
    env = pendulum(n_envs=2)
    # n_steps > 200 so every rollout crosses Pendulum's 200-step time limit.
    model = make_model(env, n_steps=256, batch_size=128, num_interaction=512, unsuper_flag=0)
    probe = RolloutProbe()
    model.learn(256 * 2 * 3, callback=probe)
    assert probe.checked_rollouts == 3
    assert probe.truncations >= 6
    assert probe.max_reward_error < 1e-4
    assert probe.max_advantage_error < 1e-3


class A2C_REWARD(PreferenceRewardMixin, A2C):
    """The preference mixin on another on-policy algorithm, with no code of its own."""


def test_the_mixin_serves_a2c_unchanged(tmp_path):
    env = pendulum(n_envs=2)
    reward_model = reward_model_for(env, mb_size=10)
    # A2C's rollouts of 2 x 250 steps cross Pendulum's time limit, so the bootstrap check bites here too.
    model = A2C_REWARD(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", n_steps=250, num_interaction=500,
        unsuper_step=500, max_feed=30, re_update=5, policy_kwargs=SMALL_NET, seed=0,
    )  # fmt: skip
    log, probe = QueryLog(), RolloutProbe()
    model.learn(500 * 5, callback=[log, probe])
    assert probe.phases == [PHASE_PRETRAIN] + [PHASE_PREFERENCE] * 4
    # The uniform round as pretraining ends, a round after each 500 steps, then the budget is spent.
    assert [total for _, total in log.feed_by_rollout] == [0, 20, 30, 30, 30]
    assert probe.checked_rollouts == 4 and probe.truncations >= 8
    assert probe.max_reward_error < 1e-4 and probe.max_advantage_error < 1e-3
    model.save(tmp_path / "a2c")
    loaded = A2C_REWARD.load(tmp_path / "a2c", env=env)
    assert loaded.pref_learner.total_feed == 30 == len(loaded.pref_learner.dataset)
    features = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.reward_model.predict(features)[0], model.reward_model.predict(features)[0])


class QueryLog(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.feed_by_rollout: list[tuple[int, int]] = []

    def _on_rollout_end(self) -> None:
        self.feed_by_rollout.append((self.model.num_timesteps, self.model.pref_learner.total_feed))

    def _on_step(self) -> bool:
        return True


def test_query_schedule_budget_and_pretraining():
    env = pendulum(n_envs=2)
    # Rollouts of 128 env steps: 2 pretraining rollouts, then a round every 2 rollouts.
    model = make_model(env, num_interaction=256, unsuper_step=256, max_feed=70, reward_model=reward_model_for(env, mb_size=30))
    log, probe = QueryLog(), RolloutProbe()
    value_before = model.policy.value_net.weight.detach().clone()
    n_updates_before = model._n_updates
    model.learn(128 * 9, callback=[log, probe])
    assert probe.phases == [PHASE_PRETRAIN] * 2 + [PHASE_PREFERENCE] * 7
    # The uniform round at the end of pretraining, then rounds after rollouts 4 and 6; the budget is clamped.
    feed = [total for _, total in log.feed_by_rollout]
    assert feed == [0, 0, 30, 60, 60, 70, 70, 70, 70]
    assert model.pref_learner.total_feed == 70 == len(model.pref_learner.dataset)
    # Pretraining updates use unsuper_n_epochs (3), later ones n_epochs (2).
    assert model._n_updates - n_updates_before == 2 * 3 + 7 * 2
    assert not th.equal(value_before, model.policy.value_net.weight)
    assert model.entropy_reward is None  # the pretraining buffer is released


def test_pretraining_rewards_are_state_entropy():
    env = pendulum(n_envs=1)
    model = make_model(env, unsuper_step=10_000, n_steps=128)
    seen: list[np.ndarray] = []

    class Check(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            seen.append(self.model.rollout_buffer.rewards.copy())

    model.learn(128 * 2, callback=Check())
    entropy = model.entropy_reward
    stored = entropy.buffer[: entropy.size].numpy().astype(np.float64)
    distances = np.linalg.norm(stored[:, None] - stored[None], axis=-1)
    kth = np.sort(distances, axis=1)[:, 5]  # the 5th neighbour, the point itself excluded
    # Step 199 ends Pendulum's 200-step episode by truncation: its reward also holds SB3's bootstrap.
    last = np.delete(seen[-1].ravel(), 199 - 128)
    expected = np.delete(kth[-128:], 199 - 128) / entropy.distance_std
    np.testing.assert_allclose(last, expected, rtol=1e-4, atol=1e-5)
    assert (last > 0).all()


# The learned-reward test's PPO_REWARD settings; benchmarks/quality_grid/schedule_quality.py measures on exactly these.
PENDULUM_TRACKING_KWARGS = dict(
    teacher="oracle",
    n_steps=256,
    batch_size=256,
    n_epochs=2,
    num_interaction=2048,
    max_feed=384,
    unsuper_step=2048,
    unsuper_n_epochs=2,
    re_update=50,
    feed_type="disagreement",
    policy_kwargs=SMALL_NET,
)


def test_learned_reward_tracks_true_reward_on_pendulum():
    env = pendulum(n_envs=4)
    model = PPO_REWARD(
        "MlpPolicy",
        env,
        reward_model=reward_model_for(env, size_segment=25, mb_size=64),  # the default network and schedule
        seed=0,
        **PENDULUM_TRACKING_KWARGS,
    )
    model.learn(10_240)
    assert model.pref_learner.total_feed == 320
    obs, actions, true = model.pref_learner.store.last_transitions(4000)
    predicted = model.pref_learner.predict_rewards(obs, actions)
    assert np.corrcoef(predicted, true)[0, 1] > 0.8
    assert model.pref_learner.oracle_agreement(2000) > 0.85


def test_save_load_continues_budget_labels_and_phase(tmp_path):
    env = pendulum(n_envs=2)
    model = make_model(
        env, num_interaction=256, unsuper_step=256, max_feed=100, reward_model=reward_model_for(env, mb_size=20)
    )
    model.learn(128 * 4)
    learner = model.pref_learner
    assert learner.total_feed == 40
    labels_before = learner.dataset.labels.copy()
    features_before = learner.dataset.features_0.copy()
    predictions_before = model.reward_model.predict(features_before)[0]
    model.save(tmp_path / "model")

    loaded = PPO_REWARD.load(tmp_path / "model", env=env)
    restored = loaded.pref_learner
    assert restored.total_feed == 40 and restored.n_rounds == learner.n_rounds
    np.testing.assert_array_equal(restored.dataset.labels, labels_before)
    np.testing.assert_array_equal(restored.dataset.features_0, features_before)
    np.testing.assert_array_equal(loaded.reward_model.predict(features_before)[0], predictions_before)
    assert len(restored.store) == len(learner.store)
    assert restored.teacher.counters == learner.teacher.counters
    assert loaded._pretrain_done and loaded._num_interactions == model._num_interactions
    assert restored.rng.bit_generator.state == learner.rng.bit_generator.state
    # A teacher can be handed to load() by preset name; its saved state (counters, generator) is restored.
    by_name = PPO_REWARD.load(tmp_path / "model", env=env, teacher="oracle")
    assert by_name.pref_learner.teacher.counters == learner.teacher.counters

    log = QueryLog()
    loaded.learn(128 * 4, callback=log, reset_num_timesteps=False)
    assert loaded.num_timesteps == 128 * 8
    # No second pretraining, no budget reset: rounds continue every 2 rollouts from 40.
    assert [feed for _, feed in log.feed_by_rollout] == [40, 60, 60, 80]
    np.testing.assert_array_equal(restored.dataset.labels[:40], labels_before)


def test_same_seed_same_run():
    def run() -> PPO_REWARD:
        env = pendulum(n_envs=2, seed=3)
        model = make_model(env, teacher="mistake", seed=3, reward_model=reward_model_for(env))
        model.learn(128 * 5)
        return model

    first, second = run(), run()
    np.testing.assert_array_equal(first.pref_learner.dataset.labels, second.pref_learner.dataset.labels)
    np.testing.assert_array_equal(first.pref_learner.dataset.features_1, second.pref_learner.dataset.features_1)
    for a, b in zip(first.reward_model.ensemble.parameters(), second.reward_model.ensemble.parameters()):
        assert th.equal(a, b)


def test_seed_call_shape_and_true_reward_mode():
    env = pendulum(n_envs=2)
    reward_model = RewardModel(
        env.observation_space.shape[0],
        env.action_space.shape[0],
        size_segment=10,
        activation="tanh",
        lr=3e-4,
        mb_size=10,
        teacher_beta=-1,
        teacher_gamma=1,
        teacher_eps_mistake=0,
        teacher_eps_skip=0,
        teacher_eps_equal=0,
        large_batch=10,
    )
    model = PPO_REWARD(
        reward_model,
        MlpPolicy,
        env,
        tensorboard_log=None,
        seed=1,
        learning_rate=3e-4,
        batch_size=64,
        n_steps=64,
        ent_coef=0.0,
        policy_kwargs=SMALL_NET,
        use_sde=True,
        sde_sample_freq=4,
        gae_lambda=0.92,
        clip_range=0.4,
        n_epochs=2,
        num_interaction=128,
        num_feed=1,
        feed_type=1,
        re_update=5,
        metaworld_flag=False,
        max_feed=40,
        unsuper_step=128,
        unsuper_n_epochs=2,
        size_segment=10,
        max_ep_len=200,
        verbose=0,
    )
    assert PrefPPO is PPO_REWARD and isinstance(model, PPO)
    model.learn(total_timesteps=128 * 4, unsuper_flag=1)
    # One pretraining rollout, its closing round, then a round after each 128-step rollout.
    assert model.pref_learner.total_feed == 40

    # unsuper_flag=2: pretraining, then the env's reward untouched.
    true_model = make_model(env, reward_model=reward_model_for(env))
    probe = RolloutProbe()
    true_model.learn(128 * 3, callback=probe, unsuper_flag=2)
    assert probe.phases == [PHASE_PRETRAIN, 2, 2]
    assert true_model.pref_learner.total_feed == 0


def test_bad_input_is_refused_before_training():
    env = pendulum()
    cartpole_model = RewardModel(4, 1)
    with pytest.raises(ValueError, match="obs_dim=4"):
        make_model(env, reward_model=cartpole_model)
    with pytest.raises(ValueError, match="max_feed"):
        make_model(env, max_feed=10, reward_model=reward_model_for(env, mb_size=20))
    with pytest.raises(ValueError, match="feed_type"):
        make_model(env, feed_type="most-fun")
    with pytest.raises(ValueError, match="unsuper_flag"):
        make_model(env, unsuper_flag=3)
    with pytest.raises(ValueError, match="size_segment"):
        make_model(env, size_segment=300, max_ep_len=200)
    with pytest.raises(ValueError, match="observation_space"):
        RewardModel(spaces.Box(0, 255, (64, 64, 3), np.uint8), spaces.Discrete(2))
    assert isinstance(make_model(env).pref_learner, PreferenceLearner)


def test_learn_warns_when_pretraining_is_a_large_share_of_the_run():
    env = pendulum()
    model = make_model(env, unsuper_step=128)
    with pytest.warns(UserWarning, match=r"pretraining takes 128 of this run's 192 env steps \(67%\).*unsuper_step="):
        model.learn(192)
    # Pretraining is over: a further call has nothing to warn about, nor has a run where it is a small share.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.learn(64, reset_num_timesteps=False)
        make_model(pendulum(), unsuper_step=64, max_feed=60).learn(320)  # (a budget that fits: no warning about it)


class PolicyAtRolloutStart(BaseCallback):
    """A copy of the policy's weights and the optimizer's state size as each rollout starts (after the phase change)."""

    def __init__(self) -> None:
        super().__init__()
        self.weights: list[dict[str, th.Tensor]] = []
        self.optimizer_states: list[int] = []

    def _on_rollout_start(self) -> None:
        self.weights.append({name: value.clone() for name, value in self.model.policy.state_dict().items()})
        self.optimizer_states.append(len(self.model.policy.optimizer.state))

    def _on_step(self) -> bool:
        return True


def same_weights(first: dict[str, th.Tensor], second: dict[str, th.Tensor]) -> bool:
    return first.keys() == second.keys() and all(th.equal(first[name], second[name]) for name in first)


@pytest.mark.filterwarnings("ignore:state-entropy pretraining takes")
@pytest.mark.parametrize("save_midway", [False, True])
def test_unsuper_reset_policy_starts_the_task_from_the_untrained_policy(tmp_path, save_midway):
    env = pendulum()
    model = make_model(env, unsuper_step=128, unsuper_reset_policy=True)
    initial = {name: value.clone() for name, value in model.policy.state_dict().items()}
    probe = PolicyAtRolloutStart()
    if save_midway:  # the policy to go back to travels in the saved file
        model.learn(64)
        model.save(tmp_path / "model")
        model = PPO_REWARD.load(tmp_path / "model", env=env)
        model.learn(64 * 3, callback=probe, reset_num_timesteps=False)
        probe.weights.insert(0, initial)
    else:
        model.learn(64 * 4, callback=probe)
    assert not same_weights(probe.weights[1], initial)  # pretraining trained it ...
    assert same_weights(probe.weights[2], initial)  # ... and it is back, with a fresh optimizer, for the task
    assert probe.optimizer_states[-2] == 0 and model._policy_before_pretraining is None
    assert model.pref_learner.total_feed > 0  # the first labels still came from the pretraining data
    assert not same_weights(probe.weights[3], initial)

    # Without the option the task starts from the pretrained policy (B-Pref).
    kept = make_model(pendulum(), unsuper_step=128)
    probe = PolicyAtRolloutStart()
    kept.learn(64 * 3, callback=probe)
    assert not same_weights(probe.weights[2], initial)
    assert same_weights(probe.weights[0], initial)  # same seed, same initial policy: the comparison is fair
    with pytest.raises(TypeError, match="unsuper_reset_policy"):
        make_model(pendulum(), unsuper_reset_policy="yes")
