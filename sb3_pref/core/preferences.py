"""Labelled segment pairs in a bounded store, saved to and loaded from pickle-free ``.npz`` files."""

import os
import tempfile
import zipfile
from typing import Optional, Union

import numpy as np

from sb3_pref.core.segments import SegmentBatch

# First allocation in pairs; storage then doubles up to ``capacity`` so a large capacity costs nothing up front.
_INITIAL_ALLOCATION = 64
_ARRAY_NAMES = ("features_0", "features_1", "rewards_0", "rewards_1", "labels")

_SCALAR_NAMES = ("capacity", "segment_length", "feature_dim")


def _check_state(state: dict[str, np.ndarray]) -> None:
    """Refuse, with the reason, a state that :meth:`PreferenceDataset.state_dict` cannot have written."""
    missing = [name for name in (*_ARRAY_NAMES, *_SCALAR_NAMES) if name not in state]
    if missing:
        raise ValueError(
            f"not a PreferenceDataset state: it lacks {missing} (it holds {sorted(state)}); "
            "load files written by PreferenceDataset.save"
        )
    labels = np.asarray(state["labels"])
    n_pairs = labels.shape[0] if labels.ndim == 1 else -1
    if n_pairs < 0:
        raise ValueError(f"labels has shape {labels.shape}, expected (N,)")
    features_0, features_1 = np.asarray(state["features_0"]), np.asarray(state["features_1"])
    if features_0.ndim != 3 or features_0.shape != features_1.shape or len(features_0) != n_pairs:
        raise ValueError(
            f"inconsistent lengths: features_0 {features_0.shape}, features_1 {features_1.shape}, labels {labels.shape}; "
            "expected (N, H, D), (N, H, D), (N,)"
        )
    for name in ("rewards_0", "rewards_1"):
        if np.shape(state[name]) != features_0.shape[:2]:
            raise ValueError(f"inconsistent lengths: {name} has shape {np.shape(state[name])}, not {features_0.shape[:2]}")
    if n_pairs > 0:
        stated = (int(state["segment_length"]), int(state["feature_dim"]))
        if stated != features_0.shape[1:]:
            raise ValueError(f"segment_length, feature_dim = {stated} do not match the features' {features_0.shape[1:]}")
        if not (np.isfinite(labels).all() and ((labels >= 0) & (labels <= 1)).all()):
            bad = labels[~(np.isfinite(labels) & (labels >= 0) & (labels <= 1))]
            raise ValueError(f"labels must lie in [0, 1] (1 second preferred, 0 first, 0.5 equal), found {bad[:5].tolist()}")
        for name in _ARRAY_NAMES[:4]:
            if not np.isfinite(np.asarray(state[name], dtype=np.float64)).all():
                raise ValueError(f"{name} contains NaN or inf values")


class PreferenceDataset:
    """
    The labelled pairs a reward model learns from. Labels follow the project convention: ``1.0``
    means the second segment is preferred, ``0.0`` the first, ``0.5`` equal; ``NaN`` (skipped) labels
    are dropped on :meth:`add`. Past ``capacity`` pairs the oldest are overwritten.

    The ``features_*``, ``rewards_*`` and ``labels`` properties return read-only arrays in insertion
    order (oldest first): views of the storage until the store first overflows, copies afterwards.
    Either way, read them again after :meth:`add` rather than holding on to them.

    :param capacity: maximum number of pairs kept
    """

    def __init__(self, capacity: int = 100_000) -> None:
        if not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity must be an int >= 1, got {capacity!r}")
        self.capacity = int(capacity)
        self.segment_length: Optional[int] = None
        self.feature_dim: Optional[int] = None
        self._storage: dict[str, np.ndarray] = {}
        self._pos = 0  # next row written
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def _allocate(self, rows: int) -> None:
        """Grow the storage to ``rows`` pairs, keeping its contents (only called before the first overflow)."""
        assert self.segment_length is not None and self.feature_dim is not None
        horizon, width = self.segment_length, self.feature_dim
        shapes = {
            "features_0": (rows, horizon, width),
            "features_1": (rows, horizon, width),
            "rewards_0": (rows, horizon),
            "rewards_1": (rows, horizon),
            "labels": (rows,),
        }
        for name, shape in shapes.items():
            grown = np.zeros(shape, dtype=np.float32)
            if name in self._storage:
                grown[: self._size] = self._storage[name][: self._size]
            self._storage[name] = grown

    def _check_shape(self, horizon: int, width: int) -> None:
        if self.segment_length is None:
            self.segment_length, self.feature_dim = horizon, width
        elif (horizon, width) != (self.segment_length, self.feature_dim):
            raise ValueError(
                f"segments have length {horizon} and feature width {width}, but the dataset holds "
                f"length {self.segment_length} and width {self.feature_dim}"
            )

    def add(self, seg_0: SegmentBatch, seg_1: SegmentBatch, labels: np.ndarray) -> int:
        """
        :param seg_0: the first segment of every pair
        :param seg_1: the second segment of every pair
        :param labels: ``(N,)`` labels in ``[0, 1]`` or ``NaN`` (skipped, not stored)
        :return: how many pairs were stored
        """
        labels = np.asarray(labels, dtype=np.float32).reshape(-1)
        features_0, features_1 = seg_0.features, seg_1.features
        if not (len(features_0) == len(features_1) == len(labels)):
            raise ValueError(f"seg_0, seg_1 and labels differ in length: {len(features_0)}, {len(features_1)}, {len(labels)}")
        if features_0.ndim != 3 or features_0.shape != features_1.shape:
            raise ValueError(
                f"seg_0 and seg_1 must share segment length and feature width, got {features_0.shape} and {features_1.shape}"
            )
        for name, segments in (("seg_0", seg_0), ("seg_1", seg_1)):
            if np.shape(segments.rewards) != features_0.shape[:2]:
                raise ValueError(f"{name}.rewards has shape {np.shape(segments.rewards)}, expected {features_0.shape[:2]}")
        labelled = ~np.isnan(labels)
        if np.any((labels[labelled] < 0) | (labels[labelled] > 1)):
            raise ValueError("labels must lie in [0, 1] (or be NaN for skipped pairs)")
        self._check_shape(features_0.shape[1], features_0.shape[2])
        rows = {
            "features_0": features_0[labelled],
            "features_1": features_1[labelled],
            "rewards_0": np.asarray(seg_0.rewards)[labelled],
            "rewards_1": np.asarray(seg_1.rewards)[labelled],
            "labels": labels[labelled],
        }
        # More new pairs than capacity: only the newest could survive anyway.
        rows = {name: values[-self.capacity :] for name, values in rows.items()}
        self._write(rows)
        return int(labelled.sum())

    def _write(self, rows: dict[str, np.ndarray]) -> None:
        n_new = len(rows["labels"])
        if n_new == 0:
            return
        allocated = len(self._storage["labels"]) if self._storage else 0
        if self._size + n_new > allocated:
            target = max(allocated, _INITIAL_ALLOCATION)
            while target < self._size + n_new:
                target *= 2
            target = min(target, self.capacity)
            if target > allocated:
                self._allocate(target)
        index = (self._pos + np.arange(n_new)) % self.capacity
        for name, values in rows.items():
            self._storage[name][index] = values
        self._pos = (self._pos + n_new) % self.capacity
        self._size = min(self._size + n_new, self.capacity)

    def _ordered(self, name: str) -> np.ndarray:
        if self._size == 0:
            empty_shapes = {"features_0": 3, "features_1": 3, "rewards_0": 2, "rewards_1": 2, "labels": 1}
            horizon, width = self.segment_length or 0, self.feature_dim or 0
            return np.zeros((0, horizon, width)[: empty_shapes[name]], dtype=np.float32)
        storage = self._storage[name]
        oldest = (self._pos - self._size) % self.capacity
        if oldest == 0:
            array = storage[: self._size].view()
        else:
            array = np.concatenate([storage[oldest : self._size], storage[:oldest]])
        array.flags.writeable = False
        return array

    @property
    def features_0(self) -> np.ndarray:
        """:return: ``(N, H, D)`` features of the first segments"""
        return self._ordered("features_0")

    @property
    def features_1(self) -> np.ndarray:
        """:return: ``(N, H, D)`` features of the second segments"""
        return self._ordered("features_1")

    @property
    def rewards_0(self) -> np.ndarray:
        """:return: ``(N, H)`` true rewards of the first segments"""
        return self._ordered("rewards_0")

    @property
    def rewards_1(self) -> np.ndarray:
        """:return: ``(N, H)`` true rewards of the second segments"""
        return self._ordered("rewards_1")

    @property
    def labels(self) -> np.ndarray:
        """:return: ``(N,)`` labels, ``1.0`` = second segment preferred, ``0.5`` = equal"""
        return self._ordered("labels")

    def state_dict(self) -> dict[str, np.ndarray]:
        """:return: the dataset as numpy arrays only, pairs oldest first (safe for ``np.savez``, no pickle)"""
        state = {name: self._ordered(name) for name in _ARRAY_NAMES}
        state["capacity"] = np.asarray(self.capacity, dtype=np.int64)
        # -1 marks "not known yet", so an empty dataset round-trips too.
        state["segment_length"] = np.asarray(-1 if self.segment_length is None else self.segment_length, dtype=np.int64)
        state["feature_dim"] = np.asarray(-1 if self.feature_dim is None else self.feature_dim, dtype=np.int64)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """
        Replace the contents with a saved state. This dataset keeps its own ``capacity``: if the state
        holds more pairs, only the newest are kept.

        :param state: a state from :meth:`state_dict`
        """
        _check_state(state)
        segment_length, feature_dim = int(state["segment_length"]), int(state["feature_dim"])
        self.segment_length = None if segment_length < 0 else segment_length
        self.feature_dim = None if feature_dim < 0 else feature_dim
        self._storage, self._pos, self._size = {}, 0, 0
        if self.segment_length is None or len(state["labels"]) == 0:
            return
        self._write({name: np.asarray(state[name], dtype=np.float32)[-self.capacity :] for name in _ARRAY_NAMES})

    def save(self, path: Union[str, os.PathLike]) -> None:
        """
        Write the dataset to an ``.npz`` file at exactly ``path`` (no suffix is appended). The file is
        written next to its destination first and then renamed, so a crash never leaves half a file.

        :param path: destination file
        """
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        handle, tmp_path = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".npz")
        try:
            with os.fdopen(handle, "wb") as file:
                np.savez(file, **self.state_dict())  # type: ignore[arg-type]  # numpy's stub types allow_pickle only
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp_path, path)
        except BaseException:
            if os.path.exists(tmp_path):
                os.remove(tmp_path)
            raise

    @classmethod
    def load(cls, path: Union[str, os.PathLike], capacity: Optional[int] = None) -> "PreferenceDataset":
        """
        :param path: a file written by :meth:`save`
        :param capacity: capacity of the loaded dataset; by default the saved one
        :return: the dataset
        """
        try:
            with np.load(path, allow_pickle=False) as archive:
                state = {name: archive[name] for name in archive.files}
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
            if isinstance(error, FileNotFoundError):
                raise
            raise ValueError(
                f"path={os.fspath(path)!r} is not a readable .npz file ({error}): it is truncated or corrupted, "
                "or not written by PreferenceDataset.save"
            ) from error
        try:
            _check_state(state)
        except ValueError as error:
            raise ValueError(f"path={os.fspath(path)!r}: {error}") from error
        dataset = cls(int(state["capacity"]) if capacity is None else capacity)
        dataset.load_state_dict(state)
        return dataset
