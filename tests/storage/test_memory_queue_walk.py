"""The memory store's reviewers' queue of one thread or resource (issue 45, docs/storage.md
"The memory store"): a page, and the count with ``expiresBefore``, read the runs of that thread or
resource in queue order from an index of their own, so they read as many runs as the page holds
whatever the other threads hold; and every filter's keyset walk lists what the queue's order and
filter say, read off every stored run."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import MemorySnapshotStore, QueueFilter, QueueKey, SnapshotDocument, queue_key
from storage.memory.review import in_queue_filter

from ._contract import T0, snapshot, tool_call

RUNS, THREADS, RESOURCES, PAGE = 400, 40, 8, 5
HOUR = timedelta(hours=1)


class CountingRuns(dict[str, SnapshotDocument]):
    """The store's runs by id, counting the reads of a run (``reads``)."""

    reads = 0

    def __getitem__(self, run_id: str) -> SnapshotDocument:
        self.reads += 1
        return super().__getitem__(run_id)

    def get(self, run_id: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(run_id, default)


def _run(n: int, *, thread: str, resource: str, deadline: timedelta | None) -> SnapshotDocument:
    call = tool_call("c1")
    if deadline is not None:
        call["expiresAt"] = T0 + deadline
    doc = snapshot(f"r{n:04d}", thread=thread, resource=resource, calls=[call])
    doc["suspendedAt"] = doc["updatedAt"] = T0 + timedelta(seconds=n)
    return doc


async def _counting_store(docs: list[SnapshotDocument]) -> tuple[MemorySnapshotStore, CountingRuns]:
    store = MemorySnapshotStore()
    for doc in docs:
        await store.insert(doc, b"[]")
    runs = CountingRuns(store._runs)
    store._runs = runs
    return store, runs


async def test_a_page_of_one_thread_or_resource_reads_only_its_runs() -> None:
    # The last thread and resource come last in queue order (suspended last, half of them due).
    docs = [
        _run(
            n,
            thread=f"t{n * THREADS // RUNS}",
            resource=f"c{n * RESOURCES // RUNS}",
            deadline=HOUR if n % 2 else None,
        )
        for n in range(RUNS)
    ]
    store, runs = await _counting_store(docs)
    last_thread, last_resource = f"t{THREADS - 1}", f"c{RESOURCES - 1}"
    for f in (
        QueueFilter(thread_id=last_thread),
        QueueFilter(resource_id=last_resource),
        QueueFilter(resource_ids=frozenset({last_resource})),
        QueueFilter(thread_id=last_thread, resource_id=last_resource),
    ):
        runs.reads = 0
        page = await store.list_review_runs(f, limit=PAGE)
        assert len(page) == PAGE
        assert runs.reads == PAGE, (f, runs.reads)
        runs.reads = 0
        page = await store.list_review_runs(f, limit=PAGE, after=queue_key(page[-1]))
        assert len(page) == PAGE
        assert runs.reads == PAGE, (f, runs.reads)
        runs.reads = 0
        due = RUNS // THREADS // 2 if f.thread_id else RUNS // RESOURCES // 2
        assert await store.count_review_questions(replace(f, expires_before=T0 + 2 * HOUR)) == due
        assert runs.reads == due, (f, runs.reads)


NAMES = st.sampled_from(["a", "b", "c"])
RUN = st.tuples(
    st.one_of(st.none(), NAMES),  # thread
    st.one_of(st.none(), NAMES),  # resource
    st.sampled_from(["refund-agent", "weather-agent"]),
    st.one_of(st.none(), st.integers(0, 3)),  # deadline, hours
    st.integers(0, 3),  # suspendedAt, seconds (ties broken by run id)
    st.booleans(),  # a sub-run
    st.sampled_from(["suspended", "completed"]),
)
FILTER = st.builds(
    QueueFilter,
    agent_ids=st.one_of(st.none(), st.frozensets(st.sampled_from(["refund-agent", "weather-agent"]))),
    thread_id=st.one_of(st.none(), NAMES),
    resource_id=st.one_of(st.none(), NAMES),
    expires_before=st.one_of(st.none(), st.integers(0, 4).map(lambda h: T0 + timedelta(hours=h))),
    resource_ids=st.one_of(st.none(), st.frozensets(NAMES)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(RUN, max_size=14), f=FILTER, limit=st.integers(1, 4))
async def test_every_filters_walk_lists_the_queue_read_off_every_run(
    runs: list[tuple[Any, ...]], f: QueueFilter, limit: int
) -> None:
    docs = []
    for n, (thread, resource, agent, deadline, suspended, sub, status) in enumerate(runs):
        call = tool_call("c1")
        if deadline is not None:
            call["expiresAt"] = T0 + timedelta(hours=deadline)
        doc = snapshot(f"r{n:02d}", agent_id=agent, thread=thread, resource=resource, calls=[call])
        doc["suspendedAt"] = T0 + timedelta(seconds=suspended)
        doc["status"] = status
        if sub:
            doc["parentRunId"] = "r00"
        docs.append(doc)
    store, _ = await _counting_store(docs)
    stored = list(store._runs.values())
    expected = sorted(
        (doc for doc in stored if doc["status"] == "suspended" and doc["pendingCount"] and in_queue_filter(f, doc)),
        key=lambda doc: queue_key(doc).order(),
    )
    walked: list[str] = []
    after: QueueKey | None = None
    while page := await store.list_review_runs(f, limit=limit, after=after):
        assert len(page) <= limit
        walked.extend(doc["_id"] for doc in page)
        after = queue_key(page[-1])
    assert walked == [doc["_id"] for doc in expected]
    counted = sum(doc["pendingCount"] for doc in expected if doc["parentRunId"] is None)
    assert await store.count_review_questions(f) == counted
