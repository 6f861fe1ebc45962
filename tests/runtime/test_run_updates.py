"""The progress of a continuing run as updates (docs/architecture.md "Run updates"), and decisions
that answer once recorded (``wait_for="recorded"``).

A continuation's updates come from pydantic-ai's own event stream: the model's text deltas, each
tool call as it starts and ends (with runsgate's call identity, never the model's id), then the
outcome (suspended again with its calls, completed with the output, failed). A model that cannot
stream runs as before and gives the tool calls and the outcome without deltas. A subscriber that
comes late first gets what it missed since the continuation began; ``after`` resumes after an
update; one on another instance (another manager on the same SQLite file) reads the store.
"""

from __future__ import annotations

import asyncio
import importlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import DeferredToolRequests

from runtime import AgentRegistry, EventFeed, Principal, RunManager, RunNotFoundError
from runtime.demo import AGENTS as DEMO_AGENTS
from runtime.demo._script import latest_returns, scripted_model
from storage import MemorySnapshotStore, SnapshotStore, SQLiteSnapshotStore, strict_json

from .. import _collisions
from . import agents
from .conftest import Instance, update_kinds

WAIT = 30.0
"""Seconds to wait for a stream's end: a liveness bound, not a speed check."""

REFUND = "refund-agent"
PACED = "paced-agent"
OUTCOMES = {"suspended", "completed", "failed"}

PACED_TEXT = "The parcel left the warehouse this morning and should arrive on Friday."
PAID_OUT: list[int] = []


async def _paced_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    paid = [r for r in latest_returns(messages) if r.tool_name == "pay_out"]
    if paid:
        return ModelResponse(parts=[TextPart(PACED_TEXT)])
    return ModelResponse(parts=[ToolCallPart("pay_out", {"amount": 12})])


paced_agent: Agent[None, Any] = Agent(
    scripted_model(_paced_script, model_name="paced", time_to_first_token=0.05, time_per_token=0.02),
    name=PACED,
    output_type=[str, DeferredToolRequests],
)


@paced_agent.tool_plain(requires_approval=True)
async def pay_out(amount: int) -> str:
    PAID_OUT.append(amount)
    return f"paid {amount}"


STREAMED_TWINS = "streamed-twins"
STREAMED_RESTART_IDS = "streamed-restart-ids"


@pytest.fixture
def registry() -> AgentRegistry:
    return AgentRegistry(
        {
            **DEMO_AGENTS,
            **agents.TEST_AGENTS,
            PACED: paced_agent,
            STREAMED_TWINS: _collisions.streamed(_collisions.TWINS, STREAMED_TWINS),
            STREAMED_RESTART_IDS: _collisions.streamed(_collisions.RESTART_IDS, STREAMED_RESTART_IDS),
        }
    )


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    _collisions.reset()
    PAID_OUT.clear()
    yield
    _collisions.reset()


async def _suspended(runs: RunManager, agent_id: str, prompt: str) -> tuple[str, list[str]]:
    started = await runs.start_run(agent_id, prompt)
    assert started.status == "suspended", started
    assert started.run is not None
    return started.run_id, [c["toolCallId"] for c in started.run["toolCalls"]]


async def _collect(stream: Any, *, until_text: asyncio.Event | None = None) -> list[Any]:
    """Every update of ``stream`` up to its end (the stream ends after an outcome)."""
    received = []
    async with asyncio.timeout(WAIT):
        async for update in stream:
            received.append(update)
            if until_text is not None and update.kind == "text":
                until_text.set()
    return received


async def _until(predicate: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``predicate`` until it holds: the run continues in a task of the manager's own, whose
    end this test can only see in the store."""
    async with asyncio.timeout(WAIT):
        while not await predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_a_streamed_continuation_sends_text_deltas_its_tool_calls_and_its_outcome(instance: Instance) -> None:
    # given a refund run waiting for its approval, and a subscriber
    run_id, (call_id,) = await _suspended(instance.runs, REFUND, "Please refund order 1042")
    stream = asyncio.ensure_future(_collect(instance.subscribe(REFUND, run_id)))
    await asyncio.sleep(0.2)

    # when it is approved
    outcome = await instance.runs.approve(REFUND, run_id, call_id, principal="alice")

    # then the subscriber saw the continuation begin, the tool run, the answer's deltas, the end
    updates = await stream
    assert outcome.status == "completed"
    assert update_kinds(updates) == ["resumed", "tool_call_started", "tool_call_ended", "text", "completed"]
    started, ended = updates[1], updates[2]
    assert (started.tool_call_id, started.tool_name, started.args) == (
        call_id,
        "issue_refund",
        {"order_id": 1042, "amount": 49.9},
    )
    assert (ended.tool_call_id, ended.result, ended.error) == (call_id, "Refund of $49.90 for order 1042 issued.", None)
    deltas = [u.text for u in updates if u.kind == "text"]
    assert len(deltas) > 1
    assert "".join(deltas) == outcome.output == updates[-1].output
    ids = [u.id for u in updates]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert {u.continuation_id for u in updates} == {updates[0].continuation_id}
    assert ids[-1] == f"{updates[0].continuation_id}.end"
    events = await instance.runs.store.list_events(REFUND, run_id)
    assert [e["_id"] for e in events if e["type"] == "resumed"] == [updates[0].continuation_id]


async def test_a_model_that_cannot_stream_gives_the_tool_calls_and_the_outcome_without_deltas(
    instance: Instance,
) -> None:
    run_id, (call_id,) = await _suspended(instance.runs, "flaky-agent", "ship a book")
    stream = asyncio.ensure_future(_collect(instance.subscribe("flaky-agent", run_id)))
    await asyncio.sleep(0.2)

    outcome = await instance.runs.approve("flaky-agent", run_id, call_id, principal="alice")

    updates = await stream
    assert (outcome.status, outcome.output) == ("completed", "done: shipped book")
    assert [u.kind for u in updates] == ["resumed", "tool_call_started", "tool_call_ended", "completed"]
    assert (updates[2].tool_call_id, updates[2].result) == (call_id, "shipped book")
    assert updates[-1].output == "done: shipped book"
    assert agents.SHIPPED == ["book"]


async def test_a_failed_continuation_ends_its_updates_with_the_failure(instance: Instance) -> None:
    run_id, (call_id,) = await _suspended(instance.runs, "flaky-agent", "ship a book")
    agents.SWITCHES["model_down"] = True
    stream = asyncio.ensure_future(_collect(instance.subscribe("flaky-agent", run_id)))
    await asyncio.sleep(0.2)

    outcome = await instance.runs.approve("flaky-agent", run_id, call_id, principal="alice")

    updates = await stream
    assert outcome.status == "failed"
    assert [u.kind for u in updates] == ["resumed", "tool_call_started", "tool_call_ended", "failed"]
    assert updates[-1].error == "RuntimeError: model is down"
    assert updates[-1].run is not None
    assert updates[-1].run["lastError"]["message"] == "model is down"


async def test_streamed_tool_call_updates_carry_call_identities_when_the_model_reuses_ids(
    instance: Instance,
) -> None:
    # given a streaming model whose two calls of one turn share the id "dup"
    run_id, call_ids = await _suspended(instance.runs, STREAMED_TWINS, "go")
    assert len(set(call_ids)) == 2
    assert all(c.startswith("c_") for c in call_ids)
    stream = asyncio.ensure_future(_collect(instance.subscribe(STREAMED_TWINS, run_id)))
    await asyncio.sleep(0.2)

    # when both are approved
    batch = await instance.runs.decide_many(
        STREAMED_TWINS, [_approval(run_id, call_id) for call_id in call_ids], principal="alice"
    )

    # then each call ran once with its own arguments, and its updates name it by its identity
    updates = await stream
    assert [getattr(a, "status", a) for a in batch] == ["suspended", "completed"]
    assert sorted(_collisions.RAN, key=str) == [("act", {"value": 1}), ("act", {"value": 2})]
    started = {u.tool_call_id: u.args for u in updates if u.kind == "tool_call_started"}
    ended = {u.tool_call_id: u.result for u in updates if u.kind == "tool_call_ended"}
    assert started == dict(zip(call_ids, [{"value": 1}, {"value": 2}], strict=True))
    assert ended == dict(zip(call_ids, ["acted 1", "acted 2"], strict=True))
    assert "dup" not in {u.tool_call_id for u in updates}


def _approval(run_id: str, call_id: str) -> Any:
    from runtime import BulkDecision

    return BulkDecision(run_id=run_id, tool_call_id=call_id, kind="approved")


async def test_a_run_suspending_again_ends_the_updates_with_its_new_calls(instance: Instance) -> None:
    # given a model that restarts its ids each turn: call_0 in turn 1, call_0 again in turn 2
    run_id, (first,) = await _suspended(instance.runs, STREAMED_RESTART_IDS, "go")
    stream = asyncio.ensure_future(_collect(instance.subscribe(STREAMED_RESTART_IDS, run_id)))
    await asyncio.sleep(0.2)

    outcome = await instance.runs.approve(STREAMED_RESTART_IDS, run_id, first, principal="alice")

    updates = await stream
    assert outcome.status == "suspended"
    assert outcome.run is not None
    (second,) = [c["toolCallId"] for c in outcome.run["toolCalls"] if c["decision"] is None]
    assert second != first
    assert update_kinds(updates) == [
        "resumed",
        "tool_call_started",
        "tool_call_ended",
        "tool_call_started",
        "suspended",
    ]
    assert [u.tool_call_id for u in updates if u.kind.startswith("tool_call")] == [first, first, second]
    suspended = updates[-1].run
    assert suspended is not None
    assert [c["toolCallId"] for c in suspended["toolCalls"] if c["decision"] is None] == [second]


async def test_a_late_subscriber_first_gets_what_it_missed_and_after_resumes_after_an_update(
    instance: Instance,
) -> None:
    # given a paced run continuing, followed from its start
    run_id, (call_id,) = await _suspended(instance.runs, PACED, "pay")
    texting = asyncio.Event()
    early = asyncio.ensure_future(_collect(instance.subscribe(PACED, run_id), until_text=texting))
    await asyncio.sleep(0.2)
    answered = await instance.runs.approve(PACED, run_id, call_id, principal="alice", wait_for="recorded")
    assert answered.status == "resuming"

    # when another subscribes once the text streams, and a third after the early one's fourth update
    async with asyncio.timeout(WAIT):
        await texting.wait()
    late = await _collect(instance.subscribe(PACED, run_id))
    everything = await early
    resumed = await _collect(instance.subscribe(PACED, run_id, after=everything[3].id))

    # then the late one got the whole continuation, and the resumed one everything after the fourth
    assert [u.id for u in late] == [u.id for u in everything]
    assert [u.text for u in late] == [u.text for u in everything]
    assert [u.id for u in resumed] == [u.id for u in everything[4:]]
    assert "".join(u.text for u in everything if u.kind == "text") == PACED_TEXT
    assert everything[-1].kind == "completed"
    assert PAID_OUT == [12]
    # and once finished, a subscriber without `after` is shown that last continuation
    assert [u.id for u in await _collect(instance.subscribe(PACED, run_id))] == [u.id for u in everything]


async def test_a_subscriber_on_another_instance_sees_the_continuation_with_its_deltas(
    tmp_path: Path, registry: AgentRegistry
) -> None:
    # given two instances on one SQLite file: a run waiting on A, a subscriber on B
    stores = [SQLiteSnapshotStore(tmp_path / "runs.db") for _ in range(2)]
    for store in stores:
        await store.open()
    a, b = Instance(stores[0], registry, "instance-a"), Instance(stores[1], registry, "instance-b")
    try:
        run_id, (call_id,) = await _suspended(a.runs, PACED, "pay")
        on_a = asyncio.ensure_future(_collect(a.subscribe(PACED, run_id)))
        on_b = asyncio.ensure_future(_collect(b.subscribe(PACED, run_id)))
        await asyncio.sleep(0.3)

        # when A records the approval and continues the run
        answered = await a.runs.approve(PACED, run_id, call_id, principal="alice", wait_for="recorded")

        # then B received what A's own subscriber did, from the store
        local, remote = await on_a, await on_b
        assert answered.status == "resuming"
        assert [(u.id, u.kind, u.text) for u in remote] == [(u.id, u.kind, u.text) for u in local]
        assert update_kinds(remote) == ["resumed", "tool_call_started", "tool_call_ended", "text", "completed"]
    finally:
        for one in (a, b):
            await one.close()
        for store in stores:
            await store.close()


async def test_the_first_text_delta_is_stored_at_once_and_the_later_ones_with_the_outcome(
    memory_store: MemorySnapshotStore, registry: AgentRegistry
) -> None:
    # given a manager that writes a continuation's updates to the store at most once an hour
    run_updates = importlib.import_module("runtime.updates.run_updates")
    runs = RunManager(memory_store, registry, instance_id="instance-a", update_interval=3600.0)
    try:
        run_id, (call_id,) = await _suspended(runs, PACED, "pay")

        # when its paced model streams the answer (a delta every 20 ms)
        outcome = await runs.approve(PACED, run_id, call_id, principal="alice")
    finally:
        await runs.close()

    # then the first delta was written without waiting for the interval, in a batch of its own
    # write, and every later delta waited, to be written with the outcome
    assert outcome.status == "completed"
    batches = await memory_store.list_run_updates(PACED, run_id, after=None, limit=100)
    stored = [run_updates.decode(b["updates"], agent_id=PACED, run_id=run_id) for b in batches]
    texts = [u for batch in stored for u in batch if u.kind == "text"]
    assert len(texts) > 1
    assert len(stored) == 3, [[u.kind for u in batch] for batch in stored]
    assert stored[0][0].kind == "resumed"
    assert stored[1][-1].id == texts[0].id
    assert [u.id for u in stored[2]] == [*(u.id for u in texts[1:]), run_updates.end_id(texts[0].continuation_id)]


async def test_a_subscriber_that_falls_behind_its_buffer_reads_the_rest_from_the_store(
    memory_store: MemorySnapshotStore, registry: AgentRegistry
) -> None:
    instance = Instance(memory_store, registry, "instance-a", max_buffer_bytes=200)
    try:
        run_id, (call_id,) = await _suspended(instance.runs, PACED, "pay")
        slow = instance.subscribe(PACED, run_id)
        first = asyncio.ensure_future(anext(slow))
        reading = asyncio.ensure_future(_collect(instance.subscribe(PACED, run_id)))
        await asyncio.sleep(0.2)

        # when the continuation sends far more than 200 bytes of updates the slow one does not read
        await instance.runs.approve(PACED, run_id, call_id, principal="alice")
        listeners = instance.runs.updates._listeners[(PACED, run_id)]

        # then it held at most 200 bytes, and still gets every update, in order, once
        assert any(listener.overflowed for listener in listeners)
        assert all(listener.held_bytes <= 200 for listener in listeners)
        rest = await _collect(slow)
        everything = await reading
        assert [u.id for u in [await first, *rest]] == [u.id for u in everything]
        assert sum(u.size for u in everything) > 2000
    finally:
        await instance.close()


async def test_a_run_outside_the_principals_resources_or_missing_is_not_found(instance: Instance) -> None:
    started = await instance.runs.start_run(REFUND, "Please refund order 1042", resource_id="tenant-a")
    restricted = Principal(name="bob", scopes=frozenset({"runs:read"}), resources=frozenset({"tenant-b"}))

    for run_id, principal in ((started.run_id, restricted), ("no-such-run", None)):
        with pytest.raises(RunNotFoundError):
            await anext(instance.subscribe(REFUND, run_id, principal=principal))


async def test_a_recorded_decision_answers_resuming_and_the_run_then_completes(instance: Instance) -> None:
    run_id, (call_id,) = await _suspended(instance.runs, PACED, "pay")

    answered = await instance.runs.approve(PACED, run_id, call_id, principal="alice", wait_for="recorded")

    # the answer came before the tool ran; the run then completes on its own
    assert (answered.status, answered.output, PAID_OUT) == ("resuming", None, [])

    async def completed() -> bool:
        events = await instance.runs.store.list_events(PACED, run_id)
        return events[-1]["type"] == "completed"

    await _until(completed)
    types = [e["type"] for e in await instance.runs.store.list_events(PACED, run_id)]
    assert types == ["started", "suspended", "decision", "resumed", "completed"]
    assert await instance.runs.store.get(PACED, run_id) is None
    assert PAID_OUT == [12]


@pytest.mark.parametrize(("first", "then"), [("recorded", "outcome"), ("outcome", "recorded")])
async def test_an_idempotent_replay_answers_what_the_first_request_answered_whatever_its_wait(
    instance: Instance, first: str, then: str
) -> None:
    run_id, (call_id,) = await _suspended(instance.runs, "flaky-agent", "ship a book")

    answered = await instance.runs.approve(
        "flaky-agent", run_id, call_id, principal="alice", idempotency_key="k1", wait_for=first
    )
    replayed = await instance.runs.approve(
        "flaky-agent", run_id, call_id, principal="alice", idempotency_key="k1", wait_for=then
    )

    assert answered.status == ("resuming" if first == "recorded" else "completed")
    assert replayed == answered
    assert agents.SHIPPED == ["book"] or first == "recorded"


async def test_a_batch_of_recorded_decisions_answers_before_the_runs_continue(instance: Instance) -> None:
    runs = [await _suspended(instance.runs, PACED, "pay") for _ in range(3)]

    answers = await instance.runs.decide_many(
        PACED, [_approval(run_id, call_id) for run_id, (call_id,) in runs], principal="alice", wait_for="recorded"
    )

    assert [getattr(a, "status", a) for a in answers] == ["resuming"] * 3
    assert PAID_OUT == []

    async def finished() -> bool:
        return len(PAID_OUT) == 3 and not any([await instance.runs.store.get(PACED, r) for r, _ in runs])

    await _until(finished)


def test_a_stored_batch_is_rfc_8259_json_a_value_no_json_holds_written_null() -> None:
    run_updates = importlib.import_module("runtime.updates.run_updates")
    update = run_updates.RunUpdate(
        id="00000000000000000001-000000000001.00000001",
        agent_id=PACED,
        run_id="r1",
        continuation_id="00000000000000000001-000000000001",
        kind="tool_call_ended",
        at=datetime.now(UTC),
        tool_call_id="c1",
        tool_name="pay_out",
        result={"ratio": float("nan"), "paid": 12},
    )

    text = run_updates.encode([update])

    assert strict_json.loads(text)[0]["result"] == {"ratio": None, "paid": 12}


def test_an_updates_size_is_the_bytes_its_batch_stores_for_it() -> None:
    run_updates = importlib.import_module("runtime.updates.run_updates")
    updates = [
        run_updates.RunUpdate(
            id=f"00000000000000000001-000000000001.0000000{n}",
            agent_id=PACED,
            run_id="r1",
            continuation_id="00000000000000000001-000000000001",
            kind="tool_call_ended",
            at=datetime.now(UTC),
            tool_call_id="c1",
            tool_name="pay_out",
            result=result,
        )
        for n, result in enumerate(({"ratio": float("nan"), "note": "é"}, {"paid": 12}))
    ]

    text = run_updates.encode(updates)

    # the batch is its updates' texts in a JSON array: its size, less the brackets and commas
    assert len(text.encode()) == sum(u.size for u in updates) + len(updates) + 1


async def test_the_sweeper_prunes_the_update_batches_older_than_the_retention(
    memory_store: MemorySnapshotStore, registry: AgentRegistry
) -> None:
    sweeper_module = importlib.import_module("runtime.sweeper")
    runs = RunManager(memory_store, registry, instance_id="instance-a")
    now = runs.now()
    for batch_id, age in (
        ("00000000000000000001-000000000001.end", 7200),
        ("00000000000000000002-000000000002.end", 0),
    ):
        await memory_store.append_run_updates(
            {"_id": batch_id, "agentId": PACED, "runId": "r1", "at": now - timedelta(seconds=age), "updates": "[]"}
        )

    await sweeper_module.StalledRunSweeper(runs, interval=1.0, update_retention=3600.0).sweep_once()

    kept = await memory_store.list_run_updates(PACED, "r1", after=None, limit=10)
    assert [b["_id"] for b in kept] == ["00000000000000000002-000000000002.end"]


async def test_updates_published_while_a_batch_is_written_wait_for_the_interval_or_the_outcome(
    memory_store: MemorySnapshotStore,
) -> None:
    # given a publisher writing at most once an hour to a store whose writes take 50 ms
    run_updates = importlib.import_module("runtime.updates.run_updates")
    publishing = importlib.import_module("runtime.updates.publishing")
    original = memory_store.append_run_updates

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.05)
        return await original(*args, **kwargs)

    memory_store.append_run_updates = slow  # type: ignore[method-assign]
    hub = publishing.UpdateHub(memory_store, interval=3600.0, now=lambda: datetime.now(UTC))
    publisher = hub.publisher("agent", "run", "c-1")  # its `resumed` is written at once

    # when a tool's start and end are published while `resumed` is being written, then it finishes
    await asyncio.sleep(0.01)
    publisher.publish("tool_call_started", tool_call_id="t1", tool_name="act", args={})
    publisher.publish("tool_call_ended", tool_call_id="t1", tool_name="act", result=1)
    await asyncio.sleep(0.1)
    written_before_the_end = len(await memory_store.list_run_updates("agent", "run", after=None, limit=100))
    await publisher.finish("completed", output="done")

    # then they were not written right after `resumed`, but with the outcome, in one more batch
    batches = await memory_store.list_run_updates("agent", "run", after=None, limit=100)
    kinds = [[u.kind for u in run_updates.decode(b["updates"], agent_id="agent", run_id="run")] for b in batches]
    assert written_before_the_end == 1
    assert kinds == [["resumed"], ["tool_call_started", "tool_call_ended", "completed"]], kinds


async def test_a_call_settled_without_running_is_declined_when_denied_else_started_then_ended(
    memory_store: MemorySnapshotStore,
) -> None:
    # given a publisher answering a call declined by alice (among its decided calls), and a listener
    from pydantic_ai.messages import FunctionToolCallEvent, FunctionToolResultEvent, ToolReturnPart

    publishing = importlib.import_module("runtime.updates.publishing")
    hub = publishing.UpdateHub(memory_store, interval=3600.0, now=lambda: datetime.now(UTC))
    listener = hub.listen("agent", "run", max_bytes=1 << 20)
    publisher = hub.publisher("agent", "run", "c-1")
    declined = {"kind": "declined", "reason": "No", "decidedBy": "alice"}
    calls: Any = [{"toolCallId": "d", "decision": declined}, {"toolCallId": "r", "decision": None}]
    publisher.answering(calls)
    ran, denied, unknown, skipped = (ToolCallPart("act", {"n": n}, tool_call_id=n) for n in ("r", "d", "u", "s"))

    async def events() -> AsyncIterator[Any]:
        # as pydantic-ai sends them: every call's event, then the results; the unrun ones without
        # `args_valid` (denied: runsgate's decline, or another's; skipped after a final result)
        yield FunctionToolCallEvent(ran, args_valid=True)
        for part in (denied, unknown, skipped):
            yield FunctionToolCallEvent(part)
        yield FunctionToolResultEvent(ToolReturnPart("act", "acted", tool_call_id="r"))
        yield FunctionToolResultEvent(ToolReturnPart("act", "told no", tool_call_id="d", outcome="denied"))
        yield FunctionToolResultEvent(ToolReturnPart("act", "denied elsewhere", tool_call_id="u", outcome="denied"))
        yield FunctionToolResultEvent(ToolReturnPart("act", "not executed", tool_call_id="s"))

    # when it reads them
    await publisher.read(events())
    await publisher.finish("completed", output="done")

    # then the run call started and ended, the denied ones were declined (with the decision's reason
    # and decider when runsgate declined it), and the skipped one started, then ended
    updates = [await listener.get_item() for _ in range(8)]
    shown = [(u.kind, u.tool_call_id, u.args, u.result, u.reason, u.decided_by) for u in updates]
    assert shown == [
        ("resumed", None, None, None, None, None),
        ("tool_call_started", "r", {"n": "r"}, None, None, None),
        ("tool_call_ended", "r", None, "acted", None, None),
        ("tool_call_declined", "d", None, None, "No", "alice"),
        ("tool_call_declined", "u", None, None, "denied elsewhere", None),
        ("tool_call_started", "s", {"n": "s"}, None, None, None),
        ("tool_call_ended", "s", None, "not executed", None, None),
        ("completed", None, None, None, None, None),
    ], shown


class _LosesItsClaimAtTheEnd(MemorySnapshotStore):
    """A memory store on which the completion finds its claim lost (another instance took over)."""

    async def delete_claimed(self, *args: Any, **kwargs: Any) -> bool:
        return False


async def test_a_completion_that_lost_its_claim_stores_its_queued_updates_without_the_outcome(
    registry: AgentRegistry,
) -> None:
    # given a store whose completion write finds the claim taken over, and a long update interval
    store = _LosesItsClaimAtTheEnd()
    run_updates = importlib.import_module("runtime.updates.run_updates")
    runs = RunManager(store, registry, instance_id="instance-a", update_interval=3600.0)
    try:
        run_id, (call_id,) = await _suspended(runs, PACED, "pay")

        # when the continuation finishes
        outcome = await runs.approve(PACED, run_id, call_id, principal="alice")
    finally:
        await runs.close()

    # then the run is left to the instance holding it, and what was queued is still stored,
    # after the resumed update written with the claim, with no outcome of this continuation
    assert outcome.status == "resuming"
    batches = await store.list_run_updates(PACED, run_id, after=None, limit=100)
    stored = [u for b in batches for u in run_updates.decode(b["updates"], agent_id=PACED, run_id=run_id)]
    kinds = [u.kind for u in stored]
    assert kinds[0] == "resumed"
    assert "text" in kinds
    assert not {"completed", "suspended", "failed"} & set(kinds), kinds
    assert [u.id for u in stored] == sorted(u.id for u in stored)


async def test_a_first_text_delta_of_a_run_that_ends_within_the_delay_is_stored_with_the_outcome(
    memory_store: MemorySnapshotStore, registry: AgentRegistry
) -> None:
    # given a manager whose first text delta waits up to 30 s for the run to end
    run_updates = importlib.import_module("runtime.updates.run_updates")
    runs = RunManager(memory_store, registry, instance_id="instance-a", update_interval=3600.0, first_text_delay=30.0)
    try:
        run_id, (call_id,) = await _suspended(runs, PACED, "pay")

        # when its paced model streams the answer, well within that time
        outcome = await runs.approve(PACED, run_id, call_id, principal="alice")
    finally:
        await runs.close()

    # then the deltas, the first one too, were written with the outcome: no store write of their own
    assert outcome.status == "completed"
    batches = await memory_store.list_run_updates(PACED, run_id, after=None, limit=100)
    stored = [run_updates.decode(b["updates"], agent_id=PACED, run_id=run_id) for b in batches]
    assert [[u.kind for u in batch][:1] for batch in stored] == [["resumed"], ["tool_call_started"]], stored
    texts = [u for u in stored[1] if u.kind == "text"]
    assert len(texts) > 1
    assert stored[1][-1].id == run_updates.end_id(texts[0].continuation_id)


def test_a_negative_first_text_delay_is_refused(memory_store: MemorySnapshotStore) -> None:
    publishing = importlib.import_module("runtime.updates.publishing")
    with pytest.raises(ValueError, match="first_text_delay"):
        publishing.UpdateHub(memory_store, interval=0.1, now=lambda: datetime.now(UTC), first_text_delay=-1)


# -- what a stream replaying stored batches holds (issue 42, instance 3) ------------------------------
class _ReadBatches(MemorySnapshotStore):
    """A memory store that counts the bytes of the update batches it returned."""

    returned = 0

    async def list_run_updates(self, agent_id: str, run_id: str, *, after: str | None, limit: int) -> list[Any]:
        page = await super().list_run_updates(agent_id, run_id, after=after, limit=limit)
        self.returned += sum(len(batch["updates"]) for batch in page)
        return page


async def _finished_run_with_batches(store: SnapshotStore, run_id: str, batches: int) -> list[str]:
    """A refund run that completed after one continuation, whose updates are ``batches`` stored
    batches of about 240 KiB each (60 text deltas of 4,096 characters); the ids of its updates."""
    run_updates = importlib.import_module("runtime.updates.run_updates")
    started = datetime.now(UTC) - timedelta(minutes=5)
    base = int(started.timestamp() * 1e9)
    ids = [f"{base + n:020d}-{uuid.uuid4().hex[:12]}" for n in range(3)]
    for (event_id, kind), data in zip(
        [(ids[0], "started"), (ids[1], "resumed"), (ids[2], "completed")],
        [{"prompt": "Please refund order 1042"}, {}, {"output": "done"}],
        strict=True,
    ):
        await store.append_event(
            {
                "_id": event_id,
                "runId": run_id,
                "agentId": REFUND,
                "threadId": None,
                "resourceId": "r",
                "type": kind,
                "at": started,
                "by": None,
                "data": data,
            }
        )
    continuation, sent = ids[1], []
    sequence = 1
    for _ in range(batches):
        updates = []
        for _ in range(60):
            update = run_updates.RunUpdate(
                id=run_updates.update_id(continuation, sequence),
                agent_id=REFUND,
                run_id=run_id,
                continuation_id=continuation,
                kind="text",
                at=started,
                text="t" * 4096,
            )
            updates.append(update)
            sequence += 1
        await store.append_run_updates(
            {
                "_id": updates[-1].id,
                "agentId": REFUND,
                "runId": run_id,
                "at": started,
                "updates": run_updates.encode(updates),
            }
        )
        sent += [u.id for u in updates]
    return [run_updates.update_id(continuation, 0), *sent, run_updates.end_id(continuation)]


async def test_streams_replaying_stored_updates_hold_at_most_their_owners_budget(registry: AgentRegistry) -> None:
    runtime = importlib.import_module("runtime")
    from runtime.events.feed import REPLAY_PAGE_BYTES
    from runtime.updates.run_updates import MAX_BATCH_BYTES

    store = _ReadBatches()
    await store.open()
    runs = [f"run-{n}" for n in range(6)]
    expected = {run: await _finished_run_with_batches(store, run, batches=8) for run in runs}
    limit = 1 << 20
    budgets = runtime.SubscriptionBudgets(replay_bytes=limit)
    manager = RunManager(store, registry, instance_id="replays")
    events = EventFeed(store, poll_interval=60.0, budgets=budgets)
    feed = runtime.RunUpdateFeed(manager, events, poll_interval=60.0)  # the event feed's budgets
    alice = Principal(name="alice", scopes=frozenset({"runs:read"}), resources=None, credential="key")
    streams = {run: feed.subscribe(REFUND, run, principal=alice) for run in runs}
    try:
        # when the first stream takes its first update and stops, what it read unsent is a page
        first = await asyncio.wait_for(anext(streams[runs[0]]), WAIT)
        assert store.returned <= REPLAY_PAGE_BYTES + MAX_BATCH_BYTES, store.returned
        # and with all six taking one update each, alice holds at most her budget (and a batch each)
        firsts = {run: asyncio.ensure_future(anext(stream)) for run, stream in streams.items() if run != runs[0]}
        for _ in range(50):
            await asyncio.sleep(0.01)
            assert budgets.held(alice.identity) <= limit + len(runs) * MAX_BATCH_BYTES
        # and each stream read on gets every update of its run, in order
        for run, stream in streams.items():
            head = first if run == runs[0] else await asyncio.wait_for(firsts[run], WAIT)
            rest = [update.id async for update in stream]
            assert [head.id, *rest] == expected[run]
    finally:
        for stream in streams.values():
            await stream.aclose()
        await manager.close()
        await events.close()
    assert budgets.held(alice.identity) == 0
