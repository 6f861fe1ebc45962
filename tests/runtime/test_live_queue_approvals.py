"""A live queue (``reviewQueueEvents``) follows the gate's refusal for its subscriber: an approver
who gave one of two approvals hears its question leave its queue, since it may not approve it
again, while another approver hears it change (docs/api.md "The reviewers' queue, live"). On the
memory store, as ``reviewQueue`` and ``claimReview`` are tested over HTTP on every store in
tests/server/test_claim_rules.py."""

from __future__ import annotations

from runtime import AgentRegistry, Principal, RunManager
from runtime.access import ALL_SCOPES, ToolApprovalRule
from runtime.reviewing.live import LiveQueue
from runtime.reviewing.queue import QueueQuery
from storage import MemorySnapshotStore
from storage.protocol import EventsAfter

BOB = Principal(name="bob", scopes=ALL_SCOPES, credential="key")
CAROL = Principal(name="carol", scopes=ALL_SCOPES, credential="key")


async def test_an_approver_hears_its_question_leave_after_its_approval_of_two(registry: AgentRegistry) -> None:
    store = MemorySnapshotStore()
    await store.open()
    rules = [ToolApprovalRule(tool="issue_refund", approvals=2)]
    manager = RunManager(store, registry, instance_id="a", tool_rules=rules)
    started = await manager.start_run("refund-agent", "Please refund order 1042")
    assert started.status == "suspended"
    assert started.run is not None
    live = LiveQueue(manager.review_queue)
    bob, carol = live.watch(BOB, QueueQuery()), live.watch(CAROL, QueueQuery())
    call_id = started.run["toolCalls"][0]["toolCallId"]

    approved = await manager.approve("refund-agent", started.run_id, call_id, principal=BOB)

    assert approved.status == "suspended"
    events = await store.list_events_after(EventsAfter(agent_id=None, after_event_id="0", limit=100))
    [approval] = [event for event in events if event["type"] == "approval"]
    assert [change.kind for change in await bob.changes(approval)] == ["left"]
    heard = await carol.changes(approval)
    assert [change.kind for change in heard] == ["entered"]  # carol's stream had not told of it yet
    assert [await manager.review_queue.may_decide(approved.run, 0, who) for who in (BOB, CAROL)] == [False, True]
