"""Keyset pagination is stable under inserts and deletes: a property-based test on both stores.

Hypothesis draws a set of stored runs (with ties on ``createdAt``), a filter, a direction
(``first/after`` or ``last/before``) and a page size, then walks the connection page by page
through the real GraphQL schema and store, inserting and deleting runs between pages. A plain
Python model (a dict of the runs present) says what every page must hold, and at the end of
the walk: no run was returned twice, and every run present throughout the walk that matches the
filter was returned (Relay cursor pagination, docs/api.md "Pagination").

Each example uses a fresh agent id, so examples never see each other's runs on the shared
store; the settings are derandomized and bounded so CI runs the same examples every time.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resolvers import Context, schema
from runtime import RunManager
from runtime.demo import refund_agent
from runtime.registry import AgentRegistry
from storage import SCHEMA_VERSION, SnapshotDocument, SnapshotStore
from storage.protocol import ClaimedDeletion, ClaimWrite

PAGE = """
query Page($agentId: ID!, $filter: SuspendedRunFilter, $first: Int, $after: String, $last: Int, $before: String) {
  suspendedRuns(agentId: $agentId, filter: $filter, first: $first, after: $after, last: $last, before: $before) {
    totalCount
    edges { cursor node { runId createdAt } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}
"""

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
THREADS = [None, "t1", "t2"]
RESOURCES = [None, "r1", "r2"]
MAX_PAGES = 80
"""A walk ends by itself (inserts are bounded); this only guards the test against a loop."""


@dataclass(frozen=True)
class Run:
    run_id: str
    created: datetime
    thread: str | None
    resource: str | None

    @property
    def key(self) -> tuple[datetime, str]:
        return (self.created, self.run_id)


@dataclass(frozen=True)
class Filter:
    thread: str | None
    resource: str | None
    from_date: datetime | None
    to_date: datetime | None

    def matches(self, run: Run) -> bool:
        return (
            (self.thread is None or run.thread == self.thread)
            and (self.resource is None or run.resource == self.resource)
            and (self.from_date is None or run.created >= self.from_date)
            and (self.to_date is None or run.created <= self.to_date)
        )

    def variables(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.thread is not None:
            out["threadId"] = self.thread
        if self.resource is not None:
            out["resourceId"] = self.resource
        if self.from_date is not None:
            out["fromDate"] = self.from_date.isoformat()
        if self.to_date is not None:
            out["toDate"] = self.to_date.isoformat()
        return out or None


_ids = itertools.count()


def runs_strategy() -> st.SearchStrategy[Run]:
    """Runs on a few distinct seconds (many ties), ids whose order differs from insertion order."""
    return st.builds(
        lambda second, prefix, thread, resource: Run(
            run_id=f"{prefix:02d}-{next(_ids):06d}",
            created=T0 + timedelta(seconds=second),
            thread=thread,
            resource=resource,
        ),
        st.integers(0, 6),
        st.integers(0, 20),
        st.sampled_from(THREADS),
        st.sampled_from(RESOURCES),
    )


def filters_strategy() -> st.SearchStrategy[Filter]:
    dates = st.none() | st.integers(0, 6).map(lambda s: T0 + timedelta(seconds=s))
    return st.builds(Filter, st.sampled_from(THREADS), st.sampled_from(RESOURCES), dates, dates).filter(
        lambda f: f.from_date is None or f.to_date is None or f.from_date <= f.to_date
    )


def document(agent_id: str, run: Run) -> SnapshotDocument:
    """A stored run with no pending call, so it can be claimed and deleted like a finished run."""
    return {
        "_id": run.run_id,
        "agentId": agent_id,
        "threadId": run.thread,
        "resourceId": run.resource,
        "parentRunId": None,
        "status": "suspended",
        "createdAt": run.created,
        "suspendedAt": run.created,
        "updatedAt": run.created,
        "toolCalls": [],
        "pendingCount": 0,
        "version": 1,
        "claim": None,
        "lastError": None,
        "schemaVersion": SCHEMA_VERSION,
        "historyId": uuid.uuid4().hex,
    }


async def delete(store: SnapshotStore, agent_id: str, run_id: str) -> None:
    """Delete a run the way a finished run is deleted: claim it, then ``delete_claimed``."""
    now = datetime.now(UTC)
    claimed = await store.claim(
        ClaimWrite(agent_id=agent_id, run_id=run_id, by="walker", until=now + timedelta(minutes=1), now=now)
    )
    assert claimed is not None
    assert await store.delete_claimed(ClaimedDeletion(agent_id=agent_id, run_id=run_id, by="walker"))


def expected_page(
    present: dict[str, Run], run_filter: Filter, *, size: int, cursor: tuple[datetime, str] | None, forward: bool
) -> tuple[list[str], bool, bool]:
    """(run ids of the page, hasNextPage, hasPreviousPage) from the model, newest first."""
    ordered = sorted((r for r in present.values() if run_filter.matches(r)), key=lambda r: r.key, reverse=True)
    if forward:
        rest = [r for r in ordered if cursor is None or r.key < cursor]
        page = rest[:size]
        has_next = len(rest) > size
        bound = page[0].key if page else cursor
        has_previous = cursor is not None and bound is not None and any(r.key > bound for r in ordered)
    else:
        rest = [r for r in ordered if cursor is None or r.key > cursor]
        page = rest[-size:] if size else []
        has_previous = len(rest) > size
        bound = page[-1].key if page else cursor
        has_next = cursor is not None and bound is not None and any(r.key < bound for r in ordered)
    return [r.run_id for r in page], has_next, has_previous


@settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_cursor_walks_neither_skip_nor_repeat_runs_present_throughout(
    store: SnapshotStore, data: st.DataObject
) -> None:
    # given runs of a fresh agent, a filter, a direction and a page size
    agent_id = f"agent-{uuid.uuid4().hex[:10]}"
    agents = AgentRegistry({agent_id: refund_agent})
    context = Context(store=store, runs=RunManager(store, agents, instance_id="walker"), agents=agents)
    initial = data.draw(st.lists(runs_strategy(), max_size=20), label="initial runs")
    present = {run.run_id: run for run in initial}
    if initial:
        await store.insert_many([(document(agent_id, r), b"[]") for r in initial])
    run_filter = data.draw(filters_strategy(), label="filter")
    forward = data.draw(st.booleans(), label="first/after (else last/before)")
    size = data.draw(st.integers(1, 5), label="page size")
    present_throughout = {r.run_id for r in initial}
    seen: list[str] = []
    cursor: str | None = None
    cursor_key: tuple[datetime, str] | None = None

    # when the connection is walked page by page while runs are inserted and deleted
    for _ in range(MAX_PAGES):
        variables: dict[str, Any] = {"agentId": agent_id, "filter": run_filter.variables()}
        variables.update({"first": size, "after": cursor} if forward else {"last": size, "before": cursor})
        result = await schema.execute(PAGE, variable_values=variables, context_value=context)
        assert result.errors is None, result.errors
        assert result.data is not None
        connection = result.data["suspendedRuns"]
        ids = [edge["node"]["runId"] for edge in connection["edges"]]
        info = connection["pageInfo"]

        # then each page is exactly what the model holds after the cursor, with true page info
        want_ids, want_next, want_previous = expected_page(
            present, run_filter, size=size, cursor=cursor_key, forward=forward
        )
        assert ids == want_ids
        assert (info["hasNextPage"], info["hasPreviousPage"]) == (want_next, want_previous)
        assert connection["totalCount"] == sum(1 for r in present.values() if run_filter.matches(r))
        seen.extend(ids)
        if not (info["hasNextPage"] if forward else info["hasPreviousPage"]):
            break
        edge = connection["edges"][-1 if forward else 0]
        cursor = edge["cursor"]
        cursor_key = present[edge["node"]["runId"]].key

        for _change in range(data.draw(st.integers(0, 3), label="changes before the next page")):
            if present and data.draw(st.booleans(), label="delete (else insert)"):
                victim = data.draw(st.sampled_from(sorted(present)), label="deleted run")
                await delete(store, agent_id, victim)
                del present[victim]
                present_throughout.discard(victim)
            else:
                new = data.draw(runs_strategy(), label="inserted run")
                await store.insert(document(agent_id, new), b"[]")
                present[new.run_id] = new
    else:
        pytest.fail(f"the walk did not end after {MAX_PAGES} pages")

    # and over the whole walk no run came twice and none present throughout was skipped
    assert len(seen) == len(set(seen))
    wanted = {i for i in present_throughout if run_filter.matches(present[i])}
    assert wanted <= set(seen)
