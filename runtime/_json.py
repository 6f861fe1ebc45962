"""JSON helpers: canonical encoding, fingerprints, and stored documents to / from JSON.

Stored documents hold ``datetime`` values (UTC); their JSON form holds RFC 3339 strings.
The fields that are datetimes are known from ``storage.documents``, so decoding converts
exactly those back and leaves user data (args, payloads, resume data) untouched.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, cast

from pydantic_core import to_jsonable_python

from storage import DecisionDocument, SnapshotDocument


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (pydantic models, dataclasses, datetimes converted)."""
    return to_jsonable_python(value)


def canonical_json(value: Any) -> str:
    """Deterministic JSON text of ``value``: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(value: Any) -> str:
    """Hex SHA-256 of ``canonical_json(value)``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rfc3339(value: datetime) -> str:
    """``value`` as the API writes a ``DateTime``: UTC, milliseconds, ``Z`` (``resolvers.scalars``);
    for datetimes in event data and in texts a model or a person reads."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)


def decision_to_json(decision: DecisionDocument) -> dict[str, Any]:
    """A decision with ``decidedAt`` as an RFC 3339 string."""
    data: dict[str, Any] = jsonable({**decision, "decidedAt": None})
    data["decidedAt"] = _iso(decision["decidedAt"])
    return data


def decision_from_json(data: dict[str, Any]) -> DecisionDocument:
    """Inverse of ``decision_to_json``."""
    return cast(DecisionDocument, {**data, "decidedAt": _dt(data["decidedAt"])})


def snapshot_to_json(doc: SnapshotDocument) -> dict[str, Any]:
    """A snapshot document as JSON-safe data (datetimes as RFC 3339 strings, UTC)."""
    data: dict[str, Any] = jsonable(doc)
    for field in ("createdAt", "suspendedAt", "updatedAt"):
        data[field] = _iso(doc[field])
    if doc["claim"] is not None:
        data["claim"]["until"] = _iso(doc["claim"]["until"])
    if doc["lastError"] is not None:
        data["lastError"]["at"] = _iso(doc["lastError"]["at"])
    for call, out in zip(doc["toolCalls"], data["toolCalls"], strict=True):
        if call["decision"] is not None:
            out["decision"] = decision_to_json(call["decision"])
        if "approvals" in call:
            out["approvals"] = [{**a, "decidedAt": _iso(a["decidedAt"])} for a in call["approvals"]]
    return data


def snapshot_from_json(data: dict[str, Any]) -> SnapshotDocument:
    """Inverse of ``snapshot_to_json``."""
    doc: dict[str, Any] = {**data}
    for field in ("createdAt", "suspendedAt", "updatedAt"):
        doc[field] = _dt(data[field])
    if data.get("claim") is not None:
        doc["claim"] = {**data["claim"], "until": _dt(data["claim"]["until"])}
    if data.get("lastError") is not None:
        doc["lastError"] = {**data["lastError"], "at": _dt(data["lastError"]["at"])}
    doc["toolCalls"] = [
        {
            **call,
            "decision": None if call["decision"] is None else decision_from_json(call["decision"]),
            **(
                {"approvals": [{**a, "decidedAt": _dt(a["decidedAt"])} for a in call["approvals"]]}
                if "approvals" in call
                else {}
            ),
        }
        for call in data["toolCalls"]
    ]
    return cast(SnapshotDocument, doc)
