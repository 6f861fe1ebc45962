"""One approval of a call that needs several (``approvalsRequired``), recorded by the decision gate
(``runtime.deciding.gate``) through the store's conditional write ``RunStore.record_approval``."""

from __future__ import annotations

from storage import ApprovalDocument, DecisionDocument, SnapshotDocument, SnapshotStore, ToolCallDocument
from storage.protocol import ApprovalWrite

from ..events.journal import Journal, RunRef


async def record_approval(
    store: SnapshotStore,
    journal: Journal,
    doc: SnapshotDocument,
    run: RunRef,
    index: int,
    decision: DecisionDocument,
    claimant: str | None = None,
) -> SnapshotDocument | None:
    """Record ``decision``, an approval of call ``index`` of ``doc`` (the run as read), as one
    approval with its ``approval`` event, and as the decision with its event when it is the last
    one needed (one unit of work). An approval that is not the last ends its approver's own review
    claim in the same write; ``claimant``: ``ApprovalWrite.claimant``.
    The gate's check refused a repeat approver on the same read.

    Returns:
        The run as written, or ``None`` when it changed since it was read.
    """
    call: ToolCallDocument = doc["toolCalls"][index]
    by = decision["decidedBy"]
    required, approvals = call.get("approvalsRequired", 1), call.get("approvals") or []
    approval: ApprovalDocument = {"decidedBy": by, "decidedAt": decision["decidedAt"]}
    last = len(approvals) + 1 >= required
    held = call.get("reviewClaim")  # the approver's own, ended now: it may not approve again
    ends_claim_of = by if not last and by is not None and held is not None and held["by"] == by else None
    counted = {"approvals": len(approvals) + 1, "approvalsRequired": required}
    events = [journal.decision_event(run, call, decision, kind="approval", **counted)]
    if last:
        events.append(journal.decision_event(run, call, decision))
    write = ApprovalWrite(
        agent_id=doc["agentId"],
        run_id=doc["_id"],
        index=index,
        tool_call_id=call["toolCallId"],
        question_id=call.get("questionId"),
        approval=approval,
        approvals_before=len(approvals),
        decision=decision if last else None,
        now=decision["decidedAt"],
        event=events,
        ends_review_claim_of=ends_claim_of,
        claimant=claimant,
    )
    return await store.record_approval(write)


__all__ = ["record_approval"]
