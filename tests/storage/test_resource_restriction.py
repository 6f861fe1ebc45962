"""``RunFilter.resource_ids`` and the events' resource restriction, on both stores.

A principal limited to some resources must get pages and counts computed over its own runs
only (SECURITY.md): the restriction is part of the store query, never a filter applied to a
page after loading it.
"""

from __future__ import annotations

from datetime import timedelta

from storage import RunFilter, SnapshotStore, sort_key
from storage.protocol import RunPage

from ._contract import T0, snapshot

MINE = frozenset({"r-mine", "r-also-mine"})


async def _five_runs(store: SnapshotStore) -> None:
    """Newest first: e (r-other), d (r-mine), c (no resource), b (r-also-mine), a (r-mine)."""
    for i, (run_id, resource) in enumerate(
        [("a", "r-mine"), ("b", "r-also-mine"), ("c", None), ("d", "r-mine"), ("e", "r-other")]
    ):
        await store.insert(snapshot(run_id, created=T0 + timedelta(seconds=i), resource=resource), b"[]")


async def test_allowed_resources_restrict_listing_and_count(store: SnapshotStore) -> None:
    # given runs of several resources, one without a resource
    await _five_runs(store)
    restricted = RunFilter(resource_ids=MINE)

    # when listed and counted with the restriction
    runs = await store.list_runs("refund-agent", restricted)
    count = await store.count_runs("refund-agent", restricted)

    # then only the allowed resources' runs are there, in listing order, and counted alike
    assert [r["_id"] for r in runs] == ["d", "b", "a"]
    assert count == 3


async def test_pages_of_a_restricted_listing_are_full_and_keyset_bounds_hold(store: SnapshotStore) -> None:
    # given runs of several resources
    await _five_runs(store)
    restricted = RunFilter(resource_ids=MINE)

    # when paged two at a time, by skip and by keyset
    first = await store.list_runs("refund-agent", restricted, RunPage(limit=2))
    second = await store.list_runs("refund-agent", restricted, RunPage(limit=2, skip=2))
    after = await store.list_runs("refund-agent", restricted, RunPage(limit=2, after=sort_key(first[-1])))
    last = await store.list_runs("refund-agent", restricted, RunPage(limit=2, from_end=True))

    # then every page is filled with allowed runs only (no hole where a hidden run was)
    assert [r["_id"] for r in first] == ["d", "b"]
    assert [r["_id"] for r in second] == ["a"]
    assert [r["_id"] for r in after] == ["a"]
    assert [r["_id"] for r in last] == ["b", "a"]


async def test_a_resource_filter_combines_with_the_restriction(store: SnapshotStore) -> None:
    # given runs of several resources
    await _five_runs(store)

    # when the resourceId filter names an allowed resource, then a forbidden one
    allowed = await store.list_runs("refund-agent", RunFilter(resource_id="r-mine", resource_ids=MINE))
    forbidden = await store.list_runs("refund-agent", RunFilter(resource_id="r-other", resource_ids=MINE))
    forbidden_count = await store.count_runs("refund-agent", RunFilter(resource_id="r-other", resource_ids=MINE))

    # then the first lists that resource's runs, the second nothing, counted as nothing
    assert [r["_id"] for r in allowed] == ["d", "a"]
    assert forbidden == []
    assert forbidden_count == 0


async def test_an_empty_restriction_sees_nothing_and_none_sees_everything(store: SnapshotStore) -> None:
    # given runs of several resources
    await _five_runs(store)

    # then no allowed resource lists nothing, and no restriction lists all five
    assert await store.list_runs("refund-agent", RunFilter(resource_ids=frozenset())) == []
    assert await store.count_runs("refund-agent", RunFilter(resource_ids=frozenset())) == 0
    assert await store.count_runs("refund-agent", RunFilter()) == 5


async def test_events_are_restricted_by_their_resource(store: SnapshotStore) -> None:
    # given events of a run of r-mine, of r-other, and one written without a resource
    for i, (run_id, resource) in enumerate([("run-a", "r-mine"), ("run-b", "r-other")]):
        await store.append_event(
            {
                "_id": f"e{i}",
                "runId": run_id,
                "agentId": "refund-agent",
                "type": "started",
                "at": T0,
                "by": None,
                "data": {},
                "resourceId": resource,
            }
        )
    await store.append_event(
        {
            "_id": "e-old",
            "runId": "run-a",
            "agentId": "refund-agent",
            "type": "suspended",
            "at": T0,
            "by": None,
            "data": {},
        }
    )

    # when read with and without the restriction
    restricted = await store.list_events_of_runs("refund-agent", ["run-a", "run-b"], resource_ids=MINE)
    everything = await store.list_events_of_runs("refund-agent", ["run-a", "run-b"])

    # then the restricted read has only r-mine's event; the unrestricted one has all three
    assert [e["_id"] for e in restricted] == ["e0"]
    assert sorted(e["_id"] for e in everything) == ["e-old", "e0", "e1"]
