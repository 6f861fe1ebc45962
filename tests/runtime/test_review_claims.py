"""A review claim lapses at its ``until`` (``RUNSGATE_REVIEW_CLAIM_TTL``), with no write: the queue
then shows it as none, another principal may claim the question, and a rule requiring it refuses
a decision its lapsed holder makes. Moved by a clock, never by waiting, on every store."""

from __future__ import annotations

import pytest

from runtime import AgentRegistry, DuplicateApproverError, Principal, RunManager, ToolApprovalRule
from runtime.access import ALL_SCOPES
from runtime.reviewing.errors import ReviewAlreadyClaimedError, ReviewClaimRequiredError
from runtime.reviewing.queue import QueueQuery
from storage import SnapshotStore

from ._clock import MovedClock

X = Principal(name="x", scopes=ALL_SCOPES, credential="key")
Y = Principal(name="y", scopes=ALL_SCOPES, credential="key")


async def test_a_review_claim_lapses_after_its_ttl(store: SnapshotStore, registry: AgentRegistry) -> None:
    clock = MovedClock()
    rules = [ToolApprovalRule(tool="issue_refund", require_review_claim=True)]
    manager = RunManager(store, registry, instance_id="a", clock=clock, tool_rules=rules, review_claim_ttl=60)
    started = await manager.start_run("refund-agent", "Please refund order 1042", principal=X)
    assert started.run is not None
    call = started.run["toolCalls"][0]
    named = ("refund-agent", started.run_id, call["toolCallId"], call["questionId"])

    claimed = await manager.review_claims.claim(*named, X)
    assert claimed.claim is not None
    with pytest.raises(ReviewAlreadyClaimedError):
        await manager.review_claims.claim(*named, Y)
    [item] = (await manager.review_queue.page(Y, QueueQuery(), first=10))[0]
    assert item.claim == claimed.claim

    clock.ahead = 61  # past the review claim's until
    [item] = (await manager.review_queue.page(Y, QueueQuery(unclaimed=True), first=10))[0]
    assert item.claim is None
    with pytest.raises(ReviewClaimRequiredError):
        await manager.approve(*named[:3], principal=X, question_id=named[3])
    taken = await manager.review_claims.claim(*named, Y)
    assert (taken.claim or {}).get("by") == "key:y"
    outcome = await manager.approve(*named[:3], principal=Y, question_id=named[3])
    assert outcome.status == "completed"


async def test_a_repeat_approver_is_told_it_approved(store: SnapshotStore, registry: AgentRegistry) -> None:
    # given a refund that needs two approvers and each one's review claim, approved once by x
    rules = [ToolApprovalRule(tool="issue_refund", approvals=2, require_review_claim=True)]
    manager = RunManager(store, registry, instance_id="a", tool_rules=rules)
    started = await manager.start_run("refund-agent", "Please refund order 1042", principal=X)
    assert started.run is not None
    call = started.run["toolCalls"][0]
    named = ("refund-agent", started.run_id, call["toolCallId"], call["questionId"])
    await manager.review_claims.claim(*named, X)
    first = await manager.approve(*named[:3], principal=X, question_id=named[3])
    assert first.status == "suspended"

    # when x approves again, then it is told it already approved (as claiming would tell it),
    # not to claim the review first
    with pytest.raises(DuplicateApproverError):
        await manager.approve(*named[:3], principal=X, question_id=named[3])
    with pytest.raises(DuplicateApproverError):
        await manager.review_claims.claim(*named, X)
