"""The one encoding of tool- and client-defined JSON in stored documents (docs/storage.md "Stored JSON").

Values that a model, a tool or a client defines (a tool call's ``args``, ``suspendPayload`` and
``resumeSchema``; a decision's ``resumeData``, ``reason`` and ``editedArgs``; an event's ``data``; an
idempotency key's ``result``) may hold any key (``$ref``, ``a.b``, ``""``), any nesting and
integers beyond 64 bits. BSON and MongoDB-wire servers refuse some of them (FerretDB refuses keys
starting with ``$`` or holding ``.``, BSON has no integer beyond 64 bits), so they are never
stored as BSON values:

- ``MongoSnapshotStore`` stores each of these fields as JSON text in a field of its own, named
  ``<field>Json`` (``argsJson``, ``resumeDataJson``, ``dataJson``...); a document written before
  has the value itself under ``<field>``, which is still read as it is (``decode``). The fields of
  each document kind are listed once, below (``TOOL_CALL_FIELDS``...): a new JSON-bearing field
  is added to its list.
- ``SQLiteSnapshotStore`` stores whole columns as JSON text (``dumps``/``loads``).
- ``MemorySnapshotStore`` keeps Python values (deep copies).

The text is what Python's ``json`` writes (compact, UTF-8 kept), so it reads back equal: any
key, integers of any size, floats exactly (shortest repr). A string holding a lone UTF-16
surrogate, which UTF-8 cannot encode, is written with ASCII escapes instead. It is RFC 8259 JSON
(``storage.strict_json``): a float that is not finite is refused, never written as ``Infinity``;
text an older runsgate wrote with ``Infinity`` in it is still read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from . import strict_json

SUFFIX = "Json"
"""A JSON-bearing field ``f`` is stored by MongoDB as JSON text under ``f + SUFFIX``."""

TOOL_CALL_FIELDS = ("args", "suspendPayload", "resumeSchema", "answers", "approvalMetadata", "editedArgs")
"""JSON-bearing fields of a ``ToolCallDocument`` (its ``decision`` is encoded on its own)."""
DECISION_FIELDS = ("resumeData", "reason", "editedArgs")
"""JSON-bearing fields of a ``DecisionDocument``."""
EVENT_FIELDS = ("data",)
"""JSON-bearing fields of an ``EventDocument``."""
IDEMPOTENCY_FIELDS = ("result",)
"""JSON-bearing fields of an ``IdempotencyDocument``."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (UTF-8 kept; ASCII escapes when it holds a lone surrogate).

    Raises:
        TypeError: ``value`` is not JSON (plain ``dict``/``list``/``str``/``int``/``float``/
            ``bool``/``None``); callers convert first (``runtime._json.jsonable``).
        storage.strict_json.NotStrictJsonError: ``value`` holds a float that is not finite.
        ValueError: ``value`` nests deeper than Python's recursion limit allows.
    """
    text = strict_json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if not text.isascii() and _SURROGATE.search(text):
        return strict_json.dumps(value, separators=(",", ":"))
    return text


def loads(text: str) -> Any:
    """The value of JSON text written by ``dumps``, or by an older runsgate (which could write
    ``Infinity``: read as a float, shown as ``null``)."""
    return json.loads(text)


def encode(doc: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """A copy of ``doc`` with each of ``fields`` it has replaced by ``<field>Json``, its JSON text."""
    encoded = dict(doc)
    for field in fields:
        if field in encoded:
            encoded[field + SUFFIX] = dumps(encoded.pop(field))
    return encoded


def decode(doc: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """``doc`` with each ``<field>Json`` it has replaced by ``<field>``, its value (in place);
    a field stored as a value (documents written before this encoding) stays as it is."""
    for field in fields:
        text = doc.pop(field + SUFFIX, None)
        if text is not None:
            doc[field] = loads(text)
    return doc


def encode_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A ``ToolCallDocument`` as MongoDB stores it (its decision too)."""
    encoded = encode(call, TOOL_CALL_FIELDS)
    if encoded.get("decision") is not None:
        encoded["decision"] = encode(encoded["decision"], DECISION_FIELDS)
    return encoded


def decode_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """Inverse of ``encode_tool_call`` (in place)."""
    decode(call, TOOL_CALL_FIELDS)
    if call.get("decision") is not None:
        decode(call["decision"], DECISION_FIELDS)
    return call


def encode_snapshot(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A ``SnapshotDocument`` as MongoDB stores it: each tool call encoded."""
    encoded = dict(doc)
    encoded["toolCalls"] = [encode_tool_call(call) for call in doc.get("toolCalls") or []]
    return encoded


def decode_snapshot(doc: dict[str, Any]) -> dict[str, Any]:
    """Inverse of ``encode_snapshot`` (in place)."""
    for call in doc.get("toolCalls") or []:
        decode_tool_call(call)
    return doc


__all__ = [
    "DECISION_FIELDS",
    "EVENT_FIELDS",
    "IDEMPOTENCY_FIELDS",
    "SUFFIX",
    "TOOL_CALL_FIELDS",
    "decode",
    "decode_snapshot",
    "decode_tool_call",
    "dumps",
    "encode",
    "encode_snapshot",
    "encode_tool_call",
    "loads",
]
