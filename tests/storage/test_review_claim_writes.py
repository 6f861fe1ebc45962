"""What a decision's write does to a question's review claim, on every store (memory, SQLite,
FerretDB 1.24, DocumentDB): an approval that is not the last ends only its approver's own claim
(``ApprovalWrite.ends_review_claim_of``, ``rules.review_claim_held``); a decision that takes the
claim as it decides (``claimant``, a link's) is written only while no other principal holds a
live one (``rules.review_claim_open``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage import EventDocument, SnapshotStore
from storage.protocol import ApprovalWrite, DecisionWrite, ReviewClaimWrite

from ._contract import T0, decision, feed_event, snapshot, tool_call

AGENT = "refund-agent"
NOW = T0 + timedelta(minutes=10)


def _event(run_id: str) -> EventDocument:
    event = feed_event(f"{20 * '0'}-{run_id[:12]}", run_id=run_id)
    event["type"] = "reviewClaimed"
    return event


async def _claimed(store: SnapshotStore, by: str, until: timedelta) -> str:
    """A waiting run whose one call ``by`` claims until ``NOW + until``; its id."""
    call = tool_call("c1")
    call["questionId"] = "q1"
    doc = snapshot(calls=[call])
    await store.insert(doc, b"[]")
    written = await store.record_review_claim(
        ReviewClaimWrite(
            agent_id=AGENT,
            run_id=doc["_id"],
            index=0,
            tool_call_id="c1",
            question_id="q1",
            version=doc["version"],
            claim={"by": by, "at": T0, "until": NOW + until},
            now=T0,
            event=_event(doc["_id"]),
        )
    )
    assert written is not None
    return doc["_id"]


def _approval(run_id: str, by: str, **fields: str | None) -> ApprovalWrite:
    return ApprovalWrite(
        agent_id=AGENT,
        run_id=run_id,
        index=0,
        tool_call_id="c1",
        question_id="q1",
        approval={"decidedBy": by, "decidedAt": NOW},
        approvals_before=0,
        decision=None,
        now=NOW,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("holder", "ends_of", "written", "kept"),
    [
        ("key:bob", "key:bob", True, False),  # the approver's own claim ends with its approval
        ("key:carol", "key:bob", False, True),  # another's claim: nothing is written
        ("key:carol", None, True, True),  # an approval that ends no claim leaves it
    ],
)
async def test_an_approval_ends_only_its_approvers_own_review_claim(
    store: SnapshotStore, holder: str, ends_of: str | None, written: bool, kept: bool
) -> None:
    run_id = await _claimed(store, holder, timedelta(minutes=5))

    answer = await store.record_approval(_approval(run_id, "key:bob", ends_review_claim_of=ends_of))

    assert (answer is not None) is written
    after = await store.get(AGENT, run_id)
    assert after is not None
    assert ("reviewClaim" in after["toolCalls"][0]) is kept
    assert len(after["toolCalls"][0].get("approvals") or []) == (1 if written else 0)


@pytest.mark.parametrize("write", ["record_decision", "record_approval"])
@pytest.mark.parametrize(
    ("holder", "until", "written"),
    [
        ("key:carol", timedelta(minutes=5), False),  # another's live claim
        ("key:carol", timedelta(0), True),  # another's, lapsed at now
        ("key:alice", timedelta(minutes=5), True),  # the claimant's own
    ],
)
async def test_a_claimants_decision_is_written_only_while_no_other_principal_claims_the_question(
    store: SnapshotStore, write: str, holder: str, until: timedelta, written: bool
) -> None:
    run_id = await _claimed(store, holder, until)

    if write == "record_decision":
        answer = await store.record_decision(
            DecisionWrite(
                agent_id=AGENT,
                run_id=run_id,
                index=0,
                tool_call_id="c1",
                question_id="q1",
                decision={**decision(), "decidedBy": "key:alice"},
                now=NOW,
                claimant="key:alice",
            )
        )
    else:
        answer = await store.record_approval(_approval(run_id, "key:alice", claimant="key:alice"))

    assert (answer is not None) is written
    after = await store.get(AGENT, run_id)
    assert after is not None
    call = after["toolCalls"][0]
    if write == "record_decision":
        assert (call["decision"] is not None) is written
        assert ("reviewClaim" in call) is not written
    else:
        assert len(call.get("approvals") or []) == (1 if written else 0)
