"""Every query of the MongoDB store uses an index: each listing filter, the deadline read, the
sweeper's reads, and every write by key (docs/storage.md "Query plans").

The queries are the ones the store sends, recorded through PyMongo's command monitoring
(``_sent``) and explained as sent: reads as they are, writes as a ``find`` with their condition
(FerretDB 2.5 explains no update, findAndModify or delete). Two engines read plans:

- FerretDB 2.5 on DocumentDB, the tests' MongoDB server, answers PostgreSQL plans (``Index Scan``,
  ``Bitmap Index Scan`` naming the index, ``Seq Scan``, ``Sort``). There a listing page uses an index
  holding every field it filters on by equality, then sorts the matches in a separate step:
  DocumentDB 0.106 pushes a sort into an index only behind an experimental setting
  (``documentdb.enableIndexOrderbyPushdown``, off by default) and on an access method that can
  order, which the ``documentdb_rum`` FerretDB 2.5 uses cannot (docs/storage.md "Query plans").
- A real mongod (``MONGODB_URI``) answers ``winningPlan`` stages: a page there is a walk of one
  listing index in listing order (no ``SORT``), but for ``expiresBefore``, a range on another field.

FerretDB 1.24 plans every query as a full scan: skipped (bench/RESULTS.md).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from bson import MaxKey, MinKey, decode

from resolvers import Context, schema
from runtime import RunManager
from runtime.demo import refund_agent
from runtime.registry import AgentRegistry
from storage import MongoSnapshotStore, QueueFilter, QueueKey, ReviewCandidates, RunFilter, queue_key, sort_key
from storage.mongo.schema import REVIEW_QUEUE_INDEX
from storage.mongo.windows import WINDOWED_TRIES
from storage.protocol import DecisionWrite, DeliveryLease, EventsAfter, RunPage
from tests._servers import mongo_store

from ._contract import T0, decision, snapshot, tool_call
from ._sent import SENT, Sent
from .test_mongo_conditions import _every_conditional_write

pytestmark = pytest.mark.mongo

FILTERS = {
    "agent": RunFilter(),
    "thread": RunFilter(thread_id="t1"),
    "resource": RunFilter(resource_id="r1"),
    "thread+resource": RunFilter(thread_id="t1", resource_id="r1"),
    "dates": RunFilter(from_date=T0, to_date=T0 + timedelta(days=1)),
    "thread+dates": RunFilter(thread_id="t1", from_date=T0),
    "resource+dates": RunFilter(resource_id="r1", to_date=T0 + timedelta(days=1)),
    "expires before": RunFilter(expires_before=T0 + timedelta(hours=1)),
    "thread+expires before": RunFilter(thread_id="t1", expires_before=T0 + timedelta(hours=1)),
    "restricted": RunFilter(resource_ids=frozenset({"r1", "r2"})),
    "thread+restricted": RunFilter(thread_id="t1", resource_ids=frozenset({"r1"})),
}
"""Every listing filter combination the API can make (``SuspendedRunFilter`` and a principal's
resources); dates are a range inside any of them."""


UNDATED = [name for name, f in FILTERS.items() if (f.from_date, f.to_date, f.expires_before) == (None, None, None)]
"""The filters whose totals are kept (no date bounds)."""


@dataclass(frozen=True)
class Plan:
    """What the tests read of a plan, whichever engine made it."""

    indexes: tuple[str, ...]
    """The indexes the plan scans."""
    full_scan: bool
    """Whether it scans a whole collection (``Seq Scan``, ``COLLSCAN``)."""
    sort: bool
    """Whether it sorts in a step of its own (``Sort``, ``SORT``)."""
    conditions: tuple[str, ...] = ()
    """DocumentDB: the conditions its index scans apply (``Index Cond``, BSON as hex)."""


def _documentdb_plan(plan: Mapping[str, Any]) -> Plan:
    nodes = list(_walk(plan["queryPlanner"]["Plan"], "Plans"))
    return Plan(
        indexes=tuple(str(n["Index Name"]) for n in nodes if "Index Name" in n),
        full_scan=any(n["Node Type"] == "Seq Scan" for n in nodes),
        sort=any(n["Node Type"] in ("Sort", "Incremental Sort") for n in nodes),
        conditions=tuple(str(n["Index Cond"]) for n in nodes if "Index Cond" in n),
    )


_OPERAND = re.compile(r"OPERATOR\(documentdb_api_catalog\.(@[^)]+)\) 'BSONHEX([0-9a-f]+)'")


def _bounds(condition: str) -> dict[str, set[str]]:
    """Per field, the sides an index condition (DocumentDB's ``Index Cond``, BSON as hex) bounds
    it on: ``low``, ``high`` (a range ``@<>``, such as ``$gte`` and ``$lte`` merged, may bound
    both), or another operator as printed (``@=``)."""
    sides: dict[str, set[str]] = {}
    for operator, operand in _OPERAND.findall(condition):
        for field, value in decode(bytes.fromhex(operand)).items():
            side = sides.setdefault(field, set())
            if operator == "@<>":  # {"min": ..., "max": ..., "minInclusive": ..., "maxInclusive": ...}
                side |= {"low"} if not isinstance(value.get("min", MinKey()), MinKey) else set()
                side |= {"high"} if not isinstance(value.get("max", MaxKey()), MaxKey) else set()
            elif operator in ("@>", "@>="):
                side.add("low")
            elif operator in ("@<", "@<="):
                side.add("high")
            else:
                side.add(operator)
    return sides


def _mongod_plan(plan: Mapping[str, Any]) -> Plan:
    planner = plan.get("queryPlanner") or plan["stages"][0]["$cursor"]["queryPlanner"]
    stages = list(_walk(planner["winningPlan"], "inputStage", "inputStages", "queryPlan"))
    return Plan(
        indexes=tuple(str(s.get("indexName", "_id_")) for s in stages if s.get("stage") in _MONGOD_INDEX_STAGES),
        full_scan=any(s.get("stage") == "COLLSCAN" for s in stages),
        sort=any(s.get("stage") == "SORT" for s in stages),
    )


_MONGOD_INDEX_STAGES = {"IXSCAN", "IDHACK", "EXPRESS_IXSCAN", "EXPRESS_CLUSTERED_IXSCAN", "DISTINCT_SCAN"}


def _walk(node: Any, *children: str) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        yield node
        for key in children:
            value = node.get(key)
            for child in value if isinstance(value, list) else [value]:
                yield from _walk(child, *children)


@dataclass
class Planner:
    """The store on the session's MongoDB server, and how to read that server's plans."""

    store: MongoSnapshotStore
    engine: str
    """``documentdb`` or ``mongod``."""
    keys: dict[str, dict[str, tuple[str, ...]]]
    """Per collection, each index's fields, by name."""

    async def plans(self, sent: list[Sent]) -> list[tuple[Sent, Plan]]:
        read = _documentdb_plan if self.engine == "documentdb" else _mongod_plan
        explained = []
        for one in sent:
            command = dict(one.command)
            if command.get("hint") is None:
                command.pop("hint", None)
            plan = await self.store.database.command("explain", command, verbosity="queryPlanner")
            explained.append((one, read(plan)))
        return explained

    async def index_keys(self, collection: str) -> dict[str, tuple[str, ...]]:
        if collection not in self.keys:
            indexes = await (await self.store.database[collection].list_indexes()).to_list()
            self.keys[collection] = {str(i["name"]): tuple(i["key"]) for i in indexes}
        return self.keys[collection]


@pytest.fixture
async def planner(mongodb_uri: str) -> AsyncIterator[Planner]:
    store = mongo_store(mongodb_uri)
    await store.open()
    try:
        build = await store.database.command("buildInfo")
        if "ferretdbVersion" in build:
            pytest.skip("FerretDB 1.24 plans every query as a full scan (bench/RESULTS.md)")
        engine = "documentdb" if "ferretdb" in build else "mongod"
        # a few runs of two agents, threads, resources and deadlines: the plans are the same at any
        # size (DocumentDB uses an index whenever one serves, documentdb.forceUseIndexIfAvailable)
        runs = []
        for i in range(60):
            call = tool_call(f"c{i}")
            call["expiresAt"] = T0 + timedelta(minutes=i)
            doc = snapshot(
                f"run-{i:03d}",
                agent_id=("refund-agent", "weather-agent")[i % 2],
                created=T0 + timedelta(seconds=i),
                thread=f"t{i % 4}",
                resource=f"r{i % 3}",
                calls=[call],
            )
            runs.append((doc, b"[]"))
        await store.insert_many(runs)
        yield Planner(store, engine, {})
    finally:
        await store.drop_all()
        await store.close()


HOLDING_NONE = {name for name, f in FILTERS.items() if f.thread_id == "t1"}
"""The filters no run of ``refund-agent`` matches (its runs are the even ones: threads t0 and t2)."""


def _window(one: Sent) -> str | None:
    """The operator of the ``createdAt`` window a listing read applies (``$gte``, ``$lte``), or
    ``None``; ``skip`` for the read that checks that nothing follows a short page (``read_page``)."""
    if "skip" in one.command:
        return "skip"
    windows = [c["createdAt"] for c in one.command["filter"].get("$and", []) if set(c) == {"createdAt"}]
    assert len(windows) <= 1, one
    return next(iter(windows[0])) if windows else None


def _expected_windows(engine: str, name: str) -> list[str | None]:
    """The reads of the first page, the page after it and the page from the end before it.

    A filter holding no run: one read each without a window (nothing learnt). mongod: one read
    each without a window, and the page from the end before that cursor has 2 runs (the first
    page's newer two), less than a page: the read checking that nothing follows it (``skip``).
    DocumentDB: the first page reads without a window (none remembered) and learns the span of
    its 3 runs; the page after it holds 3 runs in a window of twice that span from its cursor
    (the runs are evenly spread); the page from the end has 2 runs, so each of its
    ``WINDOWED_TRIES`` windows holds less than a page and a read without a window follows, then
    its check."""
    if name in HOLDING_NONE:
        return [None, None, None]
    if engine != "documentdb":
        return [None, None, None, "skip"]
    return [None, "$gte", *["$lte"] * WINDOWED_TRIES, None, "skip"]


QUEUE_COUNTED = {
    "every run": QueueFilter(),
    "agent": QueueFilter(agent_ids=frozenset({"refund-agent"})),
    "thread": QueueFilter(thread_id="t1"),
    "resources": QueueFilter(resource_ids=frozenset({"r1", "r2"})),
    "agents thread resource": QueueFilter(agent_ids=frozenset({"refund-agent"}), thread_id="t1", resource_id="r1"),
}
"""Queue filters without dates, whose totals read kept counts."""


@pytest.mark.parametrize("name", list(FILTERS))
async def test_every_listing_filter_uses_an_index_holding_its_equality_fields(planner: Planner, name: str) -> None:
    # when the store reads a first page, a cursor page, a page from the end, and the count
    run_filter = FILTERS[name]
    store = planner.store
    with SENT.recording() as sent:
        first = await store.list_runs("refund-agent", run_filter, RunPage(limit=3))
        bound = sort_key(first[-1]) if first else sort_key(snapshot("run-000"))
        await store.list_runs("refund-agent", run_filter, RunPage(limit=3, after=bound))
        await store.list_runs("refund-agent", run_filter, RunPage(limit=3, before=bound, from_end=True))
        await store.count_runs("refund-agent", run_filter)
    listings = [
        one for one in sent if one.collection == "run_snapshots" and one.command.get("hint") != "counts_pending"
    ]
    # each page reads as storage/mongo/windows.py does for this data (a new store: no window known);
    # a total without dates reads kept counts
    pages = [one for one in listings if one.name == "find"]
    assert len(first) == (0 if name in HOLDING_NONE else 3), first
    assert [_window(one) for one in pages] == _expected_windows(planner.engine, name), sent
    assert len(listings) - len(pages) == (0 if name in UNDATED else 1), sent

    # then each plan scans an index that holds every field the filter names by equality, or, with
    # expiresBefore, the agent's deadlines (agent_expiring); never the whole collection
    equal = {"agentId"}
    equal |= {"threadId"} if run_filter.thread_id is not None else set()
    equal |= {"resourceId"} if run_filter.resource_id is not None else set()
    serving = [equal, *([{"agentId", "expiresAt"}] if run_filter.expires_before is not None else [])]
    keys = await planner.index_keys("run_snapshots")
    for one, plan in await planner.plans(listings):
        assert not plan.full_scan, (one, plan)
        assert plan.indexes, (one, plan)
        assert any(fields <= set(keys[index]) for index in plan.indexes for fields in serving), (one, plan, keys)

    # and a page (not the count) sorts in a step of its own on DocumentDB; on mongod it walks the
    # listing index in order (with expiresBefore, a range on another field, it may sort)
    plans = [plan for one, plan in await planner.plans(pages)]
    if planner.engine == "documentdb":
        assert all(plan.sort for plan in plans), plans
    elif run_filter.expires_before is None:
        assert not any(plan.sort for plan in plans), plans


@pytest.mark.parametrize("name", UNDATED)
async def test_a_total_without_dates_reads_kept_counts_by_key(planner: Planner, name: str) -> None:
    # when the store counts the runs of a filter without dates
    with SENT.recording() as sent:
        total = await planner.store.count_runs("refund-agent", FILTERS[name])

    # then it reads kept counts by their key, and of the runs and events only those whose count
    # is being written (`counts_pending`, `events_counts_pending`), and the total is the runs listed
    assert {one.collection for one in sent} == {"run_counts", "run_snapshots", "run_events"}, sent
    indexes = {"run_counts": ("_id_",), "run_snapshots": ("counts_pending",), "run_events": ("events_counts_pending",)}
    for one, plan in await planner.plans(sent):
        assert plan.indexes == indexes[one.collection], (one, plan)
    assert total == len(await planner.store.list_runs("refund-agent", FILTERS[name]))


@pytest.mark.parametrize("name", list(QUEUE_COUNTED))
async def test_a_queue_total_without_dates_reads_kept_counts(planner: Planner, name: str) -> None:
    # given a decision whose move in the run's questions is not written yet
    store = planner.store
    waiting = await store.list_review_runs(QueueFilter(), limit=1)
    call = waiting[0]["toolCalls"][0]
    decided = DecisionWrite(
        agent_id=waiting[0]["agentId"],
        run_id=waiting[0]["_id"],
        index=0,
        tool_call_id=call["toolCallId"],
        question_id=call.get("questionId"),
        decision=decision(),
        now=T0,
    )
    assert await store.record_decision(decided) is not None

    # when the store counts the queue's questions of a filter without dates
    with SENT.recording() as sent:
        await store.count_review_questions(QUEUE_COUNTED[name])

    # then it reads the queue's counts by key (every agent's by scope), and of the runs and events
    # only those whose moves are being written (`questions_pending`, `events_counts_pending`)
    indexes = {
        "run_counts": {("_id_",), ("queue_scope",)},
        "run_snapshots": {("questions_pending",)},
        "run_events": {("events_counts_pending",)},
    }
    assert {one.collection for one in sent} == set(indexes), sent
    for one, plan in await planner.plans(sent):
        assert plan.indexes in indexes[one.collection], (one, plan)
        assert not plan.full_scan, (one, plan)


@pytest.mark.parametrize("name", ["agent", "thread", "resource", "thread+resource", "restricted"])
async def test_a_documentdb_page_of_many_runs_reads_a_window_of_its_listing_index(planner: Planner, name: str) -> None:
    if planner.engine != "documentdb":
        pytest.skip("mongod walks the listing index in listing order: no window needed")
    # given 600 more runs of one agent, thread and resource, a minute apart
    many = [
        (snapshot(f"many-{i:03d}", created=T0 + timedelta(minutes=i), thread="t1", resource="r1"), b"[]")
        for i in range(600)
    ]
    await planner.store.insert_many(many)

    # and the filter's pages read once (the store learns where its runs are: storage/mongo/windows.py)
    run_filter = FILTERS[name]
    first = await planner.store.list_runs("refund-agent", run_filter, RunPage(limit=20))
    await planner.store.list_runs("refund-agent", run_filter, RunPage(limit=20, after=sort_key(first[-1])))

    # when the store reads a first page of the filter and the page after it
    with SENT.recording() as sent:
        first = await planner.store.list_runs("refund-agent", run_filter, RunPage(limit=20))
        await planner.store.list_runs("refund-agent", run_filter, RunPage(limit=20, after=sort_key(first[-1])))
    pages = [one for one in sent if one.collection == "run_snapshots" and one.command.get("sort")]

    # then each page's index scan reads only a window of createdAt (a lower bound in its condition),
    # through a listing index that holds the filter's fields by equality, then createdAt
    assert pages, sent
    keys = await planner.index_keys("run_snapshots")
    for one, plan in await planner.plans(pages):
        assert any("low" in _bounds(condition).get("createdAt", set()) for condition in plan.conditions), (one, plan)
        assert all(keys[index][-2:] == ("createdAt", "_id") for index in plan.indexes), (one, plan, keys)


API_PAGE = """
query Page($filter: SuspendedRunFilter, $after: String) {
  suspendedRuns(agentId: "refund-agent", filter: $filter, first: 20, after: $after) {
    totalCount
    edges { cursor node { runId } }
    pageInfo { hasNextPage hasPreviousPage endCursor }
  }
}
"""


@pytest.mark.parametrize(
    ("name", "variables"),
    [("agent", None), ("thread", {"threadId": "t1"}), ("resource", {"resourceId": "r1"})],
)
async def test_a_documentdb_page_after_a_cursor_reads_a_window_bounded_on_both_sides(
    planner: Planner, name: str, variables: dict[str, str] | None
) -> None:
    if planner.engine != "documentdb":
        pytest.skip("mongod walks the listing index in listing order: no window needed")
    # given 600 more runs of one agent, thread and resource, a minute apart, and the API (the
    # resolver asks the store for the page and whether a run lies before it: hasPreviousPage)
    many = [
        (snapshot(f"many-{i:03d}", created=T0 + timedelta(minutes=i), thread="t1", resource="r1"), b"[]")
        for i in range(600)
    ]
    await planner.store.insert_many(many)
    agents = AgentRegistry({"refund-agent": refund_agent})
    context = Context(store=planner.store, runs=RunManager(planner.store, agents, instance_id="i1"), agents=agents)

    async def api_page(after: str | None) -> dict[str, Any]:
        answer = await schema.execute(
            API_PAGE, variable_values={"filter": variables, "after": after}, context_value=context
        )
        assert answer.errors is None, answer.errors
        assert answer.data is not None
        return dict(answer.data["suspendedRuns"])

    # and the filter's first page and the page after it read once (the store learns its windows)
    first = await api_page(None)
    await api_page(first["pageInfo"]["endCursor"])

    # when the API reads the page after the first page's cursor again
    with SENT.recording() as sent:
        second = await api_page(first["pageInfo"]["endCursor"])
    assert second["pageInfo"]["hasPreviousPage"], second
    assert len(second["edges"]) == 20, second
    pages = [
        one for one in sent if one.collection == "run_snapshots" and one.name == "find" and one.command.get("sort")
    ]

    # then it reads two windows of createdAt, each from a cursor: the page towards older runs, and
    # the run just before the page towards newer ones (not from the newest run)
    assert [_window(one) for one in pages] == ["$gte", "$lte"], sent
    # and each index scan of each read bounds createdAt on both sides and names no _id: a range of
    # `_id` after a cursor is a scan of every run on one side of a random id (O(runs))
    for one, plan in await planner.plans(pages):
        assert plan.conditions, (one, plan)
        for condition in plan.conditions:
            bounds = _bounds(condition)
            assert {"low", "high"} <= bounds.get("createdAt", set()), (one, condition, bounds)
            assert "_id" not in bounds, (one, condition, bounds)


QUEUE_FILTERS = {
    "every run": QueueFilter(),
    "agents": QueueFilter(agent_ids=frozenset({"refund-agent", "weather-agent"})),
    "resource": QueueFilter(resource_id="r1"),
}


@pytest.mark.parametrize("name", list(QUEUE_FILTERS))
async def test_a_documentdb_queue_page_reads_a_window_of_its_order(planner: Planner, name: str) -> None:
    if planner.engine != "documentdb":
        pytest.skip("mongod walks review_queue in queue order: no window needed")
    # given 600 more waiting runs with a deadline and 600 without, a minute apart
    many = []
    for i in range(600):
        call = tool_call("c1")
        call["expiresAt"] = T0 + timedelta(minutes=60 + i)  # after the deadlines of the planner's runs
        for run_id, calls in ((f"dated-{i:03d}", [call]), (f"undated-{i:03d}", [tool_call("c1")])):
            doc = snapshot(run_id, created=T0 + timedelta(minutes=i), calls=calls)
            many.append((doc, b"[]"))
    await planner.store.insert_many(many)
    queue_filter = QUEUE_FILTERS[name]
    every = await planner.store.list_review_runs(queue_filter, limit=10_000)
    undated = next(i for i, doc in enumerate(every) if "expiresAt" not in doc)

    # the first page, the page after it, a page from the last dated runs into the undated ones, and
    # a page among the undated ones
    afters = (None, queue_key(every[19]), queue_key(every[undated - 5]), queue_key(every[undated + 100]))

    async def pages() -> list[list[str]]:
        read = []
        for after in afters:
            docs = await planner.store.list_review_runs(queue_filter, limit=20, after=after)
            read.append([doc["_id"] for doc in docs])
        return read

    def expected(after: QueueKey | None) -> list[str]:
        start = 0 if after is None else next(i for i, doc in enumerate(every) if queue_key(doc) == after) + 1
        return [doc["_id"] for doc in every[start : start + 20]]

    # and the pages read once (the store learns where the queue's runs are)
    await pages()

    # when the store reads them again, each in queue order
    with SENT.recording() as sent:
        read = await pages()
    assert read == [expected(after) for after in afters]
    finds = [one for one in sent if one.collection == "run_snapshots" and one.command.get("sort")]

    # then each read is a window of one range of queueAt (the runs with a deadline, then those
    # without one): the third page's cursor lies among the last dated runs, which hold less than a
    # page, so after its windows it reads one from the first run without a deadline (Windows'
    # split), never the rest of the queue without a window
    def windowed(one: Sent) -> bool:
        return any(set(c) == {"queueAt"} for c in one.command["filter"].get("$and", []))

    assert all(windowed(one) for one in finds), finds
    assert all("expiresAt" not in one.command["filter"] for one in finds), finds
    # and each read's index scan bounds queueAt on both sides, and names no _id (a range of random
    # ids scans every run on one side of the cursor's)
    for one, plan in await planner.plans(finds):
        bounds = [_bounds(condition) for condition in plan.conditions]
        assert any({"low", "high"} <= found.get("queueAt", set()) for found in bounds), (one, plan)
        assert not any("_id" in found for found in bounds), (one, plan)
        # a window through the queue's index alone, never beside `stalled`'s every waiting run
        assert plan.indexes == (REVIEW_QUEUE_INDEX,), (one, plan)


QUEUE_NARROWED = {
    "agent": QueueFilter(agent_ids=frozenset({"weather-agent"})),
    "thread": QueueFilter(thread_id="t1"),
    "resource": QueueFilter(resource_id="r1"),
    "restricted": QueueFilter(resource_ids=frozenset({"r1", "r2"})),
    "thread+restricted": QueueFilter(thread_id="t1", resource_ids=frozenset({"r1"})),
}
"""Queue filters naming fields by equality, each matching a part of the runs."""


@pytest.mark.parametrize("name", list(QUEUE_NARROWED))
async def test_a_documentdb_queue_page_finds_its_filters_runs_in_the_queues_index(planner: Planner, name: str) -> None:
    if planner.engine != "documentdb":
        pytest.skip("mongod walks review_queue in queue order: no window needed")
    # given 1,200 more waiting runs of two agents, four threads and three resources, a minute
    # apart, half with a deadline
    many = []
    for i in range(1200):
        call = tool_call("c1")
        if i % 2:
            call["expiresAt"] = T0 + timedelta(minutes=60 + i)
        agent = ("refund-agent", "weather-agent")[i % 3 == 0]
        doc = snapshot(f"many-{i:04d}", agent_id=agent, created=T0 + timedelta(minutes=i), calls=[call])
        doc["threadId"], doc["resourceId"] = f"t{i % 4}", f"r{i % 3}"
        many.append((doc, b"[]"))
    await planner.store.insert_many(many)
    queue_filter = QUEUE_NARROWED[name]
    every = await planner.store.list_review_runs(queue_filter, limit=10_000)
    assert 60 < len(every) < 1000, len(every)  # a part of the 1,260 waiting runs

    async def pages() -> list[list[str]]:
        first = await planner.store.list_review_runs(queue_filter, limit=20)
        after = await planner.store.list_review_runs(queue_filter, limit=20, after=queue_key(first[-1]))
        return [[doc["_id"] for doc in docs] for docs in (first, after)]

    await pages()  # the store learns where the filter's runs are

    # when the store reads the filter's first page and the page after it again
    with SENT.recording() as sent:
        read = await pages()
    assert read == [[doc["_id"] for doc in every[:20]], [doc["_id"] for doc in every[20:40]]]
    finds = [one for one in sent if one.collection == "run_snapshots" and one.command.get("sort")]

    # then each read scans the queue's index with the filter's fields as its index conditions,
    # beside the window of queueAt: only the filter's runs are fetched, never every run of the window
    equal = {"agentId"} if queue_filter.agent_ids is not None else set()
    equal |= {"threadId"} if queue_filter.thread_id is not None else set()
    equal |= {"resourceId"} if (queue_filter.resource_id, queue_filter.resource_ids) != (None, None) else set()
    assert finds, sent
    for one, plan in await planner.plans(finds):
        named = set().union(*(_bounds(condition) for condition in plan.conditions))
        assert {"queueAt", *equal} <= named, (one, plan)
        assert plan.indexes == (REVIEW_QUEUE_INDEX,), (one, plan)


async def test_the_deadline_read_uses_a_deadline_index(planner: Planner) -> None:
    with SENT.recording() as sent:
        await planner.store.list_expired_runs(now=T0 + timedelta(minutes=10), limit=50)

    # the page (10 runs, short of its 50) and the read checking that nothing follows it (`read_page`)
    plans = await planner.plans(sent)
    assert ["skip" in one.command for one, _ in plans] == [False, True], sent
    keys = await planner.index_keys("run_snapshots")
    for _, plan in plans:
        assert not plan.full_scan, plan
        assert plan.indexes, plan
        assert all("expiresAt" in keys[index] for index in plan.indexes), (plan, keys)
        # mongod walks `expiring` in deadline order; DocumentDB finds the runs past their deadline
        # through an index holding expiresAt (`expiring` or `agent_expiring`), then sorts them
        if planner.engine == "mongod":
            assert plan.indexes == ("expiring",), plan
        assert plan.sort == (planner.engine == "documentdb"), plan


async def test_the_sweepers_reads_use_indexes(planner: Planner) -> None:
    later = T0 + timedelta(hours=1)
    with SENT.recording() as sent:
        await planner.store.list_stalled_runs(now=later, idle_before=later, limit=50)
        await planner.store.complete_pending_events(before=later, limit=50)
        await planner.store.list_expired_runs(now=later, limit=50)
        await planner.store.claim_webhook_deliveries(DeliveryLease(by="i1", until=later, now=later, limit=10))
        await planner.store.list_events_after(EventsAfter(agent_id="refund-agent", after_event_id=None, limit=100))
        await planner.store.list_events_after(EventsAfter(agent_id=None, after_event_id="0", limit=100))
        await planner.store.list_events_of_runs("refund-agent", ["run-000", "run-002"])

    expected = {
        "run_snapshots": {
            "pendingCount",
            "pendingEvents.at",
            "countsPending.since",
            "questionsPending.since",
            "expiresAt",
        },
        "run_counts": {"pendingSince"},
        "webhook_deliveries": {"status"},
        "run_events": {"agentId", "countsPending.at", "_id"},  # _id: every agent's walk (reviewQueueEvents)
    }
    explained = await planner.plans(sent)
    assert {one.collection for one, _ in explained} == set(expected), sent
    for one, plan in explained:
        keys = await planner.index_keys(one.collection)
        assert not plan.full_scan, (one, plan)
        assert plan.indexes, (one, plan)
        assert all(set(keys[index]) & expected[one.collection] for index in plan.indexes), (one, plan, keys)


def _names_a_key(condition: Mapping[str, Any]) -> bool:
    """Whether a condition names its document's ``_id`` (or a list of them)."""
    key = condition.get("_id")
    return isinstance(key, str) or (isinstance(key, Mapping) and set(key) == {"$in"})


async def test_every_write_by_key_finds_its_document_through_the_id_index(planner: Planner) -> None:
    # when the store makes each of its conditional writes (and the reads by key around them)
    with SENT.recording() as sent:
        await _every_conditional_write(planner.store)
    by_key = [one for one in sent if _names_a_key(one.command.get("filter", {}))]
    writes = [one for one in by_key if one.name in ("update", "delete", "findAndModify")]
    # (write leases only on FerretDB 1.x: docs/storage.md "Write leases")
    leases = {"run_write_locks"} if planner.store.write_leases else set()
    assert {one.collection for one in writes} >= {
        "run_snapshots",
        *leases,
        "idempotency_keys",
        "webhook_deliveries",
        "webhook_cursors",
        "run_histories",
    }, writes
    assert leases or "run_write_locks" not in {one.collection for one in sent}, sent
    assert all(_names_a_key(one.command["filter"]) for one in sent if one.name not in ("find", "aggregate")), sent

    # then every one of them (writes, and reads naming an _id) finds its document through `_id`
    for one, plan in await planner.plans(by_key):
        assert plan.indexes == ("_id_",), (one, plan)
        assert not plan.full_scan, (one, plan)


async def test_the_queue_totals_candidate_reads_use_their_indexes(planner: Planner) -> None:
    every = ReviewCandidates(
        approver="key:alice", starter="key:alice", unknown_starter=True, tool_names=frozenset({"ask_city"})
    )
    with SENT.recording() as sent:
        await planner.store.list_review_candidates(QueueFilter(), every, limit=50)

    explained = await planner.plans(sent)
    indexes = {"toolCalls.toolName": "review_tool", "toolCalls.approvals.decidedBy": "review_approver"}
    assert len(explained) == 4, sent
    for one, plan in explained:
        part = next(
            field
            for field in ("toolCalls.toolName", "toolCalls.approvals.decidedBy", "startedBy")
            if field in one.command["filter"]
        )
        # the part's own index alone: never beside `stalled`'s every waiting run
        assert plan.indexes == (indexes.get(part, "review_starter"),), (one, plan)
        assert not plan.full_scan, (one, plan)
