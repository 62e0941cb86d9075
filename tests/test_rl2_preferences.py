"""RL2 learning from preferences: the true reward never reaches the policy, in its input or its training rewards."""

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_pref import RewardModel
from sb3_pref.envs.darkroom import DarkRoom
from sb3_pref.envs.trial import TrialWrapper
from sb3_pref.rl2 import RL2
from sb3_pref.rl2.reward_slot import LearnedRewardObservation

EPISODES, LENGTH = 3, 8


def trial_env(n_envs: int = 2) -> DummyVecEnv:
    goals = [(4, 6), (6, 4), (3, 4)]
    return DummyVecEnv(
        [lambda i=i: TrialWrapper(DarkRoom(goals=goals, episode_length=LENGTH), EPISODES, seed=i) for i in range(n_envs)]
    )


class Probe(BaseCallback):
    """Keeps each step's observation, action and true reward, independently of the library."""

    def _on_rollout_start(self) -> None:
        self.obs = [self.model._last_obs.copy()]
        self.actions, self.true, self.dones = [], [], []

    def _on_step(self) -> bool:
        self.obs.append(self.locals["new_obs"].copy())
        self.actions.append(self.locals["actions"].copy())
        self.true.append(self.locals["rewards"].copy())
        self.dones.append(self.locals["dones"].copy())
        return True

    def _on_rollout_end(self) -> None:
        self.buffer_obs = self.model.rollout_buffer.observations.copy()
        self.buffer_rewards = self.model.rollout_buffer.rewards.copy()


def test_rl2_from_preferences_feeds_and_trains_on_the_learned_reward():
    env = trial_env()
    inner_dim = env.get_attr("layout", indices=0)[0].obs.stop
    reward_model = RewardModel(inner_dim, env.action_space, size_segment=4, mb_size=10, hidden_dim=16, seed=0)
    n_steps = 2 * EPISODES * LENGTH
    model = RL2(
        "MlpLstmPolicy",
        env,
        reward_model=reward_model,
        teacher="oracle",
        n_steps=n_steps,
        batch_size=16,
        n_epochs=1,
        num_interaction=n_steps * 2,
        max_feed=20,  # rounds after rollouts 1 and 2: the model is fixed during the probed rollout 3
        re_update=3,
        policy_kwargs={"lstm_hidden_size": 8, "net_arch": [8]},
        seed=0,
    )
    assert isinstance(model.env, LearnedRewardObservation)
    assert model.unsuper_flag == 0  # RL2 does not pretrain unless asked
    probe = Probe()
    model.learn(n_steps * 2 * 3, callback=probe)
    layout = model.env.layout
    learner = model.pref_learner
    assert learner.total_feed == 20 and learner.reward_model.obs_dim == inner_dim

    obs = np.stack(probe.obs)  # (n_steps + 1, n_envs, trial obs)
    actions = np.stack(probe.actions)
    true = np.stack(probe.true)
    features = model._pref_encoder.encode_obs(obs[:-1, ..., layout.obs].reshape(-1, inner_dim))
    encoded_actions = model._pref_encoder.encode_actions(actions.reshape(-1))
    predicted = learner.predict_rewards(features, encoded_actions).reshape(true.shape)
    # Training rewards are the predictions (trials end by termination: no bootstrap is mixed in).
    np.testing.assert_allclose(probe.buffer_rewards, predicted, atol=1e-5)
    # The policy's previous-reward input is the prediction for the previous step, never the true reward;
    # a new trial's first observation has 0 there.
    slot = obs[1:, :, layout.prev_reward_index]
    continuing = ~np.stack(probe.dones)
    np.testing.assert_allclose(slot[continuing], predicted[continuing], atol=1e-5)
    assert (slot[~continuing] == 0).all() and (~continuing).any()
    assert not np.allclose(slot[continuing], true[continuing])
    np.testing.assert_array_equal(probe.buffer_obs[1:, :, layout.prev_reward_index], slot[:-1])
    # Episodes in the segment store are the inner episodes (segments never cross an inner reset).
    np.testing.assert_array_equal(learner.store.recent_episode_lengths, LENGTH)


def test_rl2_true_reward_leaves_the_env_alone():
    env = trial_env()
    model = RL2("MlpLstmPolicy", env, n_steps=24, batch_size=24, n_epochs=1, policy_kwargs={"lstm_hidden_size": 8})
    assert not isinstance(model.env, LearnedRewardObservation) and model.pref_learner is None
    model.learn(48)


def test_rl2_with_preferences_saves_and_loads(tmp_path):
    env = trial_env()
    reward_model = RewardModel(env.get_attr("layout", indices=0)[0].obs.stop, env.action_space, size_segment=4, mb_size=10)
    model = RL2(
        "MlpGruPolicy",
        env,
        reward_model=reward_model,
        teacher="mistake",
        n_steps=24,
        batch_size=24,
        n_epochs=1,
        num_interaction=48,
        max_feed=40,
        re_update=2,
        policy_kwargs={"lstm_hidden_size": 8},
        seed=1,
    )
    model.learn(48 * 2)
    model.save(tmp_path / "rl2")
    loaded = RL2.load(tmp_path / "rl2", env=trial_env())
    assert isinstance(loaded.env, LearnedRewardObservation)
    assert loaded.pref_learner.total_feed == model.pref_learner.total_feed == 20
    np.testing.assert_array_equal(loaded.pref_learner.dataset.labels, model.pref_learner.dataset.labels)
    loaded.learn(48, reset_num_timesteps=False)
    assert loaded.pref_learner.total_feed == 30


def test_adaptation_evaluation_shows_the_policy_the_learned_reward():
    from sb3_pref.rl2.evaluation import evaluate_adaptation

    env = trial_env()
    reward_model = RewardModel(env.get_attr("layout", indices=0)[0].obs.stop, env.action_space, size_segment=4, mb_size=10)
    model = RL2("MlpLstmPolicy", env, reward_model=reward_model, n_steps=24, batch_size=24, n_epochs=1, max_feed=20)
    model.learn(48)
    seen = []
    predict = model.predict

    def spy(obs, *args, **kwargs):
        seen.append(np.array(obs, copy=True))
        return predict(obs, *args, **kwargs)

    model.predict = spy
    result = evaluate_adaptation(model, trial_env(n_envs=1), n_trials=2)
    slots = np.concatenate(seen)[:, model.env.layout.prev_reward_index]
    # tanh-bounded predictions fill the slot; the env's own rewards are 0 or 1 only.
    assert np.isin(slots, [0.0, 1.0]).mean() < 0.5
    assert result is not None


def test_a_reward_model_built_for_the_whole_trial_observation_is_refused_with_a_fix_that_runs():
    import re

    import pytest

    env = trial_env()
    wrong = RewardModel(env.observation_space, env.action_space, size_segment=4, mb_size=10)
    with pytest.raises(ValueError, match="RL2's reward model sees a trial's inner observation") as error:
        RL2("MlpLstmPolicy", env, reward_model=wrong, teacher="oracle", max_feed=10, n_steps=48, batch_size=16)
    # the fix the error names is Python the user can paste: RewardModel(<width>, env.action_space, ...)
    width = int(re.search(r"build it with RewardModel\((\d+), env\.action_space, \.\.\.\)", str(error.value)).group(1))
    assert width == env.get_attr("layout", indices=0)[0].obs.stop != wrong.obs_dim
    right = RewardModel(width, env.action_space, size_segment=4, mb_size=10)
    model = RL2("MlpLstmPolicy", env, reward_model=right, teacher="oracle", max_feed=10, n_steps=48, batch_size=16)
    assert model.pref_learner.reward_model is right
