"""One test per defect of issue 10 (preference core, RL2, save/load, grid), each failing on the code before the fix."""

import numpy as np
import pytest
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_pref import PPO_REWARD, PreferenceLearner, RewardModel, ScriptedTeacher
from sb3_pref.core.entropy import StateEntropyReward
from sb3_pref.core.teachers import BaseTeacher
from sb3_pref.envs.darkroom import DarkRoom
from sb3_pref.envs.trial import TrialWrapper
from sb3_pref.rl2 import RL2

TINY = dict(n_steps=32, batch_size=32, n_epochs=1, policy_kwargs={"net_arch": [16]}, device="cpu")


def small_model(env, **kwargs) -> RewardModel:
    settings = {"size_segment": 10, "mb_size": 8, "hidden_dim": 16, **kwargs}
    return RewardModel(env.observation_space, env.action_space, **settings)


# ------------------------------------------------------------------------------------- item 1
def test_rl2_reward_slot_is_predicted_from_raw_observations_under_vecnormalize():
    goals = [(4, 6), (6, 4)]
    raw_env = DummyVecEnv([lambda i=i: TrialWrapper(DarkRoom(goals=goals, episode_length=8), 2, seed=i) for i in range(2)])
    env = VecNormalize(raw_env, norm_reward=False)
    inner = env.get_attr("layout", indices=0)[0].obs
    model = RL2(
        "MlpLstmPolicy", env, reward_model=RewardModel(inner.stop, env.action_space, size_segment=4, mb_size=8, seed=0),
        n_steps=16, batch_size=16, n_epochs=1, max_feed=16, policy_kwargs={"lstm_hidden_size": 8}, seed=0,
    )  # fmt: skip
    wrapper = model.env
    seen = []
    wrapper.reward_fn = lambda features, actions: (
        seen.append(features.copy()) or model.pref_learner.predict_rewards(features, actions)
    )
    obs = wrapper.reset()
    raw_before = env.get_original_obs()[:, inner].copy()
    normalised_seen = 0
    for _ in range(30):
        actions = np.array([wrapper.action_space.sample() for _ in range(2)])
        obs, _, dones, _ = wrapper.step(actions)
        # The features are the raw observations the actions were taken in, never the normalised ones.
        np.testing.assert_array_equal(seen[-1], raw_before)
        expected = model.pref_learner.predict_rewards(raw_before, model._pref_encoder.encode_actions(actions))
        np.testing.assert_allclose(obs[~dones, wrapper.layout.prev_reward_index], expected[~dones], atol=1e-6)
        raw_before = env.get_original_obs()[:, inner].copy()
        normalised_seen += not np.allclose(env.normalize_obs(env.get_original_obs())[:, inner], raw_before)
    assert normalised_seen > 20  # the normalisation really changed the observations (else the test proves nothing)
    # Raw DarkRoom positions lie in [0, 1]; normalised ones do not.
    assert np.concatenate(seen).min() >= 0 and np.concatenate(seen).max() <= 1
    # Evaluation takes the same path: its wrapper reads the raw observations behind its own VecNormalize.
    eval_env = VecNormalize(DummyVecEnv([lambda: TrialWrapper(DarkRoom(goals=goals, episode_length=8), 2, seed=9)]))
    eval_env.obs_rms = env.obs_rms
    wrapped = model.prepare_eval_env(eval_env)
    wrapped.reset()
    np.testing.assert_array_equal(wrapped._raw(None), eval_env.get_original_obs())
    assert not np.allclose(eval_env.normalize_obs(eval_env.get_original_obs()), eval_env.get_original_obs())


# ------------------------------------------------------------------------------------- item 2
def test_due_round_waits_until_a_stored_piece_is_a_segment_long():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=small_model(env, size_segment=50), max_feed=16, num_interaction=10_000,
        unsuper_flag=0, seed=0, **TINY,
    )  # fmt: skip
    feed = []

    class Feed(BaseCallback):
        def _on_rollout_end(self) -> None:
            feed.append(self.model.pref_learner.total_feed)

        def _on_step(self) -> bool:
            return True

    model.learn(32 * 4, callback=Feed())
    # Rollouts of 32 steps: the first has no 50-step piece, so its due round waits (no budget spent);
    # the second brings one and the round runs.
    assert feed == [0, 8, 8, 8]
    assert model.pref_learner.n_rounds == 1


# ------------------------------------------------------------------------------------- item 4
def test_teacher_and_learner_draw_from_independent_streams():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = small_model(env)
    teacher = ScriptedTeacher.preset("noisy", seed=5)
    learner = PreferenceLearner(reward_model, n_envs=1, teacher=teacher, max_feed=8, seed=5)
    assert not np.array_equal(teacher.rng.random(64), learner.rng.random(64))
    # Reproducible all the same: the same seed gives the same two streams.
    again = ScriptedTeacher.preset("noisy", seed=5)
    np.testing.assert_array_equal(again.rng.random(64), ScriptedTeacher.preset("noisy", seed=5).rng.random(64))
    # Inside an algorithm, the teacher follows the algorithm's seed on its own stream.
    model = PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), teacher="noisy", max_feed=8, seed=5, **TINY)
    learner = model.pref_learner
    assert learner.teacher.rng.bit_generator.state != learner.rng.bit_generator.state


# ------------------------------------------------------------------------------------- item 5 / 8
def test_entropy_reward_scores_the_observation_the_action_was_taken_in():
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=1)
    model = PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), unsuper_step=10**12, max_feed=8, seed=0, **TINY)
    captured = {}

    class Capture(BaseCallback):
        def _on_rollout_end(self) -> None:
            if not captured:
                captured["obs"] = self.model.rollout_buffer.observations.copy()
                captured["rewards"] = self.model.rollout_buffer.rewards.copy()

        def _on_step(self) -> bool:
            return True

    model.learn(64, callback=Capture())
    # unsuper_step=1e12 no longer sizes the buffer (it tried to allocate terabytes).
    assert model.entropy_reward.capacity == PPO_REWARD.entropy_capacity
    obs = captured["obs"].reshape(-1, 3)
    expected = StateEntropyReward(3, capacity=10_000, k=model.entropy_k).compute(obs)
    np.testing.assert_allclose(captured["rewards"].reshape(-1), expected, rtol=1e-5)


# ------------------------------------------------------------------------------------- item 8: load
class CountingTeacher(BaseTeacher):
    """A user's own teacher class: prefers the segment with the larger last reward."""

    def label_pairs(self, seg_0, seg_1) -> np.ndarray:
        labels = (seg_1.rewards[:, -1] > seg_0.rewards[:, -1]).astype(np.float64)
        self._count_labels(labels)
        return labels


@pytest.fixture(scope="module")
def saved_oracle(tmp_path_factory):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=small_model(env), teacher="oracle", max_feed=24, num_interaction=32, seed=0, **TINY
    )
    model.learn(32 * 2, unsuper_flag=0)
    path = tmp_path_factory.mktemp("saved") / "model.zip"
    model.save(path)
    return path, model


def test_teacher_given_to_load_is_honoured_and_keeps_its_settings(saved_oracle):
    path, trained = saved_oracle
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    by_name = PPO_REWARD.load(path, env=env, teacher="mistake")
    teacher = by_name.pref_learner.teacher
    assert teacher.eps_mistake == 0.1  # the preset asked for, not the saved oracle's settings
    assert teacher.counters == trained.pref_learner.teacher.counters  # its progress continues

    mine = ScriptedTeacher(eps_equal=0.3, seed=11)
    before = mine.state_dict()
    loaded = PPO_REWARD.load(path, env=env, teacher=mine)
    assert loaded.pref_learner.teacher is mine
    # Its settings and its generator stay its own; the run's counters continue in it.
    after = mine.state_dict()
    assert after["config"] == before["config"] and after["rng_state"] == before["rng_state"]
    assert mine.counters == trained.pref_learner.teacher.counters

    custom = CountingTeacher()
    loaded = PPO_REWARD.load(path, env=env, teacher=custom)
    loaded.learn(32 * 2, reset_num_timesteps=False)
    # Another kind of teacher than the saved one: none of the saved teacher's state applies to it.
    assert loaded.pref_learner.teacher is custom and custom.counters["asked"] == 8


def test_reward_model_of_another_segment_length_is_refused_at_load(saved_oracle):
    path, _ = saved_oracle
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    with pytest.raises(ValueError, match=r"size_segment: saved 10, given 20"):
        PPO_REWARD.load(path, env=env, reward_model=small_model(env, size_segment=20))
    with pytest.raises(ValueError, match=r"hidden_dim: saved 16, given 32"):
        PPO_REWARD.load(path, env=env, reward_model=small_model(env, hidden_dim=32))
    loaded = PPO_REWARD.load(path, env=env, reward_model=small_model(env))
    assert loaded.pref_learner.total_feed == 16


def test_size_segment_zero_does_not_touch_the_callers_model():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = small_model(env)
    with pytest.raises(ValueError, match="size_segment"):
        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, size_segment=0, **TINY)
    assert reward_model.size_segment == 10


def test_rl2_wrong_dimensions_hint_names_the_inner_observation():
    env = DummyVecEnv([lambda: TrialWrapper(DarkRoom(goals=[(4, 6)], episode_length=8), 2, seed=0)])
    whole = RewardModel(env.observation_space, env.action_space)
    with pytest.raises(ValueError, match=r"inner observation.*layout") as error:
        RL2("MlpLstmPolicy", env, reward_model=whole, n_steps=16, batch_size=16)
    assert "env.observation_space" not in str(error.value)  # what the user already did


# ------------------------------------------------------------------------------------- grid
def test_report_n_counts_only_finite_scores():
    from sb3_pref.experiments.report import _score_markdown
    from sb3_pref.experiments.results import ScoreRow

    scores = {"walker_walk": np.array([1.0, np.nan, 3.0])}
    row = ScoreRow(variant="oracle", budget="1k", per_task=scores, mean={"walker_walk": (2.0, 1.0, 3.0)})
    (line,) = _score_markdown([row], ["walker_walk"], aggregate=False)[2:]
    assert "(n=2)" in line


def test_a_run_whose_checkpoints_all_fail_to_load_raises_and_keeps_them(tmp_path):
    from sb3_pref.experiments.config import RunSpec
    from sb3_pref.experiments.defaults import task_defaults
    from sb3_pref.experiments.training import CHECKPOINT_DIR, _load_newest

    folder = tmp_path / CHECKPOINT_DIR
    folder.mkdir()
    for step in (100, 200):
        (folder / f"ckpt_{step}.zip").write_bytes(b"PK\x03\x04 torn")
    settings = dict(task_defaults("ppo", "walker_walk"), n_envs=1)
    spec = RunSpec(algo="ppo", task="walker_walk", seed=0, hyperparameters=settings)
    with pytest.raises(RuntimeError, match=r"none of the 2 checkpoints .* kept"):
        _load_newest(spec, str(tmp_path), str(tmp_path / "monitor"))
    assert sorted(path.name for path in folder.iterdir()) == ["ckpt_100.zip", "ckpt_200.zip"]


def test_a_model_trained_with_a_custom_teacher_asks_for_it_at_load_and_takes_it(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=small_model(env), teacher=CountingTeacher(), max_feed=24, num_interaction=32,
        unsuper_flag=0, seed=0, **TINY,
    )  # fmt: skip
    model.learn(32 * 2)
    model.save(tmp_path / "model.zip")
    told = r"trained with a teacher of class CountingTeacher.*load\(path, env=env, teacher=CountingTeacher\(...\)\)"
    with pytest.raises(ValueError, match=told):
        PPO_REWARD.load(tmp_path / "model.zip", env=env)
    teacher = CountingTeacher()
    loaded = PPO_REWARD.load(tmp_path / "model.zip", env=env, teacher=teacher)
    # The same kind of teacher as the saved one: its counters continue from the save.
    assert teacher.counters == model.pref_learner.teacher.counters and teacher.counters["asked"] == 16
    loaded.learn(32, reset_num_timesteps=False)
    assert teacher.counters["asked"] == 24 == loaded.pref_learner.total_feed
