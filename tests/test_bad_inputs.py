"""
A careful (and a hostile) user's bad inputs: each gets a clear error that names the problem, before
training where it can be known then. Add a row when a new argument or file format appears.
"""

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_pref import PPO_REWARD, PreferenceDataset, RewardModel, ScriptedTeacher
from sb3_pref.common.callbacks import AtomicCheckpointCallback
from sb3_pref.experiments.config import ConfigError, load_config

TINY = dict(n_steps=32, batch_size=32, n_epochs=1, policy_kwargs={"net_arch": [16]}, device="cpu")


def pendulum(n_envs: int = 1):
    return make_vec_env("Pendulum-v1", n_envs=n_envs, seed=0)


def small_model(env, **kwargs) -> RewardModel:
    settings = {"size_segment": 10, "mb_size": 8, "hidden_dim": 16, **kwargs}
    return RewardModel(env.observation_space, env.action_space, **settings)


# ------------------------------------------------------------------ algorithm arguments
ALGORITHM_CASES = [
    # (argument, value, exception, what the message must contain)
    ("max_feed", "100", TypeError, r"max_feed must be an integer, got '100'"),
    ("max_feed", -1, ValueError, r"max_feed must be >= 0"),
    ("max_feed", 10.7, ValueError, r"max_feed must be a whole number, got 10.7"),
    ("num_interaction", "500", TypeError, r"num_interaction must be an integer, got '500'"),
    ("num_interaction", 0, ValueError, r"num_interaction must be >= 1"),
    ("num_interaction", float("nan"), ValueError, r"num_interaction must be a whole number"),
    ("re_update", 0, ValueError, r"re_update must be >= 1"),
    ("re_update", True, TypeError, r"re_update must be an integer, got True"),
    ("unsuper_step", -5, ValueError, r"unsuper_step must be >= 0"),
    ("unsuper_n_epochs", 0, ValueError, r"unsuper_n_epochs must be >= 1"),
    ("size_segment", 0, ValueError, r"size_segment must be >= 1"),
    ("size_segment", 2.5, ValueError, r"size_segment must be a whole number"),
    ("size_segment", 201, ValueError, r"size_segment=201 is longer than the env's episodes \(spec.max_episode_steps=200\)"),
    ("max_ep_len", 0, ValueError, r"max_ep_len must be >= 1"),
    ("segment_capacity", 0, ValueError, r"segment_capacity must be >= 1"),
    ("segment_capacity", 5, ValueError, r"segment_capacity=5 keeps 5 steps per env .* fewer than size_segment=10"),
    ("entropy_k", 0, ValueError, r"entropy_k must be >= 1"),
    ("feed_type", 9, ValueError, r"feed_type"),
    ("feed_type", "random", ValueError, r"random"),
    ("teacher", "mistakes", ValueError, r"teacher='mistakes' is not a teacher preset: choose one of .*mistake"),
    ("teacher", 3, TypeError, r"teacher must be a BaseTeacher, a preset name"),
    ("unsuper_flag", 3, ValueError, r"unsuper_flag must be 0 \(no pretraining\), 1 or 2, got 3"),
    ("unsuper_flag", True, ValueError, r"unsuper_flag must be 0"),
    ("normalize_reward", "yes", TypeError, r"normalize_reward must be True or False, got 'yes'"),
    ("anneal_reward_lr", 2, TypeError, r"anneal_reward_lr must be True or False"),
]


@pytest.mark.parametrize(("argument", "value", "error", "message"), ALGORITHM_CASES)
def test_algorithm_argument_is_refused_before_training(argument, value, error, message):
    env = pendulum()
    reward_model = small_model(env)
    weights = [p.detach().clone() for p in reward_model.ensemble.parameters()]
    with pytest.raises(error, match=message):
        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, **{argument: value}, **TINY)
    # Nothing of the caller's reward model was touched by the refused call.
    assert reward_model.size_segment == 10 and reward_model.n_updates == 0
    assert all(np.array_equal(a, b.detach()) for a, b in zip(weights, reward_model.ensemble.parameters()))


def test_a_reward_model_of_another_type_is_refused():
    with pytest.raises(ValueError, match=r"reward_model must be a sb3_pref.RewardModel or None, got str"):
        PPO_REWARD("MlpPolicy", pendulum(), reward_model="model", **TINY)


def test_size_segment_longer_than_max_ep_len_is_refused():
    env = pendulum()
    with pytest.raises(ValueError, match=r"size_segment=20 is longer than max_ep_len=10"):
        PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), size_segment=20, max_ep_len=10, **TINY)


def test_learn_refuses_an_unknown_unsuper_flag():
    env = pendulum()
    model = PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), **TINY)
    with pytest.raises(ValueError, match=r"unsuper_flag must be 0 \(no pretraining\), 1 or 2, got 5"):
        model.learn(32, unsuper_flag=5)
    assert model.num_timesteps == 0


# ------------------------------------------------------------------ reward-model arguments
REWARD_MODEL_CASES = [
    ("ensemble_size", 0, ValueError, r"ensemble_size must be >= 1"),
    ("ensemble_size", 2.5, ValueError, r"ensemble_size must be a whole number"),
    ("hidden_dim", "16", TypeError, r"hidden_dim must be an integer, got '16'"),
    ("lr", -1e-3, ValueError, r"lr must be a finite number > 0"),
    ("lr", float("nan"), ValueError, r"lr must be a finite number > 0"),
    ("lr", "3e-4", TypeError, r"lr must be a number, got '3e-4'"),
    ("size_segment", 0, ValueError, r"size_segment must be >= 1"),
    ("mb_size", 0, ValueError, r"mb_size must be >= 1"),
    ("activation", "softmax", ValueError, r"activation='softmax' is not one of"),
    ("label_margin", 0.5, ValueError, r"label_margin must be in \[0, 0.5\)"),
    ("train_dtype", "float16", ValueError, r"train_dtype must be one of \['auto', 'float32', 'bfloat16'\]"),
    ("teacher", "oracle", TypeError, r"teacher must be a BaseTeacher or None, got a str"),
    ("seed", -1, ValueError, r"seed must be >= 0"),
]


@pytest.mark.parametrize(("argument", "value", "error", "message"), REWARD_MODEL_CASES)
def test_reward_model_argument_is_refused(argument, value, error, message):
    env = pendulum()
    with pytest.raises(error, match=message):
        small_model(env, **{argument: value})


# ------------------------------------------------------------------ teachers and checkpoints
TEACHER_CASES = [
    ({"eps_mistake": "0.1"}, TypeError, r"eps_mistake must be a number, got '0.1'"),
    ({"eps_mistake": 1.5}, ValueError, r"eps_mistake must be a probability in \[0, 1\], got 1.5"),
    ({"eps_skip": float("nan")}, ValueError, r"eps_skip must be a probability in \[0, 1\], got nan"),
    ({"eps_equal": True}, TypeError, r"eps_equal must be a number, got True"),
    ({"beta": "1"}, TypeError, r"beta must be a number, got '1'"),
    ({"beta": float("inf")}, ValueError, r"beta must be a finite float"),
    ({"gamma": 0}, ValueError, r"gamma must be in \(0, 1\]"),
    ({"seed": "3"}, ValueError, r"seed must be an int >= 0 or None, got '3'"),
    ({"seed": -1}, ValueError, r"seed must be an int >= 0 or None, got -1"),
    ({"seed": 2.5}, ValueError, r"seed must be an int >= 0 or None, got 2.5"),
]


@pytest.mark.parametrize(("settings", "error", "message"), TEACHER_CASES)
def test_teacher_argument_is_refused(settings, error, message):
    with pytest.raises(error, match=message):
        ScriptedTeacher(**settings)


def test_unknown_teacher_preset_names_the_presets():
    with pytest.raises(ValueError, match=r"name='orcale' is not a teacher preset: choose one of oracle, noisy"):
        ScriptedTeacher.preset("orcale")


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"save_freq": 0, "save_path": "x"}, ValueError, r"save_freq must be >= 1"),
        ({"save_freq": "1000", "save_path": "x"}, TypeError, r"save_freq must be an integer"),
        ({"save_freq": 10, "save_path": 3}, TypeError, r"save_path must be a folder path, got a int"),
        ({"save_freq": 10, "save_path": "x", "keep": 0}, ValueError, r"keep must be >= 1"),
    ],
)
def test_checkpoint_callback_argument_is_refused(settings, error, message):
    with pytest.raises(error, match=message):
        AtomicCheckpointCallback(**settings)


# ------------------------------------------------------------------ spaces
class SpaceEnv(gym.Env):
    """A real (tiny) env with the given spaces: observations and rewards drawn from its own generator."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, episode_length: int = 20) -> None:
        self.observation_space, self.action_space = observation_space, action_space
        self.episode_length = episode_length
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self._t += 1
        reward = float(np.sum(np.asarray(action, dtype=np.float64)))
        return self.observation_space.sample(), reward, False, self._t >= self.episode_length, {}


BOX = spaces.Box(-1, 1, (3,), np.float32)
UNSUPPORTED_SPACES = [
    ("image observation", spaces.Box(0, 255, (32, 32, 3), np.uint8), spaces.Discrete(3), r"image space"),
    ("Tuple observation", spaces.Tuple((BOX, spaces.Discrete(2))), spaces.Discrete(3), r"Tuple is not supported"),
    ("Tuple action", BOX, spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))), r"Tuple"),
]


@pytest.mark.parametrize(
    ("what", "obs_space", "act_space", "message"), UNSUPPORTED_SPACES, ids=[c[0] for c in UNSUPPORTED_SPACES]
)
def test_unsupported_spaces_are_refused_by_name(what, obs_space, act_space, message):
    with pytest.raises((ValueError, AssertionError, NotImplementedError), match=message):
        env = DummyVecEnv([lambda: SpaceEnv(obs_space, act_space)])
        RewardModel(env.observation_space, env.action_space, size_segment=5, mb_size=4, hidden_dim=8)


SUPPORTED_SPACES = [
    ("MultiDiscrete observation", spaces.MultiDiscrete([3, 4]), spaces.Discrete(3), 7),
    ("MultiBinary observation", spaces.MultiBinary(4), spaces.Discrete(2), 4),
    ("MultiDiscrete action", BOX, spaces.MultiDiscrete([2, 3]), 3),
    ("MultiBinary action", BOX, spaces.MultiBinary(3), 3),
]


@pytest.mark.parametrize(("what", "obs_space", "act_space", "obs_dim"), SUPPORTED_SPACES, ids=[c[0] for c in SUPPORTED_SPACES])
def test_multi_discrete_and_multi_binary_spaces_learn(what, obs_space, act_space, obs_dim):
    env = DummyVecEnv([lambda: SpaceEnv(obs_space, act_space)])
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=5, mb_size=4, hidden_dim=8, seed=0)
    assert reward_model.obs_dim == obs_dim  # one-hot per MultiDiscrete dimension, one column per bit
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=reward_model, max_feed=8, num_interaction=32, unsuper_flag=0, seed=0, **TINY
    )
    model.learn(96)
    assert model.pref_learner.total_feed == 8
    assert np.isfinite(model.rollout_buffer.rewards).all()


# ------------------------------------------------------------------ env behaviour mid-run
class NanRewardAt(gym.Wrapper):
    def __init__(self, env: gym.Env, step: int) -> None:
        super().__init__(env)
        self.nan_step, self.t = step, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        return obs, (float("nan") if self.t == self.nan_step else reward), terminated, truncated, info


@pytest.mark.parametrize("phase", ["preferences", "pretraining"])
def test_nan_reward_mid_run_names_env_and_step(phase):
    env = DummyVecEnv([lambda: gym.make("Pendulum-v1"), lambda: NanRewardAt(gym.make("Pendulum-v1"), 45)])
    flag = 0 if phase == "preferences" else 1
    model = PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), unsuper_flag=flag, unsuper_step=64, seed=0, **TINY)
    with pytest.raises(
        ValueError, match=r"rewards contains nan \(true reward of env 1 at its step 44, step 12 of this batch\)"
    ):
        model.learn(128)


class OneStep(gym.Env):
    observation_space = BOX
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), float(action), True, False, {}


def test_one_step_episodes_with_a_spec_are_refused_before_training():
    env = make_vec_env("CartPole-v1", n_envs=1, env_kwargs={"max_episode_steps": 1}, seed=0)
    with pytest.raises(ValueError, match=r"size_segment=10 is longer than the env's episodes \(spec.max_episode_steps=1\)"):
        PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), **TINY)


def test_one_step_episodes_without_a_spec_wait_and_warn_instead_of_hanging():
    env = DummyVecEnv([OneStep])
    model = PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), unsuper_flag=0, num_interaction=1, seed=0, **TINY)
    with pytest.warns(UserWarning, match=r"found no episode piece of size_segment=10 steps \(the longest stored has 1\)"):
        model.learn(32 * 10)
    assert model.pref_learner.total_feed == 0 and model.num_timesteps == 320  # no crash, no budget spent
    # the agreement diagnostic has no segment to measure on either: NaN, as training waits, not an error after the run
    assert np.isnan(model.pref_learner.oracle_agreement(100))


def test_size_segment_one_learns_on_one_step_episodes():
    env = DummyVecEnv([OneStep])
    model = PPO_REWARD("MlpPolicy", env, reward_model=small_model(env, size_segment=1), max_feed=8, unsuper_flag=0, **TINY)
    model.learn(64)
    assert model.pref_learner.total_feed == 8


# ------------------------------------------------------------------ files
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    env = pendulum()
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=small_model(env), max_feed=16, num_interaction=32, unsuper_flag=0, seed=0, **TINY
    )
    model.learn(96)
    assert len(model.pref_learner.dataset) == 16
    folder = tmp_path_factory.mktemp("files")
    model.save(folder / "model.zip")
    model.pref_learner.dataset.save(folder / "labels.npz")
    return folder


def test_load_with_an_env_of_other_spaces_is_refused(saved):
    other = make_vec_env("MountainCarContinuous-v0", n_envs=1, seed=0)
    with pytest.raises(ValueError, match=r"Observation spaces do not match"):
        PPO_REWARD.load(saved / "model.zip", env=other)


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "not a zip", "empty"])
def test_damaged_model_zip_names_the_file(saved, tmp_path, damage):
    data = (saved / "model.zip").read_bytes()
    damaged = {
        "truncated": data[: len(data) // 2],
        "zeroed": data[:200] + bytes(len(data) - 400) + data[-200:],
        "not a zip": b"hello, not a model",
        "empty": b"",
    }[damage]
    path = tmp_path / "model.zip"
    path.write_bytes(damaged)
    with pytest.raises(ValueError, match=rf"path='{path}'.*(truncated or corrupted|damaged member|lacks)"):
        PPO_REWARD.load(path, env=pendulum())


def test_a_file_of_another_algorithm_names_the_class_to_load_it_with(saved):
    from sb3_pref import SAC_REWARD

    # SB3 itself fails deep inside with "'ActorCriticPolicy' object has no attribute 'actor'"
    with pytest.raises(
        ValueError, match=r"saved by PPO_REWARD .*ActorCriticPolicy.*not by SAC_REWARD: load it with PPO_REWARD"
    ):
        SAC_REWARD.load(saved / "model.zip", env=pendulum())
    assert PPO_REWARD.load(saved / "model.zip", env=pendulum()).pref_learner is not None


def test_a_raw_dm_control_env_names_the_ids_that_build_it():
    suite = pytest.importorskip("dm_control.suite")
    raw = suite.load("cartpole", "balance")
    with pytest.raises(
        TypeError, match=r"raw dm_control Environment.*make_vec_dmcontrol_env\('cartpole_balance'.*cartpole_swingup"
    ):
        PPO_REWARD("MlpPolicy", raw, reward_model=None)


def test_missing_model_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"does not exist: pass the .zip written by model.save"):
        PPO_REWARD.load(tmp_path / "nothing.zip")


def _rewrite(source, target, **changes) -> None:
    with np.load(source) as archive:
        state = {name: archive[name] for name in archive.files}
    state.update(changes)
    np.savez(target, **{name: value for name, value in state.items() if value is not None})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("label 7.0", r"labels must lie in \[0, 1\].*7.0"),
        ("label nan", r"labels must lie in \[0, 1\].*nan"),
        ("short labels", r"inconsistent lengths"),
        ("unrelated npz", r"not a PreferenceDataset state: it lacks"),
        ("truncated", r"not a readable .npz file"),
    ],
)
def test_damaged_label_file_is_refused_with_the_reason(saved, tmp_path, change, message):
    source, target = saved / "labels.npz", tmp_path / "labels.npz"
    with np.load(source) as archive:
        labels = archive["labels"].copy()
    if change == "label 7.0":
        labels[0] = 7.0
        _rewrite(source, target, labels=labels)
    elif change == "label nan":
        labels[1] = np.nan
        _rewrite(source, target, labels=labels)
    elif change == "short labels":
        _rewrite(source, target, labels=labels[:-3])
    elif change == "unrelated npz":
        np.savez(target, x=np.arange(3))
    else:
        data = source.read_bytes()
        target.write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=message):
        PreferenceDataset.load(target)
    assert len(PreferenceDataset.load(source)) == 16  # the intact file still loads


# ------------------------------------------------------------------ grid configs
GRID = {"algorithms": ["ppo"], "tasks": {"walker_walk": {}}, "seeds": 1}
CONFIG_CASES = [
    ("unknown top-level key", {"sedes": 2}, r"sedes: unknown config key"),
    (
        "unknown hyperparameter",
        {"hyperparameters": {"learnig_rate": 1e-3}},
        r"hyperparameters.learnig_rate: unknown hyperparameter",
    ),
    ("unknown algorithm", {"algorithms": ["ppo2"]}, r"algorithms.ppo2: unknown algorithm"),
    ("unknown task", {"tasks": {"walker_run_fast": {}}}, r"tasks.walker_run_fast: unknown task"),
    ("seeds 0", {"seeds": 0}, r"seeds: 0 runs nothing; give a count >= 1"),
    ("seeds -2", {"seeds": -2}, r"seeds: -2 runs nothing"),
    ("seeds missing", {"seeds": None}, r"seeds: required"),
    ("duplicate seeds", {"seeds": [1, 1]}, r"seeds: \[1, 1\] has duplicates"),
    ("checkpoint_every 0", {"checkpoint_every": 0}, r"checkpoint_every: expected env steps >= 1"),
]


@pytest.mark.parametrize(("what", "change", "message"), CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_grid_config_mistakes_are_named(what, change, message):
    with pytest.raises(ConfigError, match=message):
        load_config({**GRID, **change})


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("grid.yaml", "algorithms: [ppo\ntasks: {walker_walk: {}}\nseeds: 1\n", r"grid.yaml: not valid YAML"),
        ("grid.json", '{"algorithms": ["ppo"], "seeds": 1,}', r"grid.json: not valid JSON"),
    ],
)
def test_grid_config_syntax_error_is_one_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)
    assert os.path.exists(path)


# ------------------------------------------------------------------ RL2 (the same checks, through RecurrentPPO)
@pytest.mark.parametrize(
    ("argument", "value", "error", "message"),
    [
        ("num_interaction", "500", TypeError, r"num_interaction must be an integer, got '500'"),
        ("max_feed", 10.7, ValueError, r"max_feed must be a whole number, got 10.7"),
        ("teacher", "mistakes", ValueError, r"teacher='mistakes' is not a teacher preset"),
        ("size_segment", 0, ValueError, r"size_segment must be >= 1"),
    ],
)
def test_rl2_argument_is_refused_before_training(argument, value, error, message):
    from sb3_pref.envs.darkroom import DarkRoom
    from sb3_pref.envs.trial import TrialWrapper
    from sb3_pref.rl2 import RL2

    env = DummyVecEnv([lambda: TrialWrapper(DarkRoom(goals=[(4, 6)], episode_length=8), 2, seed=0)])
    inner = env.get_attr("layout", indices=0)[0].obs
    reward_model = RewardModel(inner.stop - inner.start, env.action_space, size_segment=4, mb_size=4, hidden_dim=8)
    with pytest.raises(error, match=message):
        RL2("MlpLstmPolicy", env, reward_model=reward_model, n_steps=16, batch_size=16, **{argument: value})
