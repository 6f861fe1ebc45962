"""The one encoding of tool- and client-defined JSON in stored documents (docs/storage.md "Stored JSON").

Such values (``args``, ``suspendPayload``, ``resumeData``, event ``data``...) may hold any key and
integers beyond 64 bits, so they are stored as JSON text (``dumps``/``loads``): on MongoDB in a
field ``<field>Json`` of its own (``encode``/``decode``; the fields of each document kind are
listed below), on SQLite as whole columns; the memory store keeps Python values. Text an older runsgate wrote with
``Infinity`` is read with ``None`` in its place. Details: docs/storage.md "Stored JSON".
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
    """The value of JSON text written by ``dumps``, or by an older runsgate, which could write
    ``NaN`` and ``Infinity``: those are read as ``None`` (what the API always showed), so the
    document can be written back, decided and continued like any other."""
    value = json.loads(text)
    if "NaN" in text or "Infinity" in text:  # only then can a float that is not finite be in it
        return strict_json.finite(value)
    return value


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
        elif field in doc:  # a value an older runsgate stored as BSON, which holds infinities
            doc[field] = strict_json.finite(doc[field])
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
