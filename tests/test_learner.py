import io

import numpy as np
import pytest
import torch as th

from sb3_pref.core import pair_draws
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.teachers import ScriptedTeacher

OBS_DIM, ACT_DIM, N_ENVS, HORIZON = 3, 1, 3, 10
EPISODE_LENGTHS = (40, 55, 70)  # the envs end episodes at different times
REWARD_WEIGHTS = np.array([0.9, -0.6, 0.4, 0.7])


def make_stream(start: int, n_steps: int, seed: int, episode_lengths: tuple = EPISODE_LENGTHS) -> tuple:
    """
    Steps ``start .. start + n_steps`` of a synthetic vectorised env: random observations and actions,
    true reward ``1 + tanh(w . [obs, action])`` (positive, so segment returns are too), and env ``e``
    ending an episode every ``episode_lengths[e]`` steps (``None``: never).
    """
    rng = np.random.default_rng(seed)
    n_envs = len(episode_lengths)
    obs = rng.normal(size=(n_steps, n_envs, OBS_DIM)).astype(np.float32)
    actions = rng.uniform(-1, 1, size=(n_steps, n_envs, ACT_DIM)).astype(np.float32)
    rewards = (1 + np.tanh(np.concatenate([obs, actions], axis=-1) @ REWARD_WEIGHTS)).astype(np.float32)
    step = start + np.arange(n_steps)[:, None] + 1
    dones = np.stack([step[:, 0] % length == 0 if length else np.zeros(n_steps, bool) for length in episode_lengths], 1)
    return obs, actions, rewards, dones


def make_learner(
    feed_type="uniform", max_feed=1000, mb_size=100, teacher=None, n_envs=N_ENVS, seed=0, **kwargs
) -> PreferenceLearner:
    model = RewardModel(OBS_DIM, ACT_DIM, size_segment=HORIZON, mb_size=mb_size, hidden_dim=32, n_layers=1, seed=seed)
    return PreferenceLearner(
        model,
        n_envs,
        teacher=teacher,
        feed_type=feed_type,
        max_feed=max_feed,
        re_update=5,
        n_eval_pairs=64,
        seed=seed,
        **kwargs,
    )


def fed(learner: PreferenceLearner, start: int = 0, n_steps: int = 200, seed: int = 0) -> PreferenceLearner:
    learner.add_transitions(*make_stream(start, n_steps, seed))
    return learner


def spy_select(monkeypatch) -> list:
    """Records every call of the learner's query selection: (method, n, returns_0, returns_1, obs_0, chosen)."""
    calls = []
    original = pair_draws.select_queries

    def spy(method, n, returns_0, returns_1, obs_0, obs_1, **kwargs):
        chosen = original(method, n, returns_0, returns_1, obs_0, obs_1, **kwargs)
        calls.append((method, n, returns_0, returns_1, obs_0, chosen))
        return chosen

    monkeypatch.setattr(pair_draws, "select_queries", spy)
    return calls


# ------------------------------------------------------------------------------------- query rounds
def test_first_round_is_uniform_then_feed_type(monkeypatch):
    learner = fed(make_learner(feed_type="disagreement"))
    calls = spy_select(monkeypatch)
    sample_sizes = []
    original_sample = learner.store.sample
    monkeypatch.setattr(
        learner.store, "sample", lambda n, *args, **kwargs: sample_sizes.append(n) or original_sample(n, *args, **kwargs)
    )

    learner.query_round()
    assert calls == [] and sample_sizes[:2] == [100, 100]  # uniform: mb_size random pairs, no selection
    sample_sizes.clear()
    learner.query_round()
    assert sample_sizes[:2] == [1000, 1000]  # mb_size * large_batch candidates
    assert [(method, n) for method, n, *_ in calls] == [("disagreement", 100)]
    assert calls[0][2].shape == (3, 1000)  # one return per member and candidate
    learner.query_round(method=2)  # a per-round override, by B-Pref id
    assert calls[-1][0] == "entropy"
    assert learner.n_rounds == 3 and len(learner.dataset) == 300


def test_disagreement_round_labels_the_most_disputed_candidates(monkeypatch):
    learner = fed(make_learner(feed_type=1))
    learner.query_round()
    calls = spy_select(monkeypatch)
    learner.query_round()
    (_, _, returns_0, returns_1, obs_0, chosen), *_ = calls
    # std over members of P(seg_0 preferred), computed here independently of query.py
    p_first = 1 / (1 + np.exp(returns_1 - returns_0))
    disagreement = p_first.std(axis=0)
    assert sorted(chosen) == sorted(np.argsort(-disagreement)[:100])
    assert disagreement[chosen].min() >= np.delete(disagreement, chosen).max() > 0
    # and those are exactly the pairs that reached the dataset
    np.testing.assert_array_equal(learner.dataset.features_0[100:, :, :OBS_DIM], obs_0[chosen])


def test_budget_is_exact_and_the_last_round_clamped():
    learner = fed(make_learner(max_feed=250, mb_size=100))
    assert learner.dataset.capacity == 500
    sizes, totals = [], []
    for _ in range(4):
        stats = learner.query_round()
        sizes.append(stats.get("round_queries"))
        totals.append(learner.total_feed)
    assert sizes == [100, 100, 50, None] and totals == [100, 200, 250, 250]
    assert learner.budget_left == 0 and learner.n_rounds == 3
    assert len(learner.dataset) == learner.labeled_feedback == 250
    assert learner.teacher.counters["asked"] == 250
    with pytest.raises(ValueError, match="max_feed=50"):
        make_learner(max_feed=50, mb_size=100)


def test_skipped_pairs_count_against_the_budget_but_are_not_stored():
    # thres_skip = margin * eps_skip = the average segment return: pairs of two below-average segments are skipped
    teacher = ScriptedTeacher(eps_skip=1.0, seed=0)
    learner = fed(make_learner(teacher=teacher, max_feed=200))
    learner.query_round()
    learner.query_round()
    skipped = teacher.counters["skipped"]
    assert 20 < skipped < 100
    assert learner.total_feed == 200
    assert learner.labeled_feedback == len(learner.dataset) == 200 - skipped
    assert learner.counters() == {
        "total_feed": 200.0,
        "labeled_feedback": 200.0 - skipped,
        "skipped": skipped,
        "equal": 0,
        "flipped": 0,
    }
    assert not np.isnan(learner.dataset.labels).any()
    best = np.maximum(learner.dataset.rewards_0.sum(1), learner.dataset.rewards_1.sum(1))
    assert best.min() > teacher.thres_skip > 0


def test_segment_margin_is_mean_segment_return():
    # constant rewards 1, 2, 3 per env: 200 steps complete 5 x 40, 3 x 55 and 2 x 70 steps
    learner = make_learner(teacher=ScriptedTeacher(eps_skip=0.5, eps_equal=0.25))
    obs, actions, _, dones = make_stream(0, 200, seed=0)
    learner.add_transitions(obs, actions, np.broadcast_to([1.0, 2.0, 3.0], (200, 3)), dones)
    returns = [40] * 5 + [110] * 3 + [210] * 2
    lengths = [40] * 5 + [55] * 3 + [70] * 2
    assert learner.segment_margin() == pytest.approx(np.mean(returns) * HORIZON / np.mean(lengths))
    learner.query_round()
    assert learner.teacher.thres_skip == pytest.approx(0.5 * 95 * 10 / 50.5)
    assert learner.teacher.thres_equal == pytest.approx(0.25 * 95 * 10 / 50.5)

    fixed = make_learner(max_ep_len=100)
    fixed.add_transitions(obs, actions, np.broadcast_to([1.0, 2.0, 3.0], (200, 3)), dones)
    assert fixed.segment_margin() == pytest.approx(95 * HORIZON / 100)
    # no finished episode yet: the same quantity from per-step rewards
    running = make_learner()
    obs, actions, _, dones = make_stream(0, 30, seed=0, episode_lengths=(None, None, None))
    running.add_transitions(obs, actions, np.broadcast_to([1.0, 2.0, 3.0], (30, 3)), dones)
    assert running.segment_margin() == pytest.approx(2.0 * HORIZON)
    with pytest.raises(ValueError, match="max_ep_len"):
        make_learner(max_ep_len=0)


def test_normalized_predictions_have_zero_mean_unit_std_on_recent_transitions():
    learner = fed(make_learner(normalize_rewards=True))
    learner.query_round()
    obs, actions, _ = learner.store.last_transitions(len(learner.store))
    assert len(obs) == 600
    raw, _ = learner.reward_model.predict(np.concatenate([obs, actions], axis=-1))
    assert abs(raw.mean()) > 0.05 or abs(raw.std() - 1) > 0.05  # normalising is not a no-op here
    predicted = learner.predict_rewards(obs, actions)
    assert abs(predicted.mean()) < 1e-5 and predicted.std() == pytest.approx(1.0, abs=1e-4)
    # rollout-shaped (T, n_envs, D) input goes through the same affine map
    rollout_obs, rollout_actions, _, _ = make_stream(200, 8, seed=1)
    rollout = learner.predict_rewards(rollout_obs, rollout_actions)
    assert rollout.shape == (8, N_ENVS)
    expected = (learner.reward_model.predict(np.concatenate([rollout_obs, rollout_actions], -1))[0] - raw.mean()) / raw.std()
    np.testing.assert_allclose(rollout, expected, rtol=1e-4, atol=1e-5)

    plain = fed(make_learner())
    plain.query_round()
    assert (plain.reward_shift, plain.reward_scale) == (0.0, 1.0)
    np.testing.assert_array_equal(
        plain.predict_rewards(obs, actions), plain.reward_model.predict(np.concatenate([obs, actions], -1))[0]
    )


# -------------------------------------------------------------------------------------- persistence
def noisy_teacher() -> ScriptedTeacher:
    # random labels and flips: an exact continuation needs the teacher's generator restored too
    return ScriptedTeacher(beta=1.0, eps_mistake=0.1, seed=3)


def test_state_dict_round_trip_continues_exactly(tmp_path):
    original = fed(make_learner(feed_type="disagreement", teacher=noisy_teacher()))
    original.query_round()
    fed(original, start=200, n_steps=100, seed=1).query_round()
    buffer = io.BytesIO()
    th.save(original.state_dict(), buffer)
    original.reward_model.save(tmp_path / "reward_model.pt")
    buffer.seek(0)
    state = th.load(buffer, weights_only=True)

    # a fresh process: other seeds, an oracle teacher; everything must come from the files
    restored = PreferenceLearner(
        RewardModel.load(tmp_path / "reward_model.pt"),
        N_ENVS,
        feed_type="disagreement",
        max_feed=1000,
        re_update=5,
        n_eval_pairs=64,
        seed=99,
    )
    restored.load_state_dict(state)
    assert restored.counters() == original.counters()
    assert (restored.total_feed, restored.labeled_feedback, restored.n_rounds) == (200, 200, 2)
    assert restored.teacher.state_dict() == original.teacher.state_dict()
    assert restored.reward_model.n_updates == original.reward_model.n_updates > 0
    for name, array in original.dataset.state_dict().items():
        np.testing.assert_array_equal(restored.dataset.state_dict()[name], array)
    for name, array in original.store.state_dict().items():
        np.testing.assert_array_equal(restored.store.state_dict()[name], array)

    stream = make_stream(300, 100, seed=2)
    for learner in (original, restored):
        learner.add_transitions(*stream)
    stats_original, stats_restored = original.query_round(), restored.query_round()
    assert stats_restored == stats_original
    np.testing.assert_array_equal(restored.dataset.labels, original.dataset.labels)
    np.testing.assert_array_equal(restored.dataset.features_1, original.dataset.features_1)
    assert original.teacher.counters["flipped"] > 0
    for a, b in zip(original.reward_model.ensemble.parameters(), restored.reward_model.ensemble.parameters()):
        assert th.equal(a, b)


def test_restoring_with_other_n_envs_keeps_labels_and_starts_an_empty_store():
    original = fed(make_learner(teacher=noisy_teacher()))
    original.query_round()
    state = original.state_dict()
    two_envs = make_learner(n_envs=2, seed=5)
    two_envs.load_state_dict(state)
    assert len(two_envs.store) == 0 and two_envs.store.n_envs == 2
    assert two_envs.counters() == original.counters()
    np.testing.assert_array_equal(two_envs.dataset.labels, original.dataset.labels)
    np.testing.assert_array_equal(two_envs.dataset.features_0, original.dataset.features_0)
    # and it keeps going with its own envs
    two_envs.add_transitions(*make_stream(0, 120, seed=4, episode_lengths=(30, 45)))
    assert two_envs.query_round()["round_queries"] == 100
    assert len(two_envs.dataset) == two_envs.total_feed == 200


def test_initial_mb_size_front_loads_the_first_round_then_mb_size_until_the_budget():
    model = RewardModel(OBS_DIM, ACT_DIM, size_segment=HORIZON, mb_size=20, initial_mb_size=70, hidden_dim=16, seed=0)
    learner = fed(PreferenceLearner(model, N_ENVS, feed_type="uniform", max_feed=100, re_update=2, n_eval_pairs=16, seed=0))
    asked = []
    for _ in range(4):
        stats = learner.query_round()
        asked.append(stats.get("round_queries", 0.0))
    # 70 at the first round, then mb_size until the budget of 100 is spent (the last round clamped to 10).
    assert asked == [70.0, 20.0, 10.0, 0.0]
    assert learner.total_feed == 100 and len(learner.dataset) == 100


def test_initial_mb_size_is_saved_with_the_model_and_checked(tmp_path):
    model = RewardModel(OBS_DIM, ACT_DIM, mb_size=20, initial_mb_size=70, seed=0)
    model.save(tmp_path / "rm.pt")
    loaded = RewardModel.load(tmp_path / "rm.pt")
    assert loaded.initial_mb_size == 70
    assert RewardModel(OBS_DIM, ACT_DIM).initial_mb_size is None  # the default: every round asks mb_size
    with pytest.raises(ValueError, match="initial_mb_size must be >= 1"):
        RewardModel(OBS_DIM, ACT_DIM, initial_mb_size=0)
