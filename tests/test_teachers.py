import json
from types import SimpleNamespace

import numpy as np
import pytest

from sb3_pref.core.teachers import BaseTeacher, ScriptedTeacher


def pairs_from_returns(returns_0, returns_1, horizon=4):
    """Spread each return evenly over ``horizon`` steps (float32, like SegmentBatch.rewards)."""
    r0 = np.repeat(np.asarray(returns_0, dtype=np.float32)[:, None] / horizon, horizon, axis=1)
    r1 = np.repeat(np.asarray(returns_1, dtype=np.float32)[:, None] / horizon, horizon, axis=1)
    return r0, r1


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_presets_table():
    assert set(ScriptedTeacher.PRESETS) == {"oracle", "noisy", "myopic", "mistake", "skip", "equal"}
    noisy = ScriptedTeacher.preset("noisy")
    assert (noisy.beta, noisy.gamma, noisy.eps_mistake, noisy.eps_skip, noisy.eps_equal) == (1, 1, 0, 0, 0)
    assert ScriptedTeacher.preset("myopic").gamma == 0.9
    assert ScriptedTeacher.preset("mistake").eps_mistake == 0.1
    assert ScriptedTeacher.preset("skip").eps_skip == 0.1
    assert ScriptedTeacher.preset("equal").eps_equal == 0.1
    assert ScriptedTeacher.preset("oracle").beta == -1
    teacher = ScriptedTeacher()
    assert teacher.thres_skip == 0.0 and teacher.thres_equal == 0.0


def test_oracle_labels_ties_and_counters():
    teacher = ScriptedTeacher.preset("oracle", seed=0)
    r0, r1 = pairs_from_returns([1.0, 0.0, 4.0, 1.0, -3.0], [2.0, 0.0, 2.0, 0.5, -1.0])
    labels = teacher.label_pairs(SimpleNamespace(rewards=r0), SimpleNamespace(rewards=r1))
    assert labels.dtype == np.float64 and labels.shape == (5,)
    # second better -> 1, tie -> 0, first better -> 0
    np.testing.assert_array_equal(labels, [1.0, 0.0, 0.0, 0.0, 1.0])
    assert teacher.counters == {"asked": 5, "labelled": 5, "skipped": 0, "equal": 0, "flipped": 0}
    teacher.label(r0[:2], r1[:2])
    assert teacher.counters["asked"] == 7 and teacher.counters["labelled"] == 7


def test_myopic_discount_flips_the_undiscounted_preference():
    # weights gamma ** (H - 1 - t) = [0.81, 0.9, 1.0]
    r0 = np.array([[10.0, 0.0, 0.0], [0.0, 0.0, 2.0], [1.0, 1.0, 1.0]])
    r1 = np.array([[0.0, 0.0, 9.0], [2.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    # pair 0: R0 = 10 > R1 = 9 but S0 = 8.1 < S1 = 9; pair 1: S0 = 2 > S1 = 1.62; pair 2: tie
    np.testing.assert_array_equal(ScriptedTeacher.preset("oracle").label(r0, r1), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(ScriptedTeacher.preset("myopic").label(r0, r1), [1.0, 0.0, 0.0])
    # the earliest step is discounted the most: a late reward beats a slightly larger early one
    np.testing.assert_array_equal(ScriptedTeacher(gamma=0.5).label(np.array([[3.0, 0.0]]), np.array([[0.0, 2.0]])), [1.0])


def test_skip_threshold_after_update_margin():
    teacher = ScriptedTeacher.preset("skip", seed=0)
    r0, r1 = pairs_from_returns([1.0, 3.0, 2.0, 0.0, -5.0], [1.5, 0.0, 2.0, 5.0, 1.75])
    teacher.update_margin(20.0)
    assert teacher.thres_skip == pytest.approx(2.0) and teacher.thres_equal == 0.0
    labels = teacher.label(r0, r1)
    # kept only if max(R0, R1) > 2.0 (strict, so the (2, 2) pair is skipped)
    np.testing.assert_array_equal(np.isnan(labels), [True, False, True, False, True])
    np.testing.assert_array_equal(labels[[1, 3]], [0.0, 1.0])
    assert teacher.counters == {"asked": 5, "labelled": 2, "skipped": 3, "equal": 0, "flipped": 0}


def test_skip_follows_the_threshold_not_eps_skip():
    # B-Pref tests thres_skip > 0: before any margin, and with a margin <= 0 (negative rewards, a sparse
    # task before its first success), the skip teacher labels every pair like an oracle.
    returns_0, returns_1 = [-1.0, 0.0, 0.0, -3.0], [0.0, 0.25, -2.0, -5.0]
    teacher = ScriptedTeacher.preset("skip")
    for margin in (None, -20.0, 0.0):
        if margin is not None:
            teacher.update_margin(margin)
        labels = teacher.label(*pairs_from_returns(returns_0, returns_1))
        np.testing.assert_array_equal(labels, [1.0, 1.0, 0.0, 0.0])
    assert teacher.counters["skipped"] == 0 and teacher.counters["labelled"] == 12


def test_equal_threshold_after_update_margin():
    teacher = ScriptedTeacher.preset("equal", seed=0)
    teacher.update_margin(10.0)
    assert teacher.thres_equal == pytest.approx(1.0) and teacher.thres_skip == 0.0
    r0, r1 = pairs_from_returns([0.0, 0.0, 3.0, 2.0, 5.0], [0.5, 1.5, 0.0, 2.75, -4.0])
    np.testing.assert_array_equal(teacher.label(r0, r1), [0.5, 1.0, 0.0, 0.5, 0.0])
    assert teacher.counters == {"asked": 5, "labelled": 5, "skipped": 0, "equal": 2, "flipped": 0}
    # a negative margin makes the threshold negative: nothing is equal any more
    teacher.update_margin(-10.0)
    np.testing.assert_array_equal(teacher.label(r0, r1), [1.0, 1.0, 0.0, 1.0, 0.0])


def test_equal_overrides_after_the_flip_and_flips_are_counted_after_override():
    teacher = ScriptedTeacher(eps_mistake=1.0, eps_equal=0.5, seed=0)
    teacher.update_margin(2.0)  # thres_equal = 1.0
    r0, r1 = pairs_from_returns([0.0, 0.0, 3.0], [0.5, 4.0, 0.0])
    # every label flips; the equal pair stays 0.5 and its flip is not counted
    np.testing.assert_array_equal(teacher.label(r0, r1), [0.5, 0.0, 1.0])
    assert teacher.counters == {"asked": 3, "labelled": 3, "skipped": 0, "equal": 1, "flipped": 2}


def test_skip_and_equal_together():
    teacher = ScriptedTeacher(eps_skip=0.1, eps_equal=0.1)
    teacher.update_margin(10.0)  # both thresholds 1.0
    labels = teacher.label(*pairs_from_returns([0.5, 1.5, 4.0, 0.0], [0.9, 2.0, 1.0, 3.0]))
    np.testing.assert_array_equal(labels, [np.nan, 0.5, 0.0, 1.0])
    assert teacher.counters == {"asked": 4, "labelled": 3, "skipped": 1, "equal": 1, "flipped": 0}


def test_noisy_with_large_gaps_is_decisive():
    labels = ScriptedTeacher.preset("noisy", seed=3).label(*pairs_from_returns([0.0, 60.0, -30.0], [60.0, 0.0, 30.0]))
    np.testing.assert_array_equal(labels, [1.0, 0.0, 1.0])


def test_mistake_flip_fraction_and_counters():
    rng = np.random.default_rng(123)
    r0, r1 = rng.normal(size=(20_000, 5)), rng.normal(size=(20_000, 5))
    oracle = ScriptedTeacher.preset("oracle").label(r0, r1)
    teacher = ScriptedTeacher.preset("mistake", seed=7)
    labels = teacher.label(r0, r1)
    flipped = labels != oracle
    assert abs(flipped.mean() - 0.1) < 0.01
    np.testing.assert_array_equal(labels[flipped], 1.0 - oracle[flipped])
    assert teacher.counters == {"asked": 20_000, "labelled": 20_000, "skipped": 0, "equal": 0, "flipped": int(flipped.sum())}


def test_noisy_matches_boltzmann_probability():
    gaps = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])
    per_gap = 4000
    rng = np.random.default_rng(0)
    r0 = rng.normal(size=(len(gaps) * per_gap, 5))
    r1 = r0 + np.repeat(gaps, per_gap)[:, None] / 5  # S1 - S0 = gap
    labels = ScriptedTeacher.preset("noisy", seed=11).label(r0, r1).reshape(len(gaps), per_gap)
    expected = sigmoid(gaps)
    bound = 4 * np.sqrt(expected * (1 - expected) / per_gap) + 1e-9
    assert np.all(np.abs(labels.mean(axis=1) - expected) < bound)
    # beta scales the gap: beta = 2 at gap 0.5 must look like beta = 1 at gap 1
    sharp = ScriptedTeacher(beta=2.0, seed=5).label(r0[:per_gap], r0[:per_gap] + 0.1)
    assert abs(sharp.mean() - sigmoid(1.0)) < 4 * np.sqrt(sigmoid(1.0) * (1 - sigmoid(1.0)) / per_gap)


def test_noisy_is_stable_for_huge_returns():
    labels = ScriptedTeacher(beta=10.0, seed=0).label(np.array([[1e6], [-1e6]]), np.array([[-1e6], [1e6]]))
    np.testing.assert_array_equal(labels, [0.0, 1.0])


def test_seeding():
    r0, r1 = pairs_from_returns(np.zeros(1000), np.zeros(1000))
    first = ScriptedTeacher.preset("noisy", seed=42).label(r0, r1)
    np.testing.assert_array_equal(first, ScriptedTeacher.preset("noisy", seed=42).label(r0, r1))
    assert not np.array_equal(first, ScriptedTeacher.preset("noisy", seed=43).label(r0, r1))


def test_state_dict_round_trip_continues_the_stream():
    rng = np.random.default_rng(1)
    batches = [(rng.normal(size=(500, 3)), rng.normal(size=(500, 3))) for _ in range(2)]
    teacher = ScriptedTeacher(beta=1.0, eps_mistake=0.2, eps_equal=0.1, seed=9)
    teacher.update_margin(2.0)
    teacher.label(*batches[0])
    state = json.loads(json.dumps(teacher.state_dict()))
    expected = teacher.label(*batches[1])

    restored = ScriptedTeacher()
    restored.load_state_dict(state)
    assert (restored.beta, restored.eps_mistake, restored.thres_equal, restored.seed) == (1.0, 0.2, pytest.approx(0.2), 9)
    np.testing.assert_array_equal(restored.label(*batches[1]), expected)
    assert restored.counters == teacher.counters


def test_base_teacher_defaults():
    class Constant(BaseTeacher):
        def label_pairs(self, seg_0, seg_1):
            labels = np.array([1.0, np.nan, 0.5])
            self._count_labels(labels)
            return labels

    teacher = Constant()
    teacher.update_margin(3.0)  # no-op
    teacher.label_pairs(None, None)
    assert teacher.counters == {"asked": 3, "labelled": 2, "skipped": 1, "equal": 1, "flipped": 0}
    clone = Constant()
    clone.load_state_dict(json.loads(json.dumps(teacher.state_dict())))
    assert clone.counters == teacher.counters


class Forgetful(BaseTeacher):
    """A user's teacher whose ``__init__`` does not call ``super().__init__()``; every fifth answer is "equal"."""

    def __init__(self, sign: float = 1.0):
        self.sign = sign

    def label_pairs(self, seg_0, seg_1):
        labels = (self.sign * (seg_1.rewards.sum(1) - seg_0.rewards.sum(1)) > 0).astype(np.float64)
        labels[::5] = 0.5
        self._count_labels(labels)
        return labels


def test_a_teacher_whose_init_skips_super_init_still_counts_and_trains():
    # Users write teachers as they write gym envs, and forget super().__init__(): the counters once raised an
    # AttributeError at the end of the first rollout of preferences, in the middle of learn().
    import copy
    import pickle

    from stable_baselines3.common.env_util import make_vec_env

    from sb3_pref import PPO_REWARD, RewardModel

    teacher = Forgetful()
    assert teacher.counters == {"asked": 0, "labelled": 0, "skipped": 0, "equal": 0, "flipped": 0}
    assert copy.deepcopy(teacher).sign == 1.0 and pickle.loads(pickle.dumps(teacher)).counters == teacher.counters
    with pytest.raises(AttributeError, match="'Forgetful' object has no attribute 'missing'"):
        getattr(teacher, "missing")  # noqa: B009 (the lookup is what is tested)
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, hidden_dim=16)
    model = PPO_REWARD("MlpPolicy", env, n_steps=64, reward_model=reward_model, teacher=teacher, max_feed=20, seed=0)
    model.learn(512)
    assert model.pref_learner.total_feed == 20
    assert teacher.counters["asked"] == 20 and teacher.counters["equal"] == model.pref_learner.counters()["equal"] >= 4


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"eps_mistake": 1.5}, "eps_mistake"),
        ({"eps_skip": -0.1}, "eps_skip"),
        ({"eps_equal": 2}, "eps_equal"),
        ({"gamma": 0.0}, "gamma"),
        ({"gamma": 1.1}, "gamma"),
        ({"beta": float("nan")}, "beta"),
        ({"beta": float("inf")}, "beta"),
    ],
)
def test_invalid_config(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        ScriptedTeacher(**kwargs)


def test_invalid_preset_lists_choices():
    with pytest.raises(ValueError, match=r"name=.*oracle.*noisy.*myopic.*mistake.*skip.*equal"):
        ScriptedTeacher.preset("perfect")


def test_invalid_rewards():
    teacher = ScriptedTeacher()
    with pytest.raises(ValueError, match=r"rewards_0 must have shape \(N, H\)"):
        teacher.label(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match=r"rewards_0 \(3, 4\) and rewards_1 \(3, 5\)"):
        teacher.label(np.zeros((3, 4)), np.zeros((3, 5)))
    bad = np.zeros((2, 4))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="rewards_1 contains NaN"):
        teacher.label(np.zeros((2, 4)), bad)
    with pytest.raises(ValueError, match="margin"):
        teacher.update_margin(float("inf"))
    assert teacher.counters["asked"] == 0
