"""How the memory store copies documents in and out, and what a write keeps: dicts and lists
copied, immutable scalars shared, a float that is not finite refused as the other stores refuse it."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from ..documents import EventDocument, RunUpdateBatchDocument
from ..strict_json import NotStrictJsonError

_T = TypeVar("_T")
_IMMUTABLE = (str, int, float, bool, bytes, datetime, type(None))


def copied(value: _T) -> _T:
    """A deep copy of a stored document or value: dicts and lists are copied, immutable scalars
    (str, numbers, datetimes, None) shared, which costs less than ``copy.deepcopy`` on these
    shapes; anything else falls back to it.

    Raises:
        storage.strict_json.NotStrictJsonError: A float that is not finite, which the other stores
            cannot hold either (RFC 8259 JSON).
    """
    return cast(_T, _copy_any(value))


_SHARED = frozenset((str, int, bool, bytes, datetime, type(None)))
"""Exact types shared as they are without a call: most of a document's values."""


def _copy_any(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SHARED else _copy_any(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SHARED else _copy_any(v) for v in value]
    if kind is float and not math.isfinite(value):
        raise NotStrictJsonError("a float that is not finite (NaN, Infinity) has no JSON form")
    if isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)


def kept(
    events: Sequence[EventDocument], updates: Sequence[RunUpdateBatchDocument] = (), value: Any = None
) -> tuple[list[EventDocument], list[RunUpdateBatchDocument], Any]:
    """The store's own copies of what one write keeps (its events, update batches and one other
    value), made in one ``copied`` before the write changes anything: a float that is not finite
    refuses the whole write (``NotStrictJsonError``)."""
    copies: list[Any] = _copy_any([list(events), list(updates), value])
    return copies[0], copies[1], copies[2]


__all__ = ["copied", "kept"]
