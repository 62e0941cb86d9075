import numpy as np
import pytest
import torch as th

from sb3_pref.core.query import (
    QUERY_METHODS,
    candidate_count,
    disagreement_scores,
    entropy_scores,
    kcenter_greedy,
    pair_logits,
    resolve_query_method,
    select_queries,
)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def brute_force_kcenter(candidates, labelled, n):
    """Reference greedy k-center in float64 numpy, recomputing every distance from scratch."""
    chosen = []
    centers = list(labelled) if labelled is not None else []
    for _ in range(n):
        if not centers:
            scores = np.linalg.norm(candidates - candidates.mean(axis=0), axis=1)
        else:
            dist = np.linalg.norm(candidates[:, None, :] - np.asarray(centers)[None, :, :], axis=2)
            scores = dist.min(axis=1)
        scores[chosen] = -np.inf
        pick = int(np.argmax(scores))
        chosen.append(pick)
        centers.append(candidates[pick])
    return np.array(chosen)


def test_resolve_query_method():
    for feed_type, name in enumerate(QUERY_METHODS):
        assert resolve_query_method(feed_type) == name
        assert resolve_query_method(np.int64(feed_type)) == name
        assert resolve_query_method(name) == name
    assert QUERY_METHODS[4] == "kcenter_disagreement" and QUERY_METHODS[5] == "kcenter_entropy"
    assert resolve_query_method("kcenter_disagree") == "kcenter_disagreement"
    assert resolve_query_method("KCenter_Ent") == "kcenter_entropy"
    for bad in (6, -1, "random", True, 2.0):
        with pytest.raises(ValueError, match=r"feed_type.*0=uniform.*5=kcenter_entropy"):
            resolve_query_method(bad)


def test_candidate_count():
    assert candidate_count(0, 50, 10) == 50
    assert candidate_count("disagreement", 50, 10) == 500
    assert candidate_count(5, 20) == 200
    with pytest.raises(ValueError, match="large_batch"):
        candidate_count(1, 10, 0)


def test_pair_logits_and_scores_by_hand():
    returns_0 = np.array([[5.0, 3.0, 1.0, 0.0], [5.0, -3.0, -1.0, 0.0], [5.0, 0.0, 0.0, 0.0]])
    returns_1 = np.zeros((3, 4))
    logits = pair_logits(returns_0, returns_1)
    assert logits.shape == (3, 4, 2)
    np.testing.assert_array_equal(logits[..., 0], returns_0)

    p0 = sigmoid(returns_0)  # softmax([R0, R1])[0] with R1 = 0
    expected_std = p0.std(axis=0)
    np.testing.assert_allclose(disagreement_scores(returns_0, returns_1), expected_std, rtol=1e-12, atol=1e-12)
    entropy = -(p0 * np.log(p0) + (1 - p0) * np.log(1 - p0))
    np.testing.assert_allclose(entropy_scores(returns_0, returns_1), entropy.mean(axis=0), rtol=1e-12)
    # pair 3 is a coin flip for every member: maximal entropy ln 2, no disagreement
    assert entropy_scores(returns_0, returns_1)[3] == pytest.approx(np.log(2))
    assert disagreement_scores(returns_0, returns_1)[3] == 0.0


def test_scores_accept_torch_and_stay_finite():
    returns_0 = th.tensor([[1e4, 0.0], [-1e4, 0.0]])
    scores = disagreement_scores(returns_0, th.zeros(2, 2))
    assert scores.dtype == np.float64
    np.testing.assert_allclose(scores, [0.5, 0.0])
    np.testing.assert_allclose(entropy_scores(returns_0, th.zeros(2, 2)), [0.0, np.log(2)], atol=1e-12)
    with pytest.raises(ValueError, match="returns_0"):
        disagreement_scores(np.zeros((3, 4)), np.zeros((3, 5)))


def test_disagreement_and_entropy_selection():
    # pairs 1 and 4: members disagree on the sign; pair 2: everyone agrees R0 ~ R1; others: confident agreement
    gap = np.array(
        [
            [6.0, 3.0, 0.01, -6.0, 1.0, 8.0],
            [6.0, -3.0, -0.01, -6.0, -1.0, 8.0],
            [6.0, 0.0, 0.0, -6.0, 0.0, 8.0],
        ]
    )
    returns_1 = np.random.default_rng(0).normal(size=gap.shape)
    returns_0 = returns_1 + gap
    np.testing.assert_array_equal(select_queries("disagreement", 2, returns_0, returns_1), [1, 4])
    np.testing.assert_array_equal(select_queries(1, 1, returns_0, returns_1), [1])
    assert select_queries("entropy", 1, returns_0, returns_1)[0] == 2
    np.testing.assert_array_equal(select_queries(2, 3, returns_0, returns_1), [2, 4, 1])


def test_ties_are_broken_by_candidate_order():
    returns = np.zeros((3, 8))
    np.testing.assert_array_equal(select_queries("entropy", 3, returns, returns), [0, 1, 2])
    np.testing.assert_array_equal(select_queries("disagreement", 4, returns, returns), [0, 1, 2, 3])


def test_uniform_and_argument_errors():
    np.testing.assert_array_equal(select_queries(0, 4), np.arange(4))
    obs = np.zeros((10, 3, 2))
    np.testing.assert_array_equal(select_queries("uniform", 4, obs_0=obs, obs_1=obs), np.arange(4))
    with pytest.raises(ValueError, match="n=11 queries requested from only 10 candidates"):
        select_queries("kcenter", 11, obs_0=obs, obs_1=obs)
    with pytest.raises(ValueError, match="needs returns_0"):
        select_queries("entropy", 2, obs_0=obs, obs_1=obs)
    with pytest.raises(ValueError, match="needs obs_1"):
        select_queries("kcenter", 2, obs_0=obs)
    with pytest.raises(ValueError, match="labelled_obs_1"):
        select_queries("kcenter", 2, obs_0=obs, obs_1=obs, labelled_obs_0=obs)
    with pytest.raises(ValueError, match="number of candidates"):
        select_queries("kcenter_entropy", 2, np.zeros((3, 9)), np.zeros((3, 9)), obs, obs)


def clusters(rng, centers, per_cluster, noise=0.05):
    points = np.repeat(np.asarray(centers, dtype=np.float64), per_cluster, axis=0)
    return points + rng.normal(scale=noise, size=points.shape), np.repeat(np.arange(len(centers)), per_cluster)


def test_kcenter_picks_one_point_per_cluster():
    rng = np.random.default_rng(0)
    points, cluster_id = clusters(rng, [[0, 0], [10, 0], [0, 10], [10, 10], [5, 5]], per_cluster=6)
    picks = kcenter_greedy(points, None, 5)
    assert sorted(cluster_id[picks]) == [0, 1, 2, 3, 4]
    # with two clusters already labelled, the two picks cover two of the remaining three
    labelled = np.array([[0.0, 0.0], [10.0, 10.0]])
    picks = kcenter_greedy(points, labelled, 3)
    assert sorted(cluster_id[picks]) == [1, 2, 4]


def test_kcenter_matches_brute_force():
    rng = np.random.default_rng(3)
    candidates, labelled = rng.normal(size=(60, 7)), rng.normal(size=(40, 7))
    expected = brute_force_kcenter(candidates, labelled, 12)
    np.testing.assert_array_equal(kcenter_greedy(candidates, labelled, 12), expected)
    np.testing.assert_array_equal(kcenter_greedy(candidates, labelled, 12, chunk_size=7), expected)
    np.testing.assert_array_equal(kcenter_greedy(th.as_tensor(candidates), labelled, 12, chunk_size=1), expected)
    np.testing.assert_array_equal(kcenter_greedy(candidates, None, 12), brute_force_kcenter(candidates, None, 12))
    np.testing.assert_array_equal(kcenter_greedy(candidates, labelled[:0], 5), brute_force_kcenter(candidates, None, 5))
    # column blocks behave like their concatenation
    blocks = kcenter_greedy([candidates[:, :3], candidates[:, 3:]], [labelled[:, :3], labelled[:, 3:]], 12, chunk_size=9)
    np.testing.assert_array_equal(blocks, expected)


def test_kcenter_respects_labelled_points_and_never_repeats():
    rng = np.random.default_rng(1)
    labelled = rng.normal(size=(5, 4))
    candidates = np.concatenate([labelled[2:3], rng.normal(loc=20.0, size=(6, 4))])
    picks = kcenter_greedy(candidates, labelled, 6)
    assert 0 not in picks and len(set(picks.tolist())) == 6
    # identical candidates: all distances vanish, yet picks stay distinct
    assert sorted(kcenter_greedy(np.ones((4, 3)), np.ones((2, 3)), 4).tolist()) == [0, 1, 2, 3]
    assert kcenter_greedy(candidates, labelled, 0).shape == (0,)
    with pytest.raises(ValueError, match="n=8"):
        kcenter_greedy(candidates, labelled, 8)
    with pytest.raises(ValueError, match="chunk_size"):
        kcenter_greedy(candidates, labelled, 2, chunk_size=0)
    with pytest.raises(ValueError, match="features"):
        kcenter_greedy(candidates, labelled[:, :3], 2)


def test_select_kcenter_uses_both_segments_observations():
    rng = np.random.default_rng(2)
    obs_0, obs_1 = rng.normal(size=(30, 3, 2)), rng.normal(size=(30, 3, 2))
    lab_0, lab_1 = rng.normal(size=(10, 3, 2)), rng.normal(size=(10, 3, 2))
    features = np.concatenate([obs_0.reshape(30, -1), obs_1.reshape(30, -1)], axis=1)
    labelled = np.concatenate([lab_0.reshape(10, -1), lab_1.reshape(10, -1)], axis=1)
    picks = select_queries(3, 5, obs_0=obs_0, obs_1=obs_1, labelled_obs_0=lab_0, labelled_obs_1=lab_1)
    np.testing.assert_array_equal(picks, brute_force_kcenter(features, labelled, 5))
    np.testing.assert_array_equal(
        select_queries("kcenter", 5, obs_0=obs_0, obs_1=obs_1), brute_force_kcenter(features, None, 5)
    )


def test_mixed_rules_keep_the_uncertain_half_then_spread():
    # 8 candidates; members disagree on 1, 3, 5, 7. Observations: {1, 3} near the origin, {5, 7} near (10, 10),
    # and the certain candidates far away (pure k-center would pick them first).
    gap = np.zeros((3, 8)) + 5.0
    gap[:, [1, 3, 5, 7]] = [[2.0], [-2.0], [0.0]]
    returns_1 = np.zeros((3, 8))
    points = np.array([[90, 90], [0, 0], [-90, 90], [0.1, 0], [90, -90], [10, 10], [-90, -90], [10, 10.1]])
    obs = points[:, None, :]
    for method, n in (("kcenter_disagreement", 2), (4, 2), ("kcenter_entropy", 2), (5, 2)):
        picks = select_queries(method, n, gap, returns_1, obs, obs)
        assert set(picks.tolist()) in ({1, 5}, {1, 7}, {3, 5}, {3, 7})
    assert set(select_queries("kcenter", 2, obs_0=obs, obs_1=obs).tolist()) <= {0, 2, 4, 6}
    # n above half the candidates: the pool is n, so all n most uncertain are returned
    assert set(select_queries(4, 5, gap, returns_1, obs, obs).tolist()) == {1, 3, 5, 7, 0}


def test_kcenter_on_read_only_dataset_views_gives_no_torch_warning():
    import warnings

    rng = np.random.default_rng(0)
    candidates, labelled = rng.normal(size=(40, 2, 3)), rng.normal(size=(7, 2, 3))
    expected = kcenter_greedy(candidates, labelled, 5)
    for array in (candidates, labelled):
        array.flags.writeable = False  # as PreferenceDataset's features_0 / features_1 are
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "NumPy array is not writable" warning would raise here
        chosen = kcenter_greedy(candidates, labelled, 5)
    np.testing.assert_array_equal(chosen, expected)
