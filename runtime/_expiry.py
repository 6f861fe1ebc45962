"""Deadlines with a fallback (docs/architecture.md "Deadlines").

When a run suspends, each pending approval a per-tool rule with ``expiresAfter`` covers gets
``expiresAt`` = the suspension time + ``expiresAfter`` and its ``onExpiry`` (``set_deadlines``);
the stores keep the run's ``expiresAt`` (the earliest of its pending calls) and index it. The
sweeper reads only the runs whose ``expiresAt`` passed (``RunStore.list_expired_runs``) and records
the fallback on each call past its deadline through the same conditional write as a human
decision (``expiry_decision``), so whichever is recorded first wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from storage import EXPIRY_DECIDER, DecisionDocument, SnapshotDocument, ToolCallDocument

from .access import ToolApprovalRule, deadline_for


def set_deadlines(
    calls: list[ToolCallDocument],
    rules: Iterable[ToolApprovalRule],
    *,
    agent_id: str,
    parent_run_id: str | None,
    suspended_at: datetime,
) -> None:
    """Give each pending approval of ``calls`` the deadline of the rules covering it (in place).

    Only questions waiting for an approval get one: a call waiting for resume data has no
    answer the sweeper could make up, a sub-agent's inner run is decided only through its
    supervisor, and a supervisor's call standing for a sub-run's question (``delegated``) is
    covered by the sub-agent's rules, not the supervisor's. Every call here is a new question
    (a run suspends again only once all its calls were decided), so each gets a new deadline.
    """
    rules = tuple(rules)
    if not rules or parent_run_id is not None:
        return
    for call in calls:
        if call["decision"] is not None or not call["requiresApproval"] or call.get("delegated"):
            continue
        deadline = deadline_for(rules, agent_id, call["toolName"], call["args"])
        if deadline is not None:
            call["expiresAt"] = suspended_at + deadline.after
            call["onExpiry"] = deadline.on_expiry


def expired_calls(doc: SnapshotDocument, now: datetime) -> list[tuple[int, ToolCallDocument]]:
    """The pending calls of ``doc`` whose deadline is at or before ``now``, with their index."""
    return [
        (index, call)
        for index, call in enumerate(doc["toolCalls"])
        if call["decision"] is None and call.get("expiresAt") is not None and call["expiresAt"] <= now
    ]


def expiry_reason(call: ToolCallDocument) -> str:
    """What the model reads for a call declined on expiry."""
    return (
        f"The approval request for this call expired at {call['expiresAt'].isoformat()} "
        "without a decision, so the tool was not run."
    )


def expiry_decision(call: ToolCallDocument, now: datetime) -> DecisionDocument:
    """The decision the sweeper records on ``call`` after its deadline: its ``onExpiry``,
    ``decidedBy`` ``expiry``."""
    approve = call.get("onExpiry") == "approve"
    return {
        "kind": "approved" if approve else "declined",
        "decidedAt": now,
        "decidedBy": EXPIRY_DECIDER,
        "reason": None if approve else expiry_reason(call),
        "resumeData": None,
        "idempotencyKey": None,
    }
