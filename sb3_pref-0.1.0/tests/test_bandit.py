import numpy as np
import pytest
from stable_baselines3.common.env_checker import check_env

from sb3_pref.envs.bandit import BernoulliBandit, bandit_trials, sample_bandit_tasks
from sb3_pref.envs.trial import EPISODE_OPTIMAL_KEY, EPISODE_RETURN_KEY, TASK_KEY


def test_rewards_follow_the_arm_probabilities():
    env = BernoulliBandit(3)
    env.set_task(np.array([0.0, 1.0, 0.3]))
    env.reset(seed=0)
    rewards = {arm: [] for arm in range(3)}
    for pull in range(3000):
        arm = pull % 3
        _, reward, terminated, truncated, info = env.step(arm)
        assert terminated and not truncated  # every pull is a one-step episode
        assert info["is_success"] == (arm == 1)
        rewards[arm].append(reward)
    assert set(rewards[0]) == {0.0} and set(rewards[1]) == {1.0}
    # 1000 pulls of p = 0.3: standard deviation 0.0145, so +-0.06 is more than 4 of them.
    assert abs(np.mean(rewards[2]) - 0.3) < 0.06
    assert env.optimal_return(np.array([0.2, 0.7, 0.5])) == 0.7


def test_trial_of_n_pulls():
    env = bandit_trials(n_arms=4, n_pulls=6, split="test", seed=0)
    obs, info = env.reset()
    assert obs.shape == (1 + 4 + 1 + 1,)
    probs = info[TASK_KEY]
    for pull in range(6):
        obs, reward, terminated, truncated, info = env.step(pull % 4)
        assert terminated == (pull == 5) and not truncated
        assert info[EPISODE_RETURN_KEY] == reward
        assert info[EPISODE_OPTIMAL_KEY] == pytest.approx(probs.max())
        assert obs[1 + pull % 4] == 1.0 and obs[5] == reward and obs[6] == 1.0


def test_task_sampling_respects_split():
    held_out = sample_bandit_tasks(20, 3, seed=5)
    assert held_out.shape == (20, 3) and np.all((held_out >= 0) & (held_out <= 1))
    np.testing.assert_array_equal(held_out, sample_bandit_tasks(20, 3, seed=5))
    test_env = bandit_trials(3, 2, split="test", n_test_tasks=20, split_seed=5, seed=0)
    train_env = bandit_trials(3, 2, split="train", n_test_tasks=20, split_seed=5, seed=0)
    test_tasks = np.array([test_env.reset()[1][TASK_KEY] for _ in range(300)])
    train_tasks = np.array([train_env.reset()[1][TASK_KEY] for _ in range(300)])
    # Every test task is one of the held-out rows, and 300 draws reach nearly all 20 of them.
    matches = np.all(np.isclose(test_tasks[:, None], held_out[None]), axis=-1)
    assert np.all(matches.sum(1) == 1)
    assert len(np.unique(matches.argmax(1))) >= 18
    # Train tasks are fresh prior draws: none equals a held-out task.
    assert not np.any(np.all(np.isclose(train_tasks[:, None], held_out[None]), axis=-1))
    assert len(np.unique(train_tasks[:, 0])) == 300


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_arms"):
        BernoulliBandit(1)
    with pytest.raises(ValueError, match="tasks"):
        BernoulliBandit(3, tasks=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="task"):
        BernoulliBandit(2).set_task([0.5, 1.5])
    with pytest.raises(ValueError, match="split"):
        bandit_trials(split="valid")


def test_env_checker():
    check_env(BernoulliBandit(5), skip_render_check=True)
