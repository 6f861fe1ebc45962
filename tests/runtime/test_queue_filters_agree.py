"""The live queue and the listing apply one filter rule (``QueueQuery``): for any filter and any
subscriber, the questions a watch has told as in the queue after every run event are the ones
``ReviewQueue.page`` lists (docs/api.md "The reviewers' queue, live").

One population of runs on the memory store (two agents, threads, resources; deadlines, review
claims, escalations), built once; hypothesis draws the filters and the subscriber.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import AgentRegistry, Principal, RunManager, ToolApprovalRule
from runtime.access import ALL_SCOPES
from runtime.demo import AGENTS
from runtime.notifying.notifier import DeadlineNotifier
from runtime.reviewing.live import LiveQueue
from runtime.reviewing.queue import QueueQuery
from runtime.running.deferred import question_id
from storage import EventDocument, MemorySnapshotStore
from storage.protocol import EventsAfter

from ._clock import MovedClock

REFUND, WEATHER = "refund-agent", "weather-agent"
RULE = ToolApprovalRule(tool="issue_refund", expires_after=3600, escalate_after=120)
X = Principal(name="x", scopes=ALL_SCOPES, credential="key")
Y = Principal(name="y", scopes=ALL_SCOPES, resources=frozenset({"c7"}), credential="key")
"""Sees only the runs of resource ``c7``."""


@dataclass
class Population:
    runner: asyncio.Runner
    manager: RunManager
    events: list[EventDocument]
    now: datetime


async def _populate(clock: MovedClock) -> tuple[RunManager, list[EventDocument]]:
    store = MemorySnapshotStore()
    await store.open()
    manager = RunManager(store, AgentRegistry(AGENTS), instance_id="a", clock=clock, tool_rules=[RULE])
    notifier = DeadlineNotifier(store, rules=[RULE], agent_ids=[REFUND], instance_id="a", clock=clock)
    started = []
    for round_ in range(2):  # the first round's refunds are escalated, the second's are not
        for thread, resource in (("t1", "c7"), ("t2", "c8"), ("t1", "c8"), ("t2", "c7")):
            for agent, prompt in (
                (REFUND, "Please refund order 1042"),
                (REFUND, "Please refund orders 1042 and 1043"),
                (WEATHER, "What's the weather like?"),
            ):
                outcome = await manager.start_run(agent, prompt, thread_id=thread, resource_id=resource)
                assert outcome.status == "suspended"
                assert outcome.run is not None
                started.append(outcome.run)
        if round_ == 0:
            await notifier.scan_once()
            clock.ahead = 121
            await notifier.fire_once()
    for number, run in enumerate(started):  # every third question claimed by x, every third by y
        for call in run["toolCalls"]:
            by = (X, Y, None)[number % 3]
            if by is not None and (by is X or run["resourceId"] == "c7"):
                await manager.review_claims.claim(run["agentId"], run["_id"], call["toolCallId"], question_id(call), by)
    events = await store.list_events_after(EventsAfter(agent_id=None, after_event_id="0", limit=10_000))
    return manager, events


@pytest.fixture(scope="module")
def population() -> Iterator[Population]:
    clock = MovedClock()
    with asyncio.Runner() as runner:
        manager, events = runner.run(_populate(clock))
        yield Population(runner, manager, events, clock())


def _some(values: list[str]) -> st.SearchStrategy[frozenset[str] | None]:
    return st.none() | st.frozensets(st.sampled_from(values))


def queries(now: datetime) -> st.SearchStrategy[QueueQuery]:
    maybe = st.none() | st.booleans()
    return st.builds(
        QueueQuery,
        agent_ids=_some([REFUND, WEATHER, "other-agent"]),
        tool_names=_some(["issue_refund", "get_weather", "lookup_order", "other_tool"]),
        thread_id=st.none() | st.sampled_from(["t1", "t2", "t3"]),
        resource_id=st.none() | st.sampled_from(["c7", "c8", "c9"]),
        claimed_by_me=maybe,
        unclaimed=maybe,
        expires_before=st.none() | st.sampled_from([now - timedelta(hours=2), now + timedelta(hours=2)]),
        escalated=maybe,
    )


async def _both(population: Population, principal: Principal, query: QueueQuery) -> tuple[set[object], set[object]]:
    queue = population.manager.review_queue
    items, more, _ = await queue.page(principal, query, first=1000)
    assert not more
    listed = {(item.run["_id"], question_id(item.run["toolCalls"][item.index])) for item in items}
    watch = LiveQueue(queue).watch(principal, query)
    told: set[object] = set()
    for event in population.events:
        if watch.accepts(event):
            for change in await watch.changes(event):
                key = (change.run_id, change.question_id)
                if change.kind == "left":
                    told.discard(key)
                else:
                    told.add(key)
    return listed, told


def test_the_population_covers_each_filter(population: Population) -> None:
    listed, _ = population.runner.run(_both(population, X, QueueQuery()))
    assert len(listed) > 30
    for query in (
        QueueQuery(escalated=True),
        QueueQuery(escalated=False),
        QueueQuery(claimed_by_me=True),
        QueueQuery(unclaimed=True),
        QueueQuery(expires_before=population.now + timedelta(hours=2)),
        QueueQuery(tool_names=frozenset({"issue_refund"})),
    ):
        some, _ = population.runner.run(_both(population, X, query))
        assert 0 < len(some) < len(listed), query


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_watch_tells_what_the_listing_lists_for_every_filter(population: Population, data: st.DataObject) -> None:
    query = data.draw(queries(population.now), label="query")
    principal = data.draw(st.sampled_from([X, Y]), label="principal")
    listed, told = population.runner.run(_both(population, principal, query))
    assert told == listed
