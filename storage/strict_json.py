"""The one JSON rule of runsgate: RFC 8259 JSON, in and out (SECURITY.md "Limits and hostile input").

``loads`` reads every JSON document a client sends; ``dumps`` (raises on ``NaN``, ``Infinity``
and numbers too large for a double) and ``dumps_shown`` (writes them as ``null``) write every one
runsgate sends or stores. In ``storage``, the lowest layer, so that every layer shares it. Why
each case: SECURITY.md "Limits and hostile input".
"""

from __future__ import annotations

import json
import math
from typing import Any


class NotStrictJsonError(ValueError):
    """Text that is not RFC 8259 JSON, or a value no RFC 8259 document holds; the message says which."""


def _constant(name: str) -> Any:
    raise NotStrictJsonError(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStrictJsonError(f"the number {text[:40]} is beyond a double's range")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise NotStrictJsonError(f"the name {name[:40]!r} appears twice in one object")
            seen.add(name)
    return value


def loads(data: str | bytes) -> Any:
    """The value of RFC 8259 JSON text whose objects each name a member once (I-JSON, RFC 7493:
    two parsers that keep the first or the last of a repeated name would read two documents).

    Raises:
        NotStrictJsonError: ``NaN``, ``Infinity``, ``-Infinity``, a number beyond a double
            (``1e999``), or a name given twice in one object.
        ValueError: Any other malformed text (``json.JSONDecodeError``), an integer over Python's
            digit limit.
        RecursionError: Nesting deeper than the parser's recursion limit.
    """
    return json.loads(data, parse_constant=_constant, parse_float=_float, object_pairs_hook=_object)


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` that refuses ``NaN`` and infinities instead of writing them.

    Raises:
        NotStrictJsonError: ``value`` holds a float that is not finite.
        TypeError: ``value`` holds something that is not JSON (and no ``default`` converts it).
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "Out of range float values" not in str(exc):
            raise
        raise NotStrictJsonError("a float that is not finite (NaN, Infinity) has no JSON form") from None


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by ``None`` (lists and dicts copied
    where they hold one; anything else is returned as it is)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def dumps_shown(value: Any, **options: Any) -> str:
    """``dumps`` for a document being shown (a reply, a webhook body): a float that is not finite,
    which only a document stored by an older runsgate can hold, is written ``null``."""
    try:
        return dumps(value, **options)
    except NotStrictJsonError:
        return dumps(finite(value), **options)


__all__ = ["NotStrictJsonError", "dumps", "dumps_shown", "finite", "loads"]
