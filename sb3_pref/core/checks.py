"""
Checks of single arguments (ints, floats, flags), with messages that name the argument, the value received
and what to pass instead: a wrong type raises ``TypeError``, an impossible value ``ValueError``. They know
nothing of the preference core, so every module can use them (:mod:`sb3_pref.common.validation` has the
checks that do).
"""

import math
import sys
from types import FrameType
from typing import Any, Optional

import numpy as np


def _type_name(value: Any) -> str:
    return type(value).__name__


def check_int(name: str, value: Any, minimum: int = 1, example: Optional[int] = None) -> int:
    """
    An integer argument: ints, numpy integers and integral floats (``1e6``) pass; ``bool``, strings and
    fractional floats do not (a budget of ``10.7`` queries is a mistake, not something to truncate).

    :param name: the argument's name, as the user wrote it
    :param value: the value received
    :param minimum: the smallest allowed value
    :param example: a valid value shown in the message (default: ``minimum``)
    :return: the value as an int
    """
    example = minimum if example is None else example
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise TypeError(f"{name} must be an integer, got {value!r} (a {_type_name(value)}): pass e.g. {name}={example}")
    if isinstance(value, (float, np.floating)) and not (math.isfinite(value) and float(value).is_integer()):
        raise ValueError(f"{name} must be a whole number, got {value!r} (not rounded for you): pass e.g. {name}={example}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}: pass e.g. {name}={example}")
    return int(value)


def check_optional_int(name: str, value: Any, minimum: int = 1, example: Optional[int] = None) -> Optional[int]:
    """:func:`check_int`, with None allowed (and returned as is)."""
    return None if value is None else check_int(name, value, minimum, example)


def check_positive_float(name: str, value: Any, example: float) -> float:
    """A finite float > 0 (learning rates and the like)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r} (a {_type_name(value)}): pass e.g. {name}={example}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}: pass e.g. {name}={example}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """A flag: ``bool`` or ``0``/``1`` (B-Pref's scripts pass ints); anything else, strings above all, is refused."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} (a {_type_name(value)})")


#: the packages a warning's stack passes through between the user's ``learn`` call and the library's code
_LIBRARY_PACKAGES = ("sb3_pref", "stable_baselines3", "sb3_contrib")


def user_stacklevel() -> int:
    """
    The ``stacklevel`` that points a warning at the first caller outside sb3_pref and SB3 (the line that called
    ``learn``), also from code SB3 calls back during a rollout.
    """
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _LIBRARY_PACKAGES:
        frame, level = frame.f_back, level + 1
    return level
