"""How the SQLite store maps documents to rows and back: datetimes as integer UTC milliseconds,
``toolCalls`` and ``lastError`` as JSON text (``stored_json``), one column list per table."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from .. import stored_json
from .._query import to_bson_precision
from ..documents import (
    ClaimDocument,
    EventDocument,
    RunErrorDocument,
    SnapshotDocument,
    ToolCallDocument,
    WebhookDeliveryDocument,
)
from ..rules import earliest_deadline

Row = sqlite3.Row | tuple[Any, ...]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

_COLUMNS = (
    "run_id, agent_id, thread_id, resource_id, parent_run_id, status, created_at, suspended_at, updated_at, "
    "tool_calls, pending_count, version, claim_by, claim_until, last_error, schema_version, history_id, expires_at, "
    "started_by"
)
"""The columns of ``run_snapshots``, in the order ``_run_row`` writes and ``_snapshot`` reads."""
_INSERT_RUN = f"INSERT INTO run_snapshots ({_COLUMNS}) VALUES ({', '.join('?' * 19)})"
_EVENT_COLUMNS = "event_id, agent_id, run_id, thread_id, resource_id, scope, type, at, by, data, retention_from"
"""The columns of ``run_events``, in the order ``_event_row`` writes and ``_event`` reads."""
_INSERT_EVENT = f"INSERT INTO run_events ({_EVENT_COLUMNS}) VALUES ({', '.join('?' * 11)})"
"""Every write of an event row (the store's and the benchmarks' seeds), ``_event_row``'s parameters."""
_HAS_THREAD, _HAS_RESOURCE = 1, 2
"""Bits of ``run_events.scope``: which of the optional keys the stored event had."""
_DELIVERY_COLUMNS = (
    "delivery_id, endpoint_id, event_id, agent_id, run_id, resource_id, type, body, status, attempts, "
    "created_at, next_attempt_at, last_attempt_at, last_status_code, last_error, finished_at, lease_by, lease_until"
)


def _ms(value: datetime) -> int:
    """Aware ``value`` as integer UTC milliseconds since the epoch (sub-millisecond part dropped)."""
    if value.tzinfo is UTC:  # the common case, exact without a copy (every write converts several)
        since = value - _EPOCH
        return (since.days * 86_400 + since.seconds) * 1000 + since.microseconds // 1000
    return (to_bson_precision(value) - _EPOCH) // _MS


def _datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _optional_ms(value: datetime | None) -> int | None:
    return None if value is None else _ms(value)


def _optional_datetime(ms: int | None) -> datetime | None:
    return None if ms is None else _datetime(ms)


def _marks(count: int) -> str:
    return ", ".join("?" * count)


_dumps = stored_json.dumps
"""JSON text of a stored value (``stored_json``: any key, big integers, lone surrogates kept)."""
_loads = stored_json.loads


def _calls_text(calls: Sequence[ToolCallDocument]) -> str:
    stored: list[dict[str, Any]] = []
    for call in calls:
        decision = call["decision"]
        encoded: dict[str, Any] = dict(call)
        if decision is not None:
            encoded["decision"] = {**decision, "decidedAt": _ms(decision["decidedAt"])}
        if "expiresAt" in call:
            encoded["expiresAt"] = _ms(call["expiresAt"])
        if "approvals" in call:
            encoded["approvals"] = [{**a, "decidedAt": _ms(a["decidedAt"])} for a in call["approvals"]]
        if "reviewClaim" in call:
            claim = call["reviewClaim"]
            encoded["reviewClaim"] = {**claim, "at": _ms(claim["at"]), "until": _ms(claim["until"])}
        stored.append(encoded)
    return _dumps(stored)


def _calls(text: str) -> list[ToolCallDocument]:
    calls = _loads(text)
    for call in calls:
        decision = call["decision"]
        if decision is not None:
            decision["decidedAt"] = _datetime(decision["decidedAt"])
        if "expiresAt" in call:
            call["expiresAt"] = _datetime(call["expiresAt"])
        for approval in call.get("approvals") or ():
            approval["decidedAt"] = _datetime(approval["decidedAt"])
        if "reviewClaim" in call:
            claim = call["reviewClaim"]
            claim["at"], claim["until"] = _datetime(claim["at"]), _datetime(claim["until"])
    return cast(list[ToolCallDocument], calls)


def _deadline_ms(calls: list[ToolCallDocument]) -> int | None:
    """``expires_at`` of a run with ``calls`` (``rules.earliest_deadline``), in ms."""
    return _optional_ms(earliest_deadline(calls))


def _error_text(error: RunErrorDocument | None) -> str | None:
    return None if error is None else _dumps({**error, "at": _ms(error["at"])})


def _error(text: str | None) -> RunErrorDocument | None:
    if text is None:
        return None
    error = _loads(text)
    error["at"] = _datetime(error["at"])
    return cast(RunErrorDocument, error)


def _started_by(doc: SnapshotDocument) -> str | None:
    """``started_by`` of ``doc``: its ``startedBy``, ``""`` for ``None`` (in-process code: no
    identity is empty), ``NULL`` when it records none."""
    if "startedBy" not in doc:
        return None
    return doc["startedBy"] or ""


def _run_row(doc: SnapshotDocument) -> tuple[Any, ...]:
    claim = doc["claim"]
    return (
        doc["_id"],
        doc["agentId"],
        doc["threadId"],
        doc["resourceId"],
        doc["parentRunId"],
        doc["status"],
        _ms(doc["createdAt"]),
        _ms(doc["suspendedAt"]),
        _ms(doc["updatedAt"]),
        _calls_text(doc["toolCalls"]),
        doc["pendingCount"],
        doc["version"],
        None if claim is None else claim["by"],
        None if claim is None else _ms(claim["until"]),
        _error_text(doc["lastError"]),
        doc["schemaVersion"],
        doc["historyId"],
        _deadline_ms(doc["toolCalls"]),
        _started_by(doc),
    )


def _snapshot(row: Row) -> SnapshotDocument:
    claim: ClaimDocument | None = None if row[12] is None else {"by": row[12], "until": _datetime(row[13])}
    doc: SnapshotDocument = {
        "_id": row[0],
        "agentId": row[1],
        "threadId": row[2],
        "resourceId": row[3],
        "parentRunId": row[4],
        "status": row[5],
        "createdAt": _datetime(row[6]),
        "suspendedAt": _datetime(row[7]),
        "updatedAt": _datetime(row[8]),
        "toolCalls": _calls(row[9]),
        "pendingCount": row[10],
        "version": row[11],
        "claim": claim,
        "lastError": _error(row[14]),
        "schemaVersion": row[15],
        "historyId": row[16],
    }
    if row[17] is not None:
        doc["expiresAt"] = _datetime(row[17])
    if row[18] is not None:  # NULL: not recorded (before schema version 5); "": in-process code
        doc["startedBy"] = row[18] or None
    return doc


def _event_row(event: EventDocument) -> tuple[Any, ...]:
    scope = (_HAS_THREAD if "threadId" in event else 0) | (_HAS_RESOURCE if "resourceId" in event else 0)
    return (
        event["_id"],
        event["agentId"],
        event["runId"],
        event.get("threadId"),
        event.get("resourceId"),
        scope,
        event["type"],
        _ms(event["at"]),
        event["by"],
        _dumps(event["data"]),
        _optional_ms(event.get("retentionFrom")),
    )


def _event(row: Row) -> EventDocument:
    event: EventDocument = {
        "_id": row[0],
        "runId": row[2],
        "agentId": row[1],
        "type": row[6],
        "at": _datetime(row[7]),
        "by": row[8],
        "data": _loads(row[9]),
    }
    if row[5] & _HAS_THREAD:
        event["threadId"] = row[3]
    if row[5] & _HAS_RESOURCE:
        event["resourceId"] = row[4]
    if row[10] is not None:
        event["retentionFrom"] = _datetime(row[10])
    return event


def _delivery_row(doc: WebhookDeliveryDocument) -> tuple[Any, ...]:
    lease = doc["lease"]
    return (
        doc["_id"],
        doc["endpointId"],
        doc["eventId"],
        doc["agentId"],
        doc["runId"],
        doc["resourceId"],
        doc["type"],
        doc["body"],
        doc["status"],
        doc["attempts"],
        _ms(doc["createdAt"]),
        _ms(doc["nextAttemptAt"]),
        _optional_ms(doc["lastAttemptAt"]),
        doc["lastStatusCode"],
        doc["lastError"],
        _optional_ms(doc["finishedAt"]),
        None if lease is None else lease["by"],
        None if lease is None else _ms(lease["until"]),
    )


def _delivery(row: Row) -> WebhookDeliveryDocument:
    return {
        "_id": row[0],
        "endpointId": row[1],
        "eventId": row[2],
        "agentId": row[3],
        "runId": row[4],
        "resourceId": row[5],
        "type": row[6],
        "body": row[7],
        "status": row[8],
        "attempts": row[9],
        "createdAt": _datetime(row[10]),
        "nextAttemptAt": _datetime(row[11]),
        "lastAttemptAt": _optional_datetime(row[12]),
        "lastStatusCode": row[13],
        "lastError": row[14],
        "finishedAt": _optional_datetime(row[15]),
        "lease": None if row[16] is None else {"by": row[16], "until": _datetime(row[17])},
    }
