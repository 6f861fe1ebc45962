"""Query conditions of ``MongoSnapshotStore`` that mean the same on every MongoDB-wire engine.

MongoDB reads ``{"toolCalls.0.decision": None}`` as "the field is null or missing", and so does
FerretDB 1.24. DocumentDB (FerretDB 2.5's engine) matches a comparison with null through an
array index on every document, whatever the field holds: a decided call would look undecided
(docs/storage.md "Conditions that mean the same on every engine"). ``$exists`` and ``$type`` mean
the same on all three. So the store never compares a field with null (``$eq``, ``$in``, ``$lte``...
included): a condition on "no value" is ``no_value``. The storage tests watch every condition the
store sends for a comparison with null (``tests/storage/_null_conditions.py``).
"""

from __future__ import annotations

from typing import Any

HAS_VALUE: dict[str, Any] = {"$exists": True, "$not": {"$type": "null"}}
"""A field's condition: it is there and not null."""


def no_value(*paths: str) -> dict[str, Any]:
    """The condition that none of ``paths`` (dotted, array indexes included) holds a value: each
    is missing or null, what ``{path: None}`` means on MongoDB. One ``$nor``, to merge into a
    query's field conditions; a query (or ``$or`` branch) takes one, naming all its paths."""
    return {"$nor": [{path: HAS_VALUE} for path in paths]}
