"""The ``EventLog`` part of the store contract (the audit log and the event feed's keyset walk),
run against the memory store, a SQLite file and a real MongoDB server (the ``store`` fixture)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage import (
    SnapshotStore,
)
from storage.protocol import EventsAfter
from tests._servers import mongo_store

from ._contract import T0, feed_event


async def test_events_are_per_run_and_oldest_first(store: SnapshotStore) -> None:
    for i, kind in enumerate(["started", "suspended", "decision"]):
        await store.append_event(
            {
                "_id": f"e{i}",
                "runId": "run",
                "agentId": "refund-agent",
                "type": kind,  # type: ignore[typeddict-item]
                "at": T0 + timedelta(seconds=i),
                "by": "alice",
                "data": {"i": i},
            }
        )
    await store.append_event(
        {
            "_id": "other",
            "runId": "run2",
            "agentId": "refund-agent",
            "type": "started",
            "at": T0,
            "by": None,
            "data": {},
        }
    )

    events = await store.list_events("refund-agent", "run")

    assert [e["type"] for e in events] == ["started", "suspended", "decision"]
    assert events[2]["data"] == {"i": 2}
    assert await store.list_events("weather-agent", "run") == []


async def test_events_of_several_runs_in_one_call(store: SnapshotStore) -> None:
    for i, (run_id, agent_id) in enumerate([("r1", "refund-agent"), ("r2", "refund-agent"), ("r3", "weather-agent")]):
        await store.append_event(
            {"_id": f"e{i}", "runId": run_id, "agentId": agent_id, "type": "started", "at": T0, "by": None, "data": {}}
        )
    await store.append_event(
        {
            "_id": "e0-late",
            "runId": "r1",
            "agentId": "refund-agent",
            "type": "suspended",
            "at": T0,
            "by": None,
            "data": {},
        }
    )

    events = await store.list_events_of_runs("refund-agent", ["r1", "r2", "r3"])

    assert [(e["runId"], e["_id"]) for e in events] == [("r1", "e0"), ("r1", "e0-late"), ("r2", "e1")]


async def test_events_after_walk_the_agents_log_in_id_order(store: SnapshotStore) -> None:
    # inserted out of order, with another agent's events in between and the same `at` everywhere
    for event_id, agent_id in [("003", "refund-agent"), ("001", "refund-agent"), ("002", "weather-agent")]:
        await store.append_event(feed_event(event_id, agent_id=agent_id, run_id=f"run-{event_id}"))
    await store.append_event(feed_event("002-b"))
    await store.append_event(feed_event("004"))

    everything = await store.list_events_after(EventsAfter(agent_id="refund-agent", after_event_id=None, limit=10))
    first_page = await store.list_events_after(EventsAfter(agent_id="refund-agent", after_event_id=None, limit=2))
    second_page = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id=first_page[-1]["_id"], limit=2)
    )
    last_page = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id=second_page[-1]["_id"], limit=2)
    )

    assert [e["_id"] for e in everything] == ["001", "002-b", "003", "004"]
    assert [e["_id"] for e in first_page] == ["001", "002-b"]
    assert [e["_id"] for e in second_page] == ["003", "004"]
    assert last_page == []
    assert everything[0]["runId"] == "run-001"
    assert everything[0]["resourceId"] == "r1"
    assert everything[0]["threadId"] == "t1"


async def test_events_after_bound_is_exclusive_and_need_not_exist(store: SnapshotStore) -> None:
    for event_id in ["00000000000000000010-aa", "00000000000000000020-aa", "00000000000000000030-aa"]:
        await store.append_event(feed_event(event_id))

    from_existing = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id="00000000000000000010-aa", limit=10)
    )
    # a bare time prefix sorts before every id of that nanosecond: the "now" cursor of a subscription
    from_time = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id="00000000000000000020", limit=10)
    )
    past_the_end = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id="00000000000000000030-aa", limit=10)
    )

    assert [e["_id"] for e in from_existing] == ["00000000000000000020-aa", "00000000000000000030-aa"]
    assert [e["_id"] for e in from_time] == ["00000000000000000020-aa", "00000000000000000030-aa"]
    assert past_the_end == []
    assert await store.list_events_after(EventsAfter(agent_id="weather-agent", after_event_id=None, limit=10)) == []


async def test_events_after_restricted_to_resources_read_only_their_events(store: SnapshotStore) -> None:
    # a subscriber's replay: its page is full of its own events, others' are never read
    for n, resource in enumerate(["r1", "r2", None, "r1", "r2", "r3", "r1"]):
        await store.append_event({**feed_event(f"00{n}"), "resourceId": resource})

    mine = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id=None, limit=2, resource_ids=frozenset({"r1"}))
    )
    rest = await store.list_events_after(
        EventsAfter(
            agent_id="refund-agent", after_event_id=mine[-1]["_id"], limit=10, resource_ids=frozenset({"r1", "r3"})
        )
    )
    none = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id=None, limit=10, resource_ids=frozenset())
    )

    assert [e["_id"] for e in mine] == ["000", "003"]
    assert [e["_id"] for e in rest] == ["005", "006"]
    assert none == []


async def test_events_after_rejects_a_limit_below_one(store: SnapshotStore) -> None:
    await store.append_event(feed_event("001"))

    with pytest.raises(ValueError, match="limit"):
        await store.list_events_after(EventsAfter(agent_id="refund-agent", after_event_id=None, limit=0))


@pytest.mark.mongo
async def test_mongo_has_an_index_in_event_feed_order(mongodb_uri: str) -> None:
    mongo = mongo_store(mongodb_uri)
    await mongo.open()
    try:
        indexes = await mongo.database["run_events"].index_information()
    finally:
        await mongo.drop_all()
        await mongo.close()

    assert indexes["agent_event_order"]["key"] == [("agentId", 1), ("_id", 1)]


async def test_a_page_of_events_after_holds_at_most_max_bytes_and_one_event_at_least(store: SnapshotStore) -> None:
    from storage import event_size

    # given 12 events of about 10 KB of data, the third of 40 KB
    events = [{**feed_event(f"{n:03d}"), "data": {"prompt": "x" * (40_000 if n == 2 else 10_000)}} for n in range(12)]
    for event in events:
        await store.append_event(event)  # type: ignore[arg-type]
    sizes = {e["_id"]: event_size(e) for e in events}  # type: ignore[arg-type]

    # when pages are read with a bound in bytes
    two = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id=None, limit=500, max_bytes=sizes["000"] + sizes["001"])
    )
    alone = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id="001", limit=500, max_bytes=1)
    )
    counted = await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id=None, limit=3, max_bytes=10**9)
    )
    walked, after = [], "002"
    while page := await store.list_events_after(
        EventsAfter(agent_id="refund-agent", after_event_id=after, limit=500, max_bytes=25_000)
    ):
        assert len(page) == 1 or sum(event_size(e) for e in page) <= 25_000
        walked += [e["_id"] for e in page]
        after = page[-1]["_id"]

    # then each page stops before the event that would pass the bound, but holds one event at least,
    # and a walk of such pages reads every event once, in order
    assert [e["_id"] for e in two] == ["000", "001"]
    assert [e["_id"] for e in alone] == ["002"]
    assert alone[0]["data"] == events[2]["data"]
    assert [e["_id"] for e in counted] == ["000", "001", "002"]
    assert walked == [f"{n:03d}" for n in range(3, 12)]
    with pytest.raises(ValueError, match="max_bytes"):
        await store.list_events_after(EventsAfter(agent_id="refund-agent", after_event_id=None, limit=10, max_bytes=0))


async def test_events_after_of_no_agent_walk_every_agents_log_in_id_order(store: SnapshotStore) -> None:
    # the reviewers' queue follows every agent's events at once, in creation order
    for event_id, agent_id in [("003", "refund-agent"), ("001", "weather-agent"), ("002", "refund-agent")]:
        await store.append_event({**feed_event(event_id, agent_id=agent_id), "resourceId": f"r-{event_id}"})
    await store.append_event({**feed_event("004", agent_id="supervisor-agent"), "resourceId": "r-004"})

    first = await store.list_events_after(EventsAfter(agent_id=None, after_event_id=None, limit=2))
    rest = await store.list_events_after(EventsAfter(agent_id=None, after_event_id=first[-1]["_id"], limit=10))
    allowed = await store.list_events_after(
        EventsAfter(agent_id=None, after_event_id="001", limit=10, resource_ids=frozenset({"r-003", "r-004"}))
    )

    assert [(e["_id"], e["agentId"]) for e in first] == [("001", "weather-agent"), ("002", "refund-agent")]
    assert [(e["_id"], e["agentId"]) for e in rest] == [("003", "refund-agent"), ("004", "supervisor-agent")]
    assert [e["_id"] for e in allowed] == ["003", "004"]
