"""The queue's ``totalCount`` under rules that may refuse a reviewer (issue 45 "Cost"): the kept
count less the refused questions of the candidate runs only, never a read of every matching run
(``ReviewQueue.count``, ``refusals.refusal_candidates``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from runtime import AgentRegistry, Principal, RunManager, ToolApprovalRule
from runtime.access import ALL_SCOPES
from runtime.demo import AGENTS
from runtime.reviewing.queue import QueueQuery
from storage import MemorySnapshotStore, SnapshotDocument, SQLiteSnapshotStore, utcnow

from ..storage._contract import T0, snapshot, tool_call

ALICE = Principal(name="alice", scopes=ALL_SCOPES, credential="key")
RUNS = 40


class ReadCounting(MemorySnapshotStore):
    """The memory store, counting the runs its reads return."""

    read = 0

    async def list_review_runs(self, *args: Any, **kwargs: Any) -> list[SnapshotDocument]:
        found = await super().list_review_runs(*args, **kwargs)
        self.read += len(found)
        return found

    async def list_review_candidates(self, *args: Any, **kwargs: Any) -> list[SnapshotDocument]:
        found = await super().list_review_candidates(*args, **kwargs)
        self.read += len(found)
        return found

    async def get_many(self, *args: Any, **kwargs: Any) -> list[SnapshotDocument]:
        found = await super().get_many(*args, **kwargs)
        self.read += len(found)
        return found


async def _store(runs: int, approved_by_alice: int, started_by_alice: int) -> ReadCounting:
    store = ReadCounting()
    await store.open()
    for number in range(runs):
        call = tool_call("c1")
        call["args"] = {"order_id": number, "amount": 640}
        call["approvalsRequired"] = 2
        if number < approved_by_alice:
            call["approvals"] = [{"decidedBy": ALICE.identity, "decidedAt": T0}]
        doc = snapshot(f"run-{number:03}", calls=[call])
        doc["startedBy"] = ALICE.identity if number >= runs - started_by_alice else "key:carol"
        await store.insert(doc, b"[]")
    return store


@pytest.mark.parametrize(
    ("rule", "barred"),
    [
        (ToolApprovalRule(tool="issue_refund", approvals=2), 3),  # the approvals alice gave
        (ToolApprovalRule(tool="issue_refund", approvals=2, separation_of_duties=True), 3 + 5),
    ],
)
async def test_a_total_under_refusing_rules_reads_only_the_candidate_runs(rule: ToolApprovalRule, barred: int) -> None:
    store = await _store(RUNS, approved_by_alice=3, started_by_alice=5)
    manager = RunManager(store, AgentRegistry(AGENTS), instance_id="a", tool_rules=[rule])
    store.read = 0
    assert await manager.review_queue.count(ALICE, QueueQuery()) == RUNS - barred
    assert store.read <= barred  # the candidates, not the 40 matching runs


async def test_a_total_for_a_principal_lacking_a_rule_scope_reads_the_runs_of_that_tool_only() -> None:
    store = await _store(RUNS, approved_by_alice=0, started_by_alice=0)
    weather = snapshot("weather", agent_id="weather-agent", calls=[tool_call("c1", approval=False)])
    weather["startedBy"] = "key:carol"
    await store.insert(weather, b"[]")
    rule = ToolApprovalRule(tool="ask_city", scope="cities:answer")
    manager = RunManager(store, AgentRegistry(AGENTS), instance_id="a", tool_rules=[rule])
    bob = Principal(name="bob", scopes=frozenset({"runs:read", "runs:decide"}), credential="key")
    store.read = 0
    assert await manager.review_queue.count(bob, QueueQuery()) == RUNS
    assert store.read == 1  # the one run with a pending ask_city


class SQLiteReadCounting(SQLiteSnapshotStore):
    """A SQLite file, counting the runs its queue reads return."""

    read = 0

    async def list_review_runs(self, *args: Any, **kwargs: Any) -> list[SnapshotDocument]:
        found = await super().list_review_runs(*args, **kwargs)
        self.read += len(found)
        return found

    async def list_review_candidates(self, *args: Any, **kwargs: Any) -> list[SnapshotDocument]:
        found = await super().list_review_candidates(*args, **kwargs)
        self.read += len(found)
        return found


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_tool_filtered_total_reads_only_the_runs_holding_the_tool(kind: str, tmp_path: Path) -> None:
    store: ReadCounting | SQLiteReadCounting = (
        ReadCounting() if kind == "memory" else SQLiteReadCounting(tmp_path / "q.db")
    )
    await store.open()
    try:
        for number in range(RUNS):
            await store.insert(snapshot(f"weather-{number:03}", calls=[tool_call("c1", approval=False)]), b"[]")
        for number in range(3):
            await store.insert(snapshot(f"refund-{number}", calls=[tool_call("c1"), tool_call("c2")]), b"[]")
        manager = RunManager(store, AgentRegistry(AGENTS), instance_id="a")
        store.read = 0
        query = QueueQuery(tool_names=frozenset({"issue_refund"}))
        assert await manager.review_queue.count(ALICE, query) == 6
        assert store.read == 3  # the runs holding a pending issue_refund, not the 43 waiting runs
        store.read = 0
        assert await manager.review_queue.count(ALICE, QueueQuery(tool_names=frozenset({"ask_city"}))) == RUNS
        assert await manager.review_queue.count(ALICE, QueueQuery(tool_names=frozenset({"nothing"}))) == 0
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_claim_or_escalation_filtered_total_reads_only_the_marked_runs(kind: str, tmp_path: Path) -> None:
    store: ReadCounting | SQLiteReadCounting = ReadCounting()
    if kind == "sqlite":
        store = SQLiteReadCounting(tmp_path / "q.db")
    await store.open()
    try:
        now = utcnow()
        for number in range(RUNS):
            call = tool_call("c1")
            if number == 1:  # alice's live claim
                call["reviewClaim"] = {"by": ALICE.identity, "at": now, "until": now + timedelta(hours=1)}
            if number == 2:  # bob's lapsed claim: unclaimed
                call["reviewClaim"] = {"by": "key:bob", "at": now, "until": now - timedelta(minutes=1)}
            if number == 3:  # carol's live claim
                call["reviewClaim"] = {"by": "key:carol", "at": now, "until": now + timedelta(hours=1)}
            if number in (5, 6):
                call["escalated"] = True
            await store.insert(snapshot(f"run-{number:03}", calls=[call, tool_call("c2", approval=False)]), b"[]")
        manager = RunManager(store, AgentRegistry(AGENTS), instance_id="a")
        expected = {
            QueueQuery(unclaimed=True): 2 * RUNS - 2,
            QueueQuery(unclaimed=False): 2,
            QueueQuery(claimed_by_me=True): 1,
            QueueQuery(claimed_by_me=False): 2 * RUNS - 1,
            QueueQuery(escalated=True): 2,
            QueueQuery(escalated=False): 2 * RUNS - 2,
            QueueQuery(escalated=False, unclaimed=True): 2 * RUNS - 4,
            QueueQuery(escalated=True, claimed_by_me=False): 2,
        }
        for query, total in expected.items():
            store.read = 0
            assert await manager.review_queue.count(ALICE, query) == total, query
            assert store.read <= 5, query  # the runs with a claim or an escalation, not the 40 waiting
    finally:
        await store.close()
