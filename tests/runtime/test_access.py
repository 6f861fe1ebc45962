"""``RunManager`` holds a ``Principal`` to its resources and the per-tool rules (SECURITY.md).

The checks are made on the run as the manager read it for the decision (one read), before the
idempotency key is looked at: a hidden run is refused exactly as a missing one and nothing is
written, not even a key reservation. A plain name (delegation, the seed) is not checked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime import (
    ALL_SCOPES,
    AgentRegistry,
    ForbiddenError,
    Principal,
    RunManager,
    RunNotFoundError,
    ToolApprovalRule,
    missing_approval_scope,
)
from runtime.demo import LEDGER
from storage import IdempotencyDocument, KeyReservation, MemorySnapshotStore, RunFilter, SnapshotDocument

REFUND = "refund-agent"
PROMPT = "Please refund order 1042"  # the demo refund: issue_refund(order_id=1042, amount=49.9)
RULES = [ToolApprovalRule(tool="issue_refund", scope="refunds:approve", argument="amount", above=40)]

ALICE = Principal(name="alice", scopes=ALL_SCOPES | {"refunds:approve"}, resources=frozenset({"tenant-a"}))
BOB = Principal(name="bob", scopes=ALL_SCOPES | {"refunds:approve"}, resources=frozenset({"tenant-b"}))
CAROL = Principal(name="carol", scopes=ALL_SCOPES, resources=frozenset({"tenant-a"}))
"""Like alice without ``refunds:approve``."""


class _CountingStore(MemorySnapshotStore):
    """Counts run reads and idempotency key reservations."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.reservations = 0

    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        self.reads += 1
        return await super().get(agent_id, run_id)

    async def reserve_idempotency_key(self, reservation: KeyReservation) -> IdempotencyDocument | None:
        self.reservations += 1
        return await super().reserve_idempotency_key(reservation)


@pytest.fixture
async def store() -> AsyncIterator[_CountingStore]:
    store = _CountingStore()
    await store.open()
    yield store
    await store.close()


@pytest.fixture
def manager(store: _CountingStore, registry: AgentRegistry) -> RunManager:
    return RunManager(store, registry, instance_id="instance-a", tool_rules=RULES)


async def _refund_run(manager: RunManager, resource: str) -> tuple[str, str]:
    started = await manager.start_run(REFUND, PROMPT, resource_id=resource, principal="admin")
    assert started.run is not None
    return started.run_id, started.run["toolCalls"][0]["toolCallId"]


async def _unchanged(manager: RunManager, run_id: str, call: Any) -> RunNotFoundError | ForbiddenError:
    """The error of ``call()``; the run and its events are unchanged and no key was reserved."""
    store = manager.store
    assert isinstance(store, _CountingStore)
    before, events = await store.get(REFUND, run_id), await store.list_events(REFUND, run_id)
    reservations = store.reservations
    with pytest.raises((RunNotFoundError, ForbiddenError)) as caught:
        await call()
    assert await store.get(REFUND, run_id) == before
    assert await store.list_events(REFUND, run_id) == events
    assert store.reservations == reservations
    assert isinstance(caught.value, RunNotFoundError | ForbiddenError)
    return caught.value


async def test_a_hidden_run_is_refused_exactly_as_a_missing_one_by_every_decision(manager: RunManager) -> None:
    # given a run of tenant-b
    run_id, call_id = await _refund_run(manager, "tenant-b")
    missing = RunNotFoundError(REFUND, "0" * 32)

    # when alice (tenant-a) approves, declines, resumes and retries it, with idempotency keys
    attempts = [
        lambda: manager.approve(REFUND, run_id, call_id, principal=ALICE, idempotency_key="k"),
        lambda: manager.decline(REFUND, run_id, call_id, principal=ALICE, idempotency_key="k"),
        lambda: manager.resume(REFUND, run_id, None, {}, principal=ALICE, idempotency_key="k"),
        lambda: manager.retry(REFUND, run_id, principal=ALICE),
    ]

    # then each is RunNotFound, the message differing from a missing run's by the id only,
    # and nothing was written
    for attempt in attempts:
        error = await _unchanged(manager, run_id, attempt)
        assert type(error) is RunNotFoundError
        assert error.message == missing.message.replace("0" * 32, run_id)
    assert LEDGER == []


async def test_a_key_another_principal_used_does_not_reveal_a_hidden_run(manager: RunManager) -> None:
    # given bob declined one of his two runs with key "k"
    run_id, call_id = await _refund_run(manager, "tenant-b")
    other_id, other_call = await _refund_run(manager, "tenant-b")
    await manager.decline(REFUND, run_id, call_id, principal=BOB, idempotency_key="k")

    # when alice sends the same key for bob's other run
    error = await _unchanged(
        manager, other_id, lambda: manager.decline(REFUND, other_id, other_call, principal=ALICE, idempotency_key="k")
    )

    # then it is RunNotFound, not IdempotencyKeyReused
    assert type(error) is RunNotFoundError


async def test_approving_needs_the_scope_of_a_matching_tool_rule(manager: RunManager) -> None:
    # given a tenant-a refund of 49.90 (the rule applies above 40)
    run_id, call_id = await _refund_run(manager, "tenant-a")

    # when carol (no refunds:approve) approves it
    error = await _unchanged(
        manager, run_id, lambda: manager.approve(REFUND, run_id, call_id, principal=CAROL, idempotency_key="k")
    )

    # then Forbidden names the scope, and nothing ran
    assert type(error) is ForbiddenError
    assert error.required_scope == "refunds:approve"
    assert error.message == "approving 'issue_refund' needs the scope 'refunds:approve'"
    assert LEDGER == []

    # and alice, who holds it, approves it; decidedBy is her name
    outcome = await manager.approve(REFUND, run_id, call_id, principal=ALICE)
    assert outcome.status == "completed"
    events = await manager.store.list_events(REFUND, run_id)
    assert [e["by"] for e in events if e["type"] == "decision"] == ["alice"]


async def test_declining_needs_no_tool_scope(manager: RunManager) -> None:
    run_id, call_id = await _refund_run(manager, "tenant-a")

    outcome = await manager.decline(REFUND, run_id, call_id, reason="no", principal=CAROL)

    assert outcome.status == "completed"
    assert LEDGER == []


async def test_a_decision_reads_the_run_once(manager: RunManager, store: _CountingStore) -> None:
    # given a tenant-a run with two refunds (deciding one leaves the run suspended)
    started = await manager.start_run(
        REFUND, "Please refund orders 1042 and 1043", resource_id="tenant-a", principal="admin"
    )
    assert started.run is not None
    first = started.run["toolCalls"][0]["toolCallId"]
    reads = store.reads

    # when alice approves one of them, under the per-tool rule
    outcome = await manager.approve(REFUND, started.run_id, first, principal=ALICE, idempotency_key="k")

    # then the checks and the decision used the same single read of the run
    assert outcome.status == "suspended"
    assert store.reads - reads == 1


async def test_a_limited_principal_starts_runs_of_its_own_resources_only(manager: RunManager) -> None:
    for resource, message in [
        (None, "this caller may start runs of its own resources only: give one as resourceId"),
        ("tenant-b", "resourceId 'tenant-b' is not one of the resources this caller may use"),
    ]:
        with pytest.raises(ForbiddenError) as caught:
            await manager.start_run(REFUND, PROMPT, resource_id=resource, principal=ALICE, idempotency_key="k")
        assert caught.value.message == message
    assert await manager.store.count_runs(REFUND, RunFilter()) == 0

    started = await manager.start_run(REFUND, PROMPT, resource_id="tenant-a", principal=ALICE)
    assert started.status == "suspended"
    events = await manager.store.list_events(REFUND, started.run_id)
    assert events[0]["by"] == "alice"


async def test_a_plain_name_is_not_checked(manager: RunManager) -> None:
    # given a run of tenant-b: an internal caller (delegation forwards a decision already
    # checked on the supervisor's call) passes the decider's name, not a Principal
    run_id, call_id = await _refund_run(manager, "tenant-b")

    outcome = await manager.approve(REFUND, run_id, call_id, principal="carol")

    assert outcome.status == "completed"
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_resuming_is_held_to_the_rules_of_the_calls_waiting_for_data(
    store: _CountingStore, registry: AgentRegistry
) -> None:
    # given answering the weather agent's ask_city needs weather:answer
    rules = [ToolApprovalRule(tool="ask_city", scope="weather:answer")]
    manager = RunManager(store, registry, instance_id="instance-a", tool_rules=rules)
    started = await manager.start_run("weather-agent", "What's the weather like?", resource_id="tenant-a")
    assert started.run is not None

    # when alice, who lacks it, resumes the run without naming the call
    with pytest.raises(ForbiddenError) as caught:
        await manager.resume("weather-agent", started.run_id, None, {"name": "Paris"}, principal=ALICE)

    # then Forbidden names the scope and the run still waits; one who holds it resumes it
    assert caught.value.required_scope == "weather:answer"
    assert (await store.get("weather-agent", started.run_id)) == started.run
    answerer = Principal(name="dan", scopes=ALL_SCOPES | {"weather:answer"}, resources=frozenset({"tenant-a"}))
    outcome = await manager.resume("weather-agent", started.run_id, None, {"name": "Paris"}, principal=answerer)
    assert outcome.status == "completed"


@pytest.mark.parametrize(
    "args",
    [{}, {"amount": None}, {"amount": "150"}, {"amount": True}, {"amount": float("nan")}, None, [150], "amount=5"],
    ids=["missing", "null", "string", "boolean", "nan", "args-null", "args-list", "args-string"],
)
def test_a_rule_that_cannot_be_evaluated_applies(args: object) -> None:
    # a rule on an argument the call does not carry as a number denies rather than skips
    assert RULES[0].applies("issue_refund", args)


def test_a_rule_is_skipped_only_for_a_number_at_most_its_limit() -> None:
    assert not RULES[0].applies("issue_refund", {"amount": 40})
    assert not RULES[0].applies("issue_refund", {"amount": -3.5})
    assert RULES[0].applies("issue_refund", {"amount": 40.01})
    assert not RULES[0].applies("lookup_order", {})


def test_a_rule_without_a_scope_needs_no_scope_to_approve() -> None:
    rule = ToolApprovalRule(tool="issue_refund", allow_edits=False)
    assert missing_approval_scope(Principal(name="p", scopes=frozenset()), [rule], "issue_refund", {}) is None
