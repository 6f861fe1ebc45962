"""``storage.rules`` conditions as MongoDB filters that mean the same on every MongoDB-wire engine.

MongoDB and FerretDB 1.24 read ``{"toolCalls.0.decision": None}`` as "null or missing"; DocumentDB
(FerretDB 2.5's engine) matches a comparison with null through an array index on every document
(docs/storage.md "Conditions that mean the same on every engine"). ``$exists`` and ``$type`` mean
the same on all three, so no filter made here compares a field with null (``$eq``, ``$in``,
``$lte``... included): "no value" is ``no_value``. The storage tests watch every condition the
store sends for a comparison with null (``tests/storage/_null_conditions.py``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..rules import AllOf, AnyOf, AtMost, Before, Condition, Equals, Length, NoValue

Document = dict[str, Any]

HAS_VALUE: Document = {"$exists": True, "$not": {"$type": "null"}}
"""A field's condition: it is there and not null."""


def no_value(*paths: str) -> Document:
    """The condition that none of ``paths`` (dotted, array indexes included) holds a value: each
    is missing or null, what ``{path: None}`` means on MongoDB. One ``$nor``, to merge into a
    query's field conditions (``merged`` joins two)."""
    return {"$nor": [{path: HAS_VALUE} for path in paths]}


def merged(*filters: Document) -> Document:
    """One filter meaning all of ``filters``: their fields side by side, their ``$nor`` lists and
    ``$and`` lists joined, and any other field two of them name (``$or`` included) under ``$and``."""
    result: Document = {}
    both: list[Document] = []
    for one in filters:
        for key, value in one.items():
            if key not in result:
                result[key] = list(value) if key in ("$nor", "$and") else value
            elif key in ("$nor", "$and"):
                result[key] = [*result[key], *value]
            else:
                both.append({key: value})
    if both:
        result["$and"] = [*result.get("$and", []), *both]
    return result


def compiled(condition: Condition) -> Document:
    """The MongoDB filter of ``condition``: the documents it finds are those ``rules.matches``
    accepts. ``Length(path, n)``: item ``n`` missing and, unless ``n`` is 0, item ``n - 1`` there.

    Raises:
        TypeError: ``condition`` is not one of ``storage.rules``'s conditions.
    """
    match condition:
        case Equals(path, value):
            return {path: value}
        case NoValue(path):
            return no_value(path)
        case Before(path, value):
            return {path: {"$lt": _ceil_ms(value)}}
        case AtMost(path, value):
            return {path: {"$lte": value}}
        case Length(path, count):
            length: Document = {f"{path}.{count}": {"$exists": False}}
            if count > 0:
                length[f"{path}.{count - 1}"] = {"$exists": True}
            return length
        case AllOf(conditions):
            return merged(*(compiled(one) for one in conditions))
        case AnyOf(conditions):
            return {"$or": [compiled(one) for one in conditions]}
    raise TypeError(f"not a condition: {condition!r}")


def _ceil_ms(value: datetime) -> datetime:
    """``value`` rounded up to the millisecond. BSON dates are whole milliseconds and PyMongo drops
    a bound's sub-millisecond part; a stored ``m`` is before ``value`` iff it is before this."""
    extra = value.microsecond % 1000
    return value if extra == 0 else value + timedelta(microseconds=1000 - extra)


__all__ = ["HAS_VALUE", "compiled", "merged", "no_value"]
