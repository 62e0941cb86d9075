"""Pairs of segments as ``.npz`` bytes: how a query's segments are kept in the label store."""

import io
from collections.abc import Sequence

import numpy as np

from sb3_pref.core.segments import SegmentBatch


def pack_pair(seg_0: SegmentBatch, seg_1: SegmentBatch, index: int) -> bytes:
    """Pair ``index`` of two batches as ``.npz`` bytes (numpy arrays only: loading never unpickles)."""
    arrays: dict[str, np.ndarray] = {}
    for side, segments in enumerate((seg_0, seg_1)):
        arrays[f"obs_{side}"] = segments.obs[index]
        arrays[f"actions_{side}"] = segments.actions[index]
        arrays[f"rewards_{side}"] = segments.rewards[index]
        arrays[f"env_index_{side}"] = np.asarray(segments.env_index[index])
        arrays[f"start_{side}"] = np.asarray(segments.start[index])
        for name, values in segments.extras.items():
            arrays[f"extra_{side}_{name}"] = values[index]
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle only
    return buffer.getvalue()


def unpack_pairs(blobs: Sequence[bytes]) -> tuple[SegmentBatch, SegmentBatch]:
    """Inverse of :func:`pack_pair` for several pairs, stacked into two batches."""
    pairs = []
    for blob in blobs:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            pairs.append({name: archive[name] for name in archive.files})
    batches = []
    for side in (0, 1):
        prefix = f"extra_{side}_"
        extra_names = [name[len(prefix) :] for name in pairs[0] if name.startswith(prefix)]
        batches.append(
            SegmentBatch(
                obs=np.stack([pair[f"obs_{side}"] for pair in pairs]),
                actions=np.stack([pair[f"actions_{side}"] for pair in pairs]),
                rewards=np.stack([pair[f"rewards_{side}"] for pair in pairs]),
                env_index=np.array([pair[f"env_index_{side}"] for pair in pairs], dtype=np.int64),
                start=np.array([pair[f"start_{side}"] for pair in pairs], dtype=np.int64),
                extras={name: np.stack([pair[prefix + name] for pair in pairs]) for name in extra_names},
            )
        )
    return batches[0], batches[1]
