import numpy as np
import pytest

from sb3_pref.common.entropy import StateEntropyReward


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


def test_invalid_inputs() -> None:
    reward = StateEntropyReward(obs_dim=3, capacity=10)
    with pytest.raises(ValueError, match="empty"):
        reward.knn_distance(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="obs"):
        reward.add(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="capacity"):
        StateEntropyReward(obs_dim=3, capacity=0)
