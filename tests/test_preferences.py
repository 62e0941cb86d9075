import os
from pathlib import Path

import numpy as np
import pytest

from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.segments import SegmentBatch

H, OBS_DIM, ACT_DIM = 4, 3, 2


def make_segments(ids: np.ndarray, offset: float = 0.0, horizon: int = H) -> SegmentBatch:
    """Segments whose every value encodes the pair id, so stored rows can be traced back."""
    ids = np.asarray(ids, dtype=np.float32)
    base = ids[:, None, None] + offset
    return SegmentBatch(
        obs=(np.broadcast_to(base, (len(ids), horizon, OBS_DIM)) + np.arange(OBS_DIM) * 0.01).astype(np.float32),
        actions=np.broadcast_to(-base, (len(ids), horizon, ACT_DIM)).astype(np.float32),
        rewards=np.broadcast_to(base[..., 0] + np.arange(horizon), (len(ids), horizon)).astype(np.float32),
        env_index=np.zeros(len(ids), dtype=np.int64),
        start=np.arange(len(ids), dtype=np.int64),
    )


def add_pairs(dataset: PreferenceDataset, ids: np.ndarray, labels: np.ndarray) -> int:
    return dataset.add(make_segments(ids), make_segments(ids, offset=0.5), labels)


def assert_holds(dataset: PreferenceDataset, ids: list, labels: list) -> None:
    assert len(dataset) == len(ids)
    np.testing.assert_array_equal(dataset.labels, labels)
    np.testing.assert_array_equal(dataset.features_0, make_segments(ids).features)
    np.testing.assert_array_equal(dataset.features_1, make_segments(ids, offset=0.5).features)
    np.testing.assert_array_equal(dataset.rewards_0, make_segments(ids).rewards)
    np.testing.assert_array_equal(dataset.rewards_1, make_segments(ids, offset=0.5).rewards)


def test_nan_labels_are_dropped() -> None:
    dataset = PreferenceDataset(capacity=100)
    stored = add_pairs(dataset, np.arange(5), np.array([0.0, np.nan, 1.0, 0.5, np.nan]))
    assert stored == 3
    assert_holds(dataset, [0, 2, 3], [0.0, 1.0, 0.5])
    assert dataset.features_0.shape == (3, H, OBS_DIM + ACT_DIM)
    assert add_pairs(dataset, np.arange(2), np.array([np.nan, np.nan])) == 0
    assert len(dataset) == 3


def test_capacity_drops_oldest() -> None:
    dataset = PreferenceDataset(capacity=5)
    add_pairs(dataset, np.arange(3), np.array([0.0, 1.0, 0.0]))
    add_pairs(dataset, np.arange(3, 7), np.array([1.0, 0.5, 0.0, 1.0]))
    assert_holds(dataset, [2, 3, 4, 5, 6], [0.0, 1.0, 0.5, 0.0, 1.0])
    add_pairs(dataset, np.arange(7, 9), np.array([0.5, 0.5]))
    assert_holds(dataset, [4, 5, 6, 7, 8], [0.5, 0.0, 1.0, 0.5, 0.5])
    # More pairs than capacity in one call: the newest survive.
    add_pairs(dataset, np.arange(10, 17), np.zeros(7))
    assert_holds(dataset, [12, 13, 14, 15, 16], [0.0] * 5)


def test_storage_grows_lazily() -> None:
    dataset = PreferenceDataset(capacity=1_000_000)
    add_pairs(dataset, np.arange(3), np.zeros(3))
    # Private peek: a huge capacity must not be allocated up front.
    assert len(dataset._storage["features_0"]) == 64
    add_pairs(dataset, np.arange(3, 200), np.ones(197))
    assert len(dataset._storage["features_0"]) == 256
    assert_holds(dataset, list(range(200)), [0.0] * 3 + [1.0] * 197)


def test_arrays_are_read_only() -> None:
    dataset = PreferenceDataset(capacity=3)
    add_pairs(dataset, np.arange(4), np.ones(4))  # wraps: ordered copies
    with pytest.raises(ValueError):
        dataset.labels[0] = 0.0
    fresh = PreferenceDataset(capacity=10)
    add_pairs(fresh, np.arange(2), np.ones(2))  # not wrapped: views
    with pytest.raises(ValueError):
        fresh.features_0[0] = 0.0


def test_invalid_inputs() -> None:
    dataset = PreferenceDataset(capacity=10)
    add_pairs(dataset, np.arange(2), np.ones(2))
    with pytest.raises(ValueError, match="length"):
        dataset.add(make_segments([0], horizon=H + 1), make_segments([0], horizon=H + 1), np.ones(1))
    with pytest.raises(ValueError, match="seg_0"):
        dataset.add(make_segments([0]), make_segments([0], horizon=H + 1), np.ones(1))
    with pytest.raises(ValueError, match="labels"):
        add_pairs(dataset, np.arange(2), np.array([0.0, 2.0]))
    with pytest.raises(ValueError, match="length"):
        add_pairs(dataset, np.arange(2), np.ones(3))
    with pytest.raises(ValueError, match="capacity"):
        PreferenceDataset(capacity=0)
    assert len(dataset) == 2


@pytest.mark.parametrize("n_pairs", [0, 4, 9])
def test_save_load_round_trip(tmp_path: Path, n_pairs: int) -> None:
    dataset = PreferenceDataset(capacity=6)
    labels = np.array([0.0, 1.0, 0.5, 1.0, 0.0, 0.5, 1.0, 0.0, 0.5])[:n_pairs]
    add_pairs(dataset, np.arange(n_pairs), labels)
    path = tmp_path / "prefs.data"  # no .npz suffix: the exact path is kept
    dataset.save(path)
    assert os.listdir(tmp_path) == ["prefs.data"]  # no temp file left behind
    with np.load(path, allow_pickle=False) as archive:
        assert {"features_0", "features_1", "rewards_0", "rewards_1", "labels", "capacity"} <= set(archive.files)
    loaded = PreferenceDataset.load(path)
    assert loaded.capacity == 6 and len(loaded) == len(dataset) == min(n_pairs, 6)
    for name in ("features_0", "features_1", "rewards_0", "rewards_1", "labels"):
        assert np.array_equal(getattr(loaded, name), getattr(dataset, name))
    # Both keep behaving the same after the round trip.
    for target in (dataset, loaded):
        add_pairs(target, np.arange(20, 23), np.array([1.0, 0.0, 0.5]))
    for name in ("features_0", "rewards_1", "labels"):
        assert np.array_equal(getattr(loaded, name), getattr(dataset, name))


def test_load_with_smaller_capacity_keeps_newest(tmp_path: Path) -> None:
    dataset = PreferenceDataset(capacity=10)
    add_pairs(dataset, np.arange(6), np.array([0.0, 1.0, 0.5, 1.0, 0.0, 0.5]))
    dataset.save(tmp_path / "prefs.npz")
    loaded = PreferenceDataset.load(tmp_path / "prefs.npz", capacity=4)
    assert loaded.capacity == 4
    assert_holds(loaded, [2, 3, 4, 5], [0.5, 1.0, 0.0, 0.5])
