"""A subscription holds no memory per event it has sent (issue 26, ``bench.bounded_memory``).

The schema is executed in-process, as the WebSocket handler does (Strawberry's ``subscribe``),
on a memory store holding a history the subscription replays from the start with
``afterEventId``. What Python allocated and still holds is measured (``tracemalloc``) after a
first stretch of events and again after many more: it may not grow with the events.
"""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from resolvers import Context, build_schema
from runtime import AgentRegistry, EventFeed, RunManager
from runtime.demo import AGENTS
from storage import EventDocument, MemorySnapshotStore

STREAM = (
    'subscription R($after: ID) { suspendedRunEvents(agentId: "refund-agent", afterEventId: $after) '
    "{ id type runId at data } }"
)
EVENTS = 6000


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "standard"])
async def test_a_subscription_holds_nothing_per_event_it_sent(compiled: bool) -> None:
    store = MemorySnapshotStore()
    await store.open()
    for number in range(EVENTS):
        event: EventDocument = {
            "_id": f"{1_000_000_000_000_000_000 + number:020d}-{uuid.uuid4().hex[:12]}",
            "runId": f"run-{number}",
            "agentId": "refund-agent",
            "threadId": None,
            "resourceId": None,
            "type": "decision",
            "at": datetime(2026, 1, 1, tzinfo=UTC),
            "by": "key:bench",
            "data": {"kind": "approved"},
        }
        await store.append_event(event)
    agents = AgentRegistry(AGENTS)
    feed = EventFeed(store, poll_interval=60.0)
    context = Context(store=store, runs=RunManager(store, agents, instance_id="t"), agents=agents, events=feed)
    schema = build_schema(compiled_execution=compiled)

    stream: Any = await schema.subscribe(
        STREAM, variable_values={"after": "0" * 20 + "-" + "0" * 12}, context_value=context
    )
    held = []
    try:
        received = 0
        async for result in stream:
            assert not result.errors, result.errors
            received += 1
            if received in (1000, EVENTS):
                gc.collect()
                if received == 1000:
                    tracemalloc.start()
                held.append(tracemalloc.get_traced_memory()[0])
                if received == EVENTS:
                    break
    finally:
        tracemalloc.stop()
        await stream.aclose()
        await feed.close()

    # 5,000 more events sent: what is still held may not have grown with them (it grew by
    # about 2 KB per event, held as long as the subscription ran)
    assert held[1] - held[0] < 1_000_000, f"{held[1] - held[0]} bytes held after 5,000 more events"
