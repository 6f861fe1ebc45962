"""Documents the storage contract tests (``test_contract_*.py``) and other storage tests build on."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from storage import (
    SCHEMA_VERSION,
    DecisionDocument,
    EventDocument,
    SnapshotDocument,
    ToolCallDocument,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def tool_call(call_id: str, *, approval: bool = True) -> ToolCallDocument:
    return {
        "toolCallId": call_id,
        "toolName": "issue_refund" if approval else "ask_city",
        "args": {"order_id": 1042, "amount": 25.5} if approval else None,
        "requiresApproval": approval,
        "suspendPayload": None if approval else {"question": "Which city?"},
        "resumeSchema": None if approval else {"type": "object", "required": ["name"]},
        "decision": None,
    }


def snapshot(
    run_id: str | None = None,
    *,
    agent_id: str = "refund-agent",
    created: datetime = T0,
    thread: str | None = "t1",
    resource: str | None = "r1",
    calls: list[ToolCallDocument] | None = None,
) -> SnapshotDocument:
    calls = calls if calls is not None else [tool_call("c1")]
    return {
        "_id": run_id or uuid.uuid4().hex,
        "agentId": agent_id,
        "threadId": thread,
        "resourceId": resource,
        "parentRunId": None,
        "status": "suspended",
        "createdAt": created,
        "suspendedAt": created,
        "updatedAt": created,
        "toolCalls": calls,
        "pendingCount": len(calls),
        "version": 1,
        "claim": None,
        "lastError": None,
        "schemaVersion": SCHEMA_VERSION,
        "historyId": uuid.uuid4().hex,
    }


def decision(kind: str = "approved") -> DecisionDocument:
    return {
        "kind": kind,  # type: ignore[typeddict-item]
        "decidedAt": T0,
        "decidedBy": "alice",
        "reason": None,
        "resumeData": None,
        "idempotencyKey": None,
    }


def feed_event(event_id: str, *, agent_id: str = "refund-agent", run_id: str = "run") -> EventDocument:
    return {
        "_id": event_id,
        "runId": run_id,
        "agentId": agent_id,
        "threadId": "t1",
        "resourceId": "r1",
        "type": "started",
        "at": T0,
        "by": None,
        "data": {},
    }


def run_event(
    event_id: str,
    event_type: str,
    *,
    run_id: str = "run",
    at: datetime = T0,
    by: str | None = None,
    data: dict[str, Any] | None = None,
) -> EventDocument:
    """An event of ``refund-agent``'s run ``run_id`` (thread ``t1``, resource ``r1``)."""
    return {
        "_id": event_id,
        "runId": run_id,
        "agentId": "refund-agent",
        "threadId": "t1",
        "resourceId": "r1",
        "type": event_type,  # type: ignore[typeddict-item]
        "at": at,
        "by": by,
        "data": data or {},
    }
