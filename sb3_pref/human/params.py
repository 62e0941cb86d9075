"""
What the labelling server accepts from a request, checked before anything reaches the database: query
ids within SQLite's 64-bit integers, names of printable characters, viewer ids of a few safe characters,
JSON bodies that are objects. A value outside these ranges is the client's mistake (a 400), never a
500 raised by SQLite or the JSON parser.
"""

import json
import re
from typing import Any, Optional

from flask import request

#: The largest id SQLite's INTEGER holds; ids are positive.
MAX_ID = 2**63 - 1
#: Digits only: ``int()`` would also take " 7", "+7" and "7_0", which no page sends.
_DIGITS = re.compile(r"^[0-9]{1,19}$")
VIEWER = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_NAME = 40


class BadParameter(ValueError):
    """A query parameter outside what the server accepts; its message is the 400 reply's error."""


def parse_query_id(value: Any) -> Optional[int]:
    """:return: ``value`` if it is a JSON integer in ``[1, MAX_ID]``, else None"""
    # bool is an int subclass: {"query_id": true} must not mean query 1.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        return None
    return value


def parse_labeller(value: Any) -> tuple[bool, Optional[str]]:
    """:return: (valid, name): a missing or empty name is valid and None"""
    if value is None:
        return True, None
    if not isinstance(value, str) or len(value) > MAX_NAME or any(not char.isprintable() for char in value):
        return False, None
    return True, value.strip() or None


def json_object() -> Optional[dict]:
    """The request's JSON object body, or None for anything else (deep nesting included: no RecursionError escapes)."""
    raw = request.get_data(cache=True)  # over MAX_CONTENT_LENGTH this raises the 413 error
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def _single_arg(name: str) -> Optional[str]:
    values = request.args.getlist(name)
    if len(values) > 1:
        raise BadParameter(f"{name} is given {len(values)} times; give it once")
    return values[0] if values else None


def id_arg(name: str) -> Optional[int]:
    """
    :param name: a query parameter naming a query id (``showing``, ``last``)
    :return: its value, or None when absent
    :raises BadParameter: not a whole number in ``[1, 2**63 - 1]``
    """
    raw = _single_arg(name)
    if raw is None:
        return None
    if not _DIGITS.match(raw) or not 1 <= int(raw) <= MAX_ID:
        raise BadParameter(f"{name} must be a query id: a whole number from 1 to {MAX_ID}")
    return int(raw)


def viewer_arg() -> Optional[str]:
    """:return: the tab's id (``viewer``), or None when absent. :raises BadParameter: not 1-64 safe characters"""
    raw = _single_arg("viewer")
    if raw is not None and not VIEWER.match(raw):
        raise BadParameter("viewer must be 1-64 letters, digits, - or _")
    return raw


def name_arg() -> Optional[str]:
    """:return: the person's name (``name``), None when absent or empty. :raises BadParameter: too long or unprintable"""
    valid, name = parse_labeller(_single_arg("name"))
    if not valid:
        raise BadParameter(f"name must be at most {MAX_NAME} printable characters")
    return name
