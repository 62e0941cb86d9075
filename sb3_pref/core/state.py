"""Saved state as tensors: what SB3's ``torch.save`` / ``torch.load(weights_only=True)`` of the learner's state needs."""

from typing import Any

import numpy as np
import torch as th


def to_torch_state(value: Any) -> Any:
    """Numpy arrays to tensors (recursively), so the state loads with ``torch.load(weights_only=True)``."""
    if isinstance(value, dict):
        return {key: to_torch_state(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        # A copy: the arrays may be read-only views, and np.ascontiguousarray would make 0-d arrays 1-d.
        return th.from_numpy(value.copy())
    if isinstance(value, np.generic):
        return value.item()
    return value


def to_numpy_state(value: Any) -> Any:
    """Inverse of :func:`to_torch_state`."""
    if isinstance(value, dict):
        return {key: to_numpy_state(item) for key, item in value.items()}
    if isinstance(value, th.Tensor):
        return value.cpu().numpy()
    return value
