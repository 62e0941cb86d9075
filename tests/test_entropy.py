import numpy as np
import pytest

from sb3_pref.core.entropy import StateEntropyReward


def brute_force_knn(queries: np.ndarray, stored: np.ndarray, k: int) -> np.ndarray:
    """k-th neighbour distance with exactly one self match (distance 0) excluded, in float64."""
    distances = np.sqrt(((queries[:, None, :].astype(np.float64) - stored[None, :, :]) ** 2).sum(-1))
    return np.sort(distances, axis=1)[:, min(k, len(stored) - 1)]


def data_with_duplicates(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, dim)).astype(np.float32) * 3.0
    obs[n // 2 : n // 2 + 10] = obs[:10]  # exact duplicates: a query then has zero-distance neighbours
    obs[n - 3 :] = obs[0]
    return obs


def test_knn_matches_brute_force_with_duplicates() -> None:
    obs = data_with_duplicates(300, 4, seed=0)
    reward = StateEntropyReward(obs_dim=4, capacity=1000, k=5)
    reward.add(obs)
    got = reward.knn_distance(obs)
    assert got.dtype == np.float32 and got.shape == (300,)
    np.testing.assert_allclose(got, brute_force_knn(obs, obs, k=5), rtol=1e-5, atol=1e-6)
    # obs[0] has 4 copies besides itself: its 5th neighbour is a genuinely different row.
    assert got[0] > 0
    assert brute_force_knn(obs[:1], obs, k=4)[0] == 0.0


def test_knn_stays_exact_far_from_the_origin() -> None:
    # Neighbours are ranked with a matmul; observations at 1e4 from the origin would make its rounding
    # (about 1e-7 * |s|^2 = 40 in squared distance) larger than the distances themselves without centring.
    obs = data_with_duplicates(400, 4, seed=3) + np.float32(1e4)
    reward = StateEntropyReward(obs_dim=4, capacity=1000, k=5, max_chunk_bytes=4096)
    reward.add(obs)
    np.testing.assert_allclose(reward.knn_distance(obs), brute_force_knn(obs, obs, k=5), rtol=1e-3, atol=2e-3)


def test_chunked_equals_unchunked() -> None:
    obs = data_with_duplicates(257, 6, seed=1)
    whole = StateEntropyReward(obs_dim=6, capacity=512)
    tiny = StateEntropyReward(obs_dim=6, capacity=512, max_chunk_bytes=3000)  # 2 queries per chunk
    for reward in (whole, tiny):
        reward.add(obs)
    np.testing.assert_array_equal(tiny.knn_distance(obs), whole.knn_distance(obs))


def test_fewer_rows_than_k_uses_largest_distance() -> None:
    obs = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]], dtype=np.float32)
    reward = StateEntropyReward(obs_dim=2, capacity=10, k=5)
    reward.add(obs)
    np.testing.assert_allclose(reward.knn_distance(obs), [10.0, 5.0, 10.0])


def test_compute_divides_by_running_std_of_all_distances() -> None:
    rng = np.random.default_rng(2)
    reward = StateEntropyReward(obs_dim=3, capacity=10_000, k=5)
    stored = np.zeros((0, 3), dtype=np.float32)
    seen = []
    for n in (50, 120, 80):
        batch = (rng.normal(size=(n, 3)) * 2.0 + 5.0).astype(np.float32)
        stored = np.concatenate([stored, batch])
        out = reward.compute(batch)
        distances = brute_force_knn(batch, stored, k=5)
        seen.append(distances)
        # Population std over every distance seen so far; the reward is not mean-centred.
        expected_std = np.std(np.concatenate(seen))
        assert reward.distance_std == pytest.approx(expected_std, rel=1e-4)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, distances / expected_std, rtol=1e-4)
        assert np.all(out > 0)


def test_ring_capacity_and_state_round_trip() -> None:
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(25, 2)).astype(np.float32)
    reward = StateEntropyReward(obs_dim=2, capacity=10, k=2)
    reward.add(obs[:7])
    reward.add(obs[7:])
    assert reward.size == 10
    state = reward.state_dict()
    np.testing.assert_array_equal(state["buffer"], obs[15:])  # the newest 10, oldest first
    np.testing.assert_allclose(reward.knn_distance(obs[15:]), brute_force_knn(obs[15:], obs[15:], k=2), rtol=1e-5)
    reward.compute(obs[:5])  # the store now holds obs[20:25] then obs[:5]

    restored = StateEntropyReward(obs_dim=2, capacity=10, k=2)
    restored.load_state_dict({name: np.asarray(value) for name, value in reward.state_dict().items()})
    new_batch = rng.normal(size=(4, 2)).astype(np.float32)
    np.testing.assert_array_equal(restored.compute(new_batch), reward.compute(new_batch))
    np.testing.assert_array_equal(restored.state_dict()["buffer"], reward.state_dict()["buffer"])
    assert restored.distance_std == reward.distance_std


@pytest.mark.parametrize("k, chunk_bytes", [(5, 64 * 2**20), (3, 200), (1, 64 * 2**20)])
def test_score_rows_looks_up_what_the_knn_search_finds_as_rows_arrive(k: int, chunk_bytes: int) -> None:
    # PEBBLE scores a batch against the whole set at every gradient step; score_rows reads neighbour lists that
    # add() keeps up to date instead. Rows arrive one by one (a SAC step) and in batches, duplicates included,
    # and the first call builds the lists from rows already there.
    obs = data_with_duplicates(700, 4, seed=4)
    lookup = StateEntropyReward(obs_dim=4, capacity=1000, k=k, max_chunk_bytes=chunk_bytes)
    search = StateEntropyReward(obs_dim=4, capacity=1000, k=k)
    rng = np.random.default_rng(5)
    begin = 0
    for size in [1, 1, 3, 1, 1, 40, 1, 300, 1, 2, 1, 100] + [1] * 40:
        for reward in (lookup, search):
            reward.add(obs[begin : begin + size])
        begin += size
        rows = rng.integers(0, lookup.size, size=32)
        # Both update their running std with the same distances, so the rewards match exactly.
        np.testing.assert_array_equal(lookup.score_rows(rows), search.score(obs[rows]))
    assert lookup._neighbours is not None and lookup.distance_std == search.distance_std
    np.testing.assert_allclose(
        lookup._neighbours[:begin, k - 1].numpy(), brute_force_knn(obs[:begin], obs[:begin], k=k), rtol=1e-5, atol=1e-6
    )


def test_score_rows_after_rows_are_overwritten_or_reloaded() -> None:
    obs = data_with_duplicates(40, 3, seed=6)
    reward = StateEntropyReward(obs_dim=3, capacity=16, k=2)
    search = StateEntropyReward(obs_dim=3, capacity=16, k=2)
    for part in (obs[:10], obs[10:30]):  # the second add overwrites: lists could name rows that are gone
        reward.add(part)
        search.add(part)
        rows = np.arange(reward.size)
        np.testing.assert_array_equal(reward.score_rows(rows), search.score(search.buffer[rows].numpy()))
    restored = StateEntropyReward(obs_dim=3, capacity=32, k=2)
    restored.load_state_dict(reward.state_dict())  # oldest first: lists are built over the reordered rows
    restored.add(obs[30:31])
    rows = np.arange(restored.size)
    stored = restored.buffer[: restored.size].numpy()
    expected = brute_force_knn(stored, stored, k=2)
    np.testing.assert_allclose(restored.score_rows(rows) * restored.distance_std, expected, rtol=1e-5, atol=1e-6)
    assert restored._neighbours is not None  # the lookup, not the search
    with pytest.raises(ValueError, match="rows must be in"):
        restored.score_rows(np.array([17]))


def test_invalid_inputs() -> None:
    reward = StateEntropyReward(obs_dim=3, capacity=10)
    with pytest.raises(ValueError, match="empty"):
        reward.knn_distance(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="obs"):
        reward.add(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="capacity"):
        StateEntropyReward(obs_dim=3, capacity=0)
