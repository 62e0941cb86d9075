import numpy as np
import pytest
from stable_baselines3.common.env_checker import check_env

from sb3_pref.envs.darkroom import DarkRoom, all_goals, darkroom_trials, split_goals

UP, DOWN, LEFT, RIGHT, NOOP = range(5)


def test_goals_and_optimal_returns():
    goals = all_goals()
    assert len(goals) == 80 and len(set(goals)) == 80
    assert (4, 4) not in goals
    env = DarkRoom()
    optimal = np.array([env.optimal_return(goal) for goal in goals])
    assert optimal.mean() == pytest.approx(16.5)
    assert env.optimal_return((4, 5)) == 20.0  # one step away: on the goal from step 1 to step 20
    assert env.optimal_return((0, 0)) == 13.0  # corner: arrives at step 8, rewarded on steps 8..20
    assert optimal.min() == 13.0 and optimal.max() == 20.0


@pytest.mark.parametrize("goal", [(4, 5), (0, 0), (8, 3), (6, 1)])
def test_optimal_path_collects_the_optimal_return(goal):
    env = DarkRoom(goals=[goal])
    env.reset(seed=0)
    x, y = goal
    path = [RIGHT if x > 4 else LEFT] * abs(x - 4) + [UP if y > 4 else DOWN] * abs(y - 4)
    rewards, truncations = [], []
    for step in range(20):
        _, reward, terminated, truncated, info = env.step(path[step] if step < len(path) else NOOP)
        assert not terminated
        assert info["success"] == (reward == 1.0)
        rewards.append(reward)
        truncations.append(truncated)
    assert sum(rewards) == env.optimal_return(goal)
    # No reward before arrival, 1 on every step from the arrival on.
    assert rewards == [0.0] * (len(path) - 1) + [1.0] * (21 - len(path))
    assert truncations == [False] * 19 + [True]


def test_walls_and_moves():
    env = DarkRoom(goals=[(0, 0)])
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs, [0.5, 0.5])
    for _ in range(6):
        obs, *_ = env.step(UP)
    np.testing.assert_allclose(obs, [0.5, 1.0])  # stopped by the top wall at y = 8
    obs, *_ = env.step(LEFT)
    np.testing.assert_allclose(obs, [3 / 8, 1.0])
    obs, *_ = env.step(NOOP)
    np.testing.assert_allclose(obs, [3 / 8, 1.0])


def test_onehot_observation():
    env = DarkRoom(goals=[(0, 0)], observation="onehot")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (81,) and obs.sum() == 1.0 and obs[4 * 9 + 4] == 1.0
    obs, *_ = env.step(RIGHT)
    assert obs[4 * 9 + 5] == 1.0
    check_env(env, skip_render_check=True)


def test_split_is_seeded_disjoint_and_complete():
    train, test = split_goals(seed=0)
    assert len(test) == 16 and len(train) == 64  # 20% of 80 held out
    assert not set(train) & set(test)
    assert set(train) | set(test) == set(all_goals())
    assert split_goals(seed=0) == (train, test)
    assert split_goals(seed=1)[1] != test
    assert len(split_goals(seed=0, test_fraction=0.15)[1]) == 12


def test_task_protocol_and_reset_goal():
    env = DarkRoom(goals=[(1, 1), (2, 2)])
    rng = np.random.default_rng(0)
    drawn = {env.sample_task(rng) for _ in range(50)}
    assert drawn == {(1, 1), (2, 2)}
    env.set_task((7, 7))  # any valid cell may be set, e.g. a held-out goal
    env.reset(seed=0)
    assert env.goal == (7, 7)
    fresh = DarkRoom(goals=[(3, 3)])
    fresh.reset(seed=0)
    assert fresh.goal == (3, 3)  # no goal set: drawn from its own goals


def test_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        DarkRoom(size=8)
    with pytest.raises(ValueError, match="goal"):
        DarkRoom(goals=[(4, 4)])
    with pytest.raises(ValueError, match="observation"):
        DarkRoom(observation="pixels")
    with pytest.raises(ValueError, match="test_fraction"):
        split_goals(0, test_fraction=1.0)
    with pytest.raises(ValueError, match="split"):
        darkroom_trials(split="valid")
    with pytest.raises(ValueError, match="action"):
        env = DarkRoom()
        env.reset(seed=0)
        env.step(5)


def test_env_checker():
    check_env(DarkRoom(), skip_render_check=True)
