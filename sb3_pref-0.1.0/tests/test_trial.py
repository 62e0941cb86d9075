import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.env_checker import check_env

from sb3_pref.envs.darkroom import DarkRoom, darkroom_trials, split_goals
from sb3_pref.envs.trial import (
    EPISODE_INDEX_KEY,
    EPISODE_OPTIMAL_KEY,
    EPISODE_RETURN_KEY,
    EPISODE_SUCCESS_KEY,
    TASK_KEY,
    TaskSampler,
    TrialWrapper,
)

UP, DOWN, LEFT, RIGHT, NOOP = range(5)


def small_trial(episodes: int = 3, length: int = 5, goal=(4, 5)) -> TrialWrapper:
    return TrialWrapper(DarkRoom(goals=[goal], episode_length=length), episodes, seed=0)


def test_layout_and_space_discrete():
    env = small_trial()
    layout = env.layout
    assert (layout.obs, layout.prev_action, layout.prev_reward, layout.prev_done) == (
        slice(0, 2),
        slice(2, 7),
        slice(7, 8),
        slice(8, 9),
    )
    assert layout.size == 9 and layout.prev_reward_index == 7
    assert env.observation_space.shape == (9,) and env.observation_space.dtype == np.float32
    assert env.observation_space.low[7] == -np.inf and env.observation_space.high[8] == 1.0
    check_env(env, skip_render_check=True)


class _BoxActionEnv(gym.Env):
    """Actions in [1, 3]^2, which excludes the all-zero 'no previous action'."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    action_space = spaces.Box(1.0, 3.0, shape=(2,), dtype=np.float32)

    def sample_task(self, rng):
        return float(rng.uniform())

    def set_task(self, task):
        self.task = task

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.full(3, self.task, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(3, self.task, dtype=np.float32), float(action.sum()), False, self.t >= 2, {}


def test_layout_box_actions():
    env = TrialWrapper(_BoxActionEnv(), 2, seed=0)
    assert env.layout.prev_action == slice(3, 5) and env.layout.size == 7
    np.testing.assert_array_equal(env.observation_space.low[3:5], [0.0, 0.0])  # widened to hold "no action"
    np.testing.assert_array_equal(env.observation_space.high[3:5], [3.0, 3.0])
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs[3:], [0.0, 0.0, 0.0, 0.0])
    obs, reward, *_ = env.step(np.array([1.5, 2.5], dtype=np.float32))
    np.testing.assert_allclose(obs[3:], [1.5, 2.5, 4.0, 0.0])
    assert reward == 4.0


def test_done_semantics_and_info():
    env = small_trial(episodes=3, length=5, goal=(4, 5))
    obs, info = env.reset(seed=1)
    np.testing.assert_array_equal(obs[2:], np.zeros(7))  # no previous action, reward, done
    assert info[EPISODE_INDEX_KEY] == 0 and info[TASK_KEY] == (4, 5)
    actions = [UP, NOOP, DOWN, DOWN, NOOP] * 3  # rewards 1, 1, 0, 0, 0 per inner episode
    history = []
    for step, action in enumerate(actions):
        obs, reward, terminated, truncated, info = env.step(action)
        history.append((obs, reward, terminated, truncated, info))
        assert not truncated
        assert terminated == (step == 14)
        assert info[EPISODE_INDEX_KEY] == step // 5
        inner_end = step % 5 == 4
        assert (EPISODE_RETURN_KEY in info) == inner_end
        assert obs[8] == float(inner_end)  # previous inner done
        assert obs[7] == reward
        assert obs[2 + action] == 1.0 and obs[2:7].sum() == 1.0  # one-hot previous action
        if inner_end:
            assert info[EPISODE_RETURN_KEY] == 2.0
            assert info[EPISODE_SUCCESS_KEY] is True
            assert info[EPISODE_OPTIMAL_KEY] == 5.0  # episode_length + 1 - distance
            assert info[TASK_KEY] == (4, 5)
            if step < 14:
                np.testing.assert_allclose(obs[:2], [0.5, 0.5])  # inner env reset by the wrapper: back at the centre
    assert history[-1][4]["is_success"] is True
    assert [h[1] for h in history] == [1.0, 1.0, 0.0, 0.0, 0.0] * 3


def test_success_unknown_is_not_reported():
    env = TrialWrapper(_BoxActionEnv(), 1, seed=0)
    env.reset()
    env.step(np.ones(2, dtype=np.float32))
    *_, info = env.step(np.ones(2, dtype=np.float32))
    assert info[EPISODE_RETURN_KEY] == 4.0
    assert EPISODE_SUCCESS_KEY not in info and "is_success" not in info and EPISODE_OPTIMAL_KEY not in info


def test_new_task_each_trial_and_seeding():
    env = darkroom_trials("all", episodes_per_trial=1, seed=0)
    env.reset(seed=123)
    tasks = [env.task] + [env.reset()[1][TASK_KEY] for _ in range(29)]
    assert len(set(tasks)) > 15  # 30 draws over 80 goals
    env.reset(seed=123)
    again = [env.task] + [env.reset()[1][TASK_KEY] for _ in range(29)]
    assert again == tasks
    _, info = env.reset(options={"task": (0, 8)})
    assert info[TASK_KEY] == (0, 8) and env.unwrapped.goal == (0, 8)


def test_task_sampling_respects_split():
    train_goals, test_goals = split_goals(seed=7)
    for split, allowed in [("train", set(train_goals)), ("test", set(test_goals))]:
        env = darkroom_trials(split, episodes_per_trial=1, split_seed=7, seed=0)
        seen = {env.reset()[1][TASK_KEY] for _ in range(400)}
        assert seen <= allowed
        assert len(seen) >= 0.9 * len(allowed)  # draws cover the split, not a fixed subset


def test_sampler_protocol_and_errors():
    assert isinstance(DarkRoom(), TaskSampler)
    with pytest.raises(ValueError, match="episodes_per_trial"):
        TrialWrapper(DarkRoom(), 0)
    with pytest.raises(ValueError, match="task_sampler"):
        TrialWrapper(gym.make("CartPole-v1"), 2)


def test_ml1_splits_and_trials():
    pytest.importorskip("metaworld")
    import pickle

    from sb3_pref.envs.metaworld_ml1 import ml1_benchmark, ml1_trials

    benchmark = ml1_benchmark("reach-v3", 0)
    goals = {
        split: np.array([pickle.loads(task.data)["rand_vec"] for task in getattr(benchmark, f"{split}_tasks")])
        for split in ("train", "test")
    }
    assert goals["train"].shape == goals["test"].shape == (50, 6)
    # Disjoint goal sets: the smallest train-test distance is far from zero.
    assert np.abs(goals["train"][:, None] - goals["test"][None]).sum(-1).min() > 1e-3

    env = ml1_trials("reach-v3", split="test", episodes_per_trial=2, max_episode_steps=3, seed=0)
    assert env.layout.prev_reward == slice(43, 44) and env.observation_space.shape == (45,)
    for _ in range(5):
        _, info = env.reset()
        task = info[TASK_KEY]
        np.testing.assert_array_equal(env.unwrapped._last_rand_vec, goals["test"][task])
    dones = []
    for _ in range(6):
        obs, _, terminated, truncated, info = env.step(env.action_space.sample())
        dones.append((terminated, truncated, EPISODE_RETURN_KEY in info, obs[44]))
    assert dones == [(False, False, False, 0.0)] * 2 + [(False, False, True, 1.0)] + [(False, False, False, 0.0)] * 2 + [
        (True, False, True, 1.0)
    ]
    assert EPISODE_SUCCESS_KEY in info
    with pytest.raises(ValueError, match="env_name"):
        ml1_trials("reach-v2")
    with pytest.raises(ValueError, match="max_episode_steps"):
        ml1_trials("reach-v3", max_episode_steps=501)
