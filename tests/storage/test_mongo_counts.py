"""The MongoDB store's kept counts (``storage/mongo/counts.py``) on both MongoDB test servers.

A hypothesis state machine writes one database through two stores at once: inserts (one, a bulk;
1 to 3 calls, some sub-runs), decisions that leave a run suspended, claims, new suspensions,
releases, finishes (decide, claim, delete), a process that dies once a run's insert, decision or
completion is recorded (the store's ``before_event`` hook raising, so its events, count entries
and deletion never come), and the sweeper's pass (``complete_pending_events``). After every step
each listing total without dates equals the runs listed and each queue total without dates the
pending calls of the waiting runs read in full, crashes included (a total corrects for the runs
whose entries are missing); after a sweeper's pass past the grace period no entry or marker is
left and the totals are the counts alone.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from pymongo import monitoring

from runtime.events.journal import event_id
from storage import EventDocument, MongoSnapshotStore, QueueFilter, RunFilter
from storage._query import utcnow
from storage.mongo import schema
from storage.protocol import ClaimedDeletion, ClaimedReplacement, ClaimRelease, ClaimWrite, DecisionWrite
from tests._servers import mongo_store, with_database

from ._contract import T0, decision, snapshot, tool_call

pytestmark = pytest.mark.mongo

AGENTS = ("refund-agent", "weather-agent")
THREADS = (None, "t1", "t2")
RESOURCES = (None, "r1", "r2")

_key = st.tuples(
    st.sampled_from(AGENTS),
    st.sampled_from(THREADS),
    st.sampled_from(RESOURCES),
    st.integers(1, 3),  # calls
    st.booleans(),  # a sub-run
)
_op = st.one_of(
    st.tuples(st.just("insert"), _key),
    st.tuples(st.just("insert many"), st.lists(_key, min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["finish", "decide", "claim", "suspend again", "release"]), st.integers(0, 50)),
)

FILTERS = [RunFilter(thread_id=t, resource_id=r) for t in THREADS for r in RESOURCES] + [
    RunFilter(resource_ids=frozenset({"r1", "r2"})),
    RunFilter(thread_id="t2", resource_ids=frozenset({"r1"})),
]

QUEUE_FILTERS = [
    QueueFilter(),
    QueueFilter(agent_ids=frozenset({"weather-agent"})),
    QueueFilter(thread_id="t1"),
    QueueFilter(resource_id="r2"),
    QueueFilter(resource_ids=frozenset({"r1", "r2"})),
    QueueFilter(agent_ids=frozenset(AGENTS), thread_id="t2", resource_id="r1"),
    QueueFilter(thread_id="t1", resource_ids=frozenset({"r2"})),
    QueueFilter(resource_id="r1", resource_ids=frozenset({"r2"})),
    QueueFilter(agent_ids=frozenset()),
]
"""Queue filters of every shape a count without dates reads its counts for."""


class _Crash(BaseException):
    """The process dying between a run's recorded change and what follows it."""


class MongoCountsMachine(RuleBasedStateMachine):
    """One database on one server, two stores writing it."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        uri = with_database(SERVER[0])
        self.stores = [mongo_store(uri), mongo_store(uri)]
        for store in self.stores:
            self._run(store.open())
        self.ids: list[str] = []
        self.clock = T0

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _new(self, key: tuple[Any, ...]) -> dict[str, Any]:
        agent, thread, resource, calls, sub_run = key
        self.ids.append(run_id := uuid.uuid4().hex)
        self.clock += timedelta(milliseconds=1)
        tool_calls = [tool_call(f"c{n}") for n in range(calls)]
        run = dict(
            snapshot(run_id, agent_id=agent, thread=thread, resource=resource, created=self.clock, calls=tool_calls)
        )
        if sub_run:
            run["parentRunId"] = self.ids[0]
        return run

    def _event(self, run_id: str, agent: str, kind: str) -> EventDocument:
        return {"_id": event_id(), "runId": run_id, "agentId": agent, "type": kind, "at": T0, "by": "m", "data": {}}  # type: ignore[typeddict-item]

    async def _one(self, store: MongoSnapshotStore, op: tuple[Any, ...]) -> None:
        if op[0] == "insert":
            run = self._new(op[1])
            await store.insert(run, b"[]", event=self._event(run["_id"], run["agentId"], "suspended"))  # type: ignore[arg-type]
        elif op[0] == "insert many":
            await store.insert_many([(self._new(key), b"[]") for key in op[1]])  # type: ignore[misc]
        elif op[0] == "finish":
            await self._finish(store, op[1])
        else:
            await self._change(store, op[0], op[1])

    async def _stored(self, index: int) -> dict[str, Any] | None:
        if not self.ids:
            return None
        found = await self.stores[0].get_many([self.ids[index % len(self.ids)]])
        return dict(found[0]) if found else None

    async def _decide(self, store: MongoSnapshotStore, run: dict[str, Any], only_one: bool = False) -> None:
        for at, call in enumerate(run["toolCalls"]):
            if call.get("decision") is None:
                await store.record_decision(
                    DecisionWrite(
                        agent_id=run["agentId"],
                        run_id=run["_id"],
                        index=at,
                        tool_call_id=call["toolCallId"],
                        decision=decision(),
                        now=T0,
                    )
                )
                if only_one:
                    return

    async def _finish(self, store: MongoSnapshotStore, index: int) -> None:
        run = await self._stored(index)
        if run is None:
            return
        agent, run_id, by = run["agentId"], run["_id"], f"by-{uuid.uuid4().hex[:6]}"
        await self._decide(store, run)
        await store.claim(
            ClaimWrite(agent_id=agent, run_id=run_id, by=by, until=utcnow() + timedelta(minutes=5), now=utcnow())
        )
        await store.delete_claimed(
            ClaimedDeletion(agent_id=agent, run_id=run_id, by=by, event=self._event(run_id, agent, "completed"))
        )

    async def _change(self, store: MongoSnapshotStore, kind: str, index: int) -> None:
        """A write that keeps the run: one decision, a claim (its calls decided), a new suspension
        or a release of the claim (each by the claim's holder)."""
        run = await self._stored(index)
        if run is None:
            return
        agent, run_id, by = run["agentId"], run["_id"], (run.get("claim") or {}).get("by", "holder")
        if kind == "decide":
            await self._decide(store, run, only_one=True)
        elif kind == "claim":
            await self._decide(store, run)
            until = utcnow() + timedelta(minutes=5)
            await store.claim(ClaimWrite(agent_id=agent, run_id=run_id, by="holder", until=until, now=utcnow()))
        elif kind == "suspend again":
            calls = [tool_call(f"n{n}-{uuid.uuid4().hex[:4]}") for n in range(1 + len(run["toolCalls"]) % 3)]
            await store.replace_claimed(
                ClaimedReplacement(
                    agent_id=agent,
                    run_id=run_id,
                    by=by,
                    tool_calls=calls,
                    history=b"[]",
                    history_id=uuid.uuid4().hex,
                    now=utcnow(),
                )
            )
        else:
            error = {"message": "boom", "at": utcnow()}
            await store.release_claim(ClaimRelease(agent_id=agent, run_id=run_id, by=by, error=error, now=utcnow()))  # type: ignore[arg-type]

    async def _crashing(self, store: MongoSnapshotStore, write: Any) -> None:
        async def crash(events: object) -> None:
            store.before_event = None
            raise _Crash

        store.before_event = crash
        try:
            await write
        except _Crash:
            pass
        finally:
            store.before_event = None

    @rule(ops=st.lists(_op, min_size=1, max_size=4))
    def writes(self, ops: list[tuple[Any, ...]]) -> None:
        async def all_at_once() -> None:
            await asyncio.gather(
                *(self._one(self.stores[n % 2], op) for n, op in enumerate(ops)), return_exceptions=True
            )

        self._run(all_at_once())

    @rule(key=_key)
    def insert_then_die(self, key: tuple[Any, ...]) -> None:
        run = self._new(key)
        event = self._event(run["_id"], run["agentId"], "suspended")
        self._run(self._crashing(self.stores[1], self.stores[1].insert(run, b"[]", event=event)))  # type: ignore[arg-type]

    @rule(index=st.integers(0, 50))
    def finish_then_die(self, index: int) -> None:
        self._run(self._crashing(self.stores[1], self._finish(self.stores[1], index)))

    @rule(index=st.integers(0, 50))
    def decide_then_die(self, index: int) -> None:
        async def one_decision() -> None:
            run = await self._stored(index)
            if run is not None:
                await self._decide(self.stores[1], run, only_one=True)

        self._run(self._crashing(self.stores[1], one_decision()))

    @rule()
    def sweep(self) -> None:
        later = utcnow() + timedelta(days=1)  # past every grace period: every leftover is recovered
        self._run(self.stores[0].complete_pending_events(before=later, limit=1000))
        counts = self._run(self.stores[0].database["run_counts"].find({}).to_list())
        assert all(not doc.get("pending") for doc in counts), counts
        assert all("pendingSince" not in doc for doc in counts), counts
        marked = self._run(self.stores[0].database[schema.RUNS].find({"questionsPending": {"$exists": True}}).to_list())
        assert marked == [], marked

    @invariant()
    def every_total_is_the_runs_listed(self) -> None:
        for agent in AGENTS:
            for run_filter in FILTERS:
                listed = self._run(self.stores[0].list_runs(agent, run_filter))
                for store in self.stores:
                    assert self._run(store.count_runs(agent, run_filter)) == len(listed), (agent, run_filter)

    @invariant()
    def every_queue_total_is_the_pending_calls_of_the_waiting_runs(self) -> None:
        waiting = self._run(self.stores[0].database[schema.RUNS].find(schema.WAITING).to_list())
        for queue_filter in QUEUE_FILTERS:
            truth = sum(
                run["pendingCount"]
                for run in waiting
                if queue_filter.admits(run["agentId"], run.get("threadId"), run.get("resourceId"))
            )
            for store in self.stores:
                assert self._run(store.count_review_questions(queue_filter)) == truth, queue_filter

    def teardown(self) -> None:
        self._run(self.stores[0].drop_all())
        for store in self.stores:
            self._run(store.close())
        self.loop.close()


SERVER: list[str] = []

MongoCountsMachine.TestCase.settings = settings(
    max_examples=10,
    stateful_step_count=8,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.parametrize("server", ["mongodb_server", "ferretdb1_server"])
def test_kept_counts_equal_the_runs_listed_through_crashes_and_recovery(
    request: pytest.FixtureRequest, server: str
) -> None:
    SERVER[:] = [request.getfixturevalue(server)]
    MongoCountsMachine.TestCase().runTest()


@pytest.mark.parametrize("server", ["mongodb_server", "ferretdb1_server"])
async def test_the_first_runs_of_new_counts_written_at_once_are_all_counted(
    request: pytest.FixtureRequest, server: str
) -> None:
    for _ in range(4):  # the race needs a few tries to show
        await _first_runs_at_once(with_database(request.getfixturevalue(server)))


async def _first_runs_at_once(uri: str) -> None:
    # given two stores on a fresh database (no count exists yet)
    stores = [mongo_store(uri), mongo_store(uri)]
    for store in stores:
        await store.open()
    try:
        # when 16 runs of new threads and resources are inserted at once through both
        async def one(number: int) -> None:
            run = snapshot(f"run-{number}", thread=("t1", "t2", None)[number % 3], resource=("r1", None)[number % 2])
            await stores[number % 2].insert(run, b"[]")

        await asyncio.gather(*(one(n) for n in range(16)))

        # then every total is the runs listed (concurrent upserts of one new count on DocumentDB
        # replaced each other, with the entries written before: counts are made by inserts)
        for run_filter in FILTERS:
            listed = await stores[0].list_runs("refund-agent", run_filter)
            assert await stores[1].count_runs("refund-agent", run_filter) == len(listed), run_filter
    finally:
        await stores[0].drop_all()
        for store in stores:
            await store.close()


@pytest.mark.parametrize("server", ["mongodb_server", "ferretdb1_server"])
def test_a_run_finished_with_an_older_event_pending_is_no_longer_listed(
    request: pytest.FixtureRequest, server: str
) -> None:
    SERVER[:] = [request.getfixturevalue(server)]
    machine = MongoCountsMachine()
    try:
        # given a run whose insert died after it was stored (its ``suspended`` event left pending)
        machine.insert_then_die(("refund-agent", None, None, 1, False))
        run_id = machine.ids[0]

        # when its finish dies once its ``completed`` event is recorded after that one
        machine.finish_then_die(0)
        stored = machine._run(machine.stores[0].database[schema.RUNS].find_one({"_id": run_id}))
        assert [event["type"] for event in stored["pendingEvents"]] == ["suspended", "completed"]

        # then it is finished: not read, not listed, not counted (FerretDB 1.24 matched
        # ``pendingEvents.type: {$ne: "completed"}`` on such a run, so it was listed with a total of 0)
        for store in machine.stores:
            assert machine._run(store.get("refund-agent", run_id)) is None
            assert machine._run(store.list_runs("refund-agent", RunFilter())) == []
            assert machine._run(store.count_runs("refund-agent", RunFilter())) == 0
    finally:
        machine.teardown()


@pytest.mark.parametrize("server", ["mongodb_server", "ferretdb1_server"])
def test_a_run_whose_completion_is_marked_in_its_snapshot_and_its_event_is_subtracted_once(
    request: pytest.FixtureRequest, server: str
) -> None:
    SERVER[:] = [request.getfixturevalue(server)]
    machine = MongoCountsMachine()
    store = machine.stores[1]
    seen: list[dict[str, int]] = []

    async def appended_then_counted(events: Any) -> None:
        if not any(event.get("type") == "completed" for event in events):
            return
        # the completion's event appended (marked), its snapshot not yet deleted (marked too)
        await store._append_each(events)
        run = await store.database[schema.RUNS].find_one({"_id": machine.ids[0]})
        assert run is not None
        assert run["countsPending"].get("removed") is not None, run
        event = await store.database[schema.EVENTS].find_one({"runId": machine.ids[0], "type": "completed"})
        assert event is not None
        assert event["countsPending"]["at"] is not None, event
        seen.append({repr(f): await store.count_runs("refund-agent", f) for f in FILTERS})

    try:
        # given two runs of one thread and resource, their counts written
        for _ in range(2):
            machine._run(machine._one(machine.stores[0], ("insert", ("refund-agent", "t1", "r1", 1, False))))

        # when the first is finished, and counted while both its snapshot and its `completed`
        # event say its `d` entries may be missing
        store.before_event = appended_then_counted
        machine._run(machine._finish(store, 0))
        store.before_event = None

        # then it is subtracted once: one run is left in every total that counted both
        expected = {repr(f): len(machine._run(machine.stores[0].list_runs("refund-agent", f))) for f in FILTERS}
        assert set(expected.values()) == {0, 1}, expected
        assert seen == [expected]
        for one in machine.stores:
            assert {repr(f): machine._run(one.count_runs("refund-agent", f)) for f in FILTERS} == expected
    finally:
        machine.teardown()


class Reads(monitoring.CommandListener):
    """The commands sent while ``recording()`` runs: (name, collection, filter, hint)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any, Any]] = []
        self._on = False

    @contextmanager
    def recording(self) -> Iterator[list[tuple[str, str, Any, Any]]]:
        self.sent = []
        self._on = True
        try:
            yield self.sent
        finally:
            self._on = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self._on:
            command = event.command
            name = event.command_name
            self.sent.append((name, command.get(name), command.get("filter"), command.get("hint")))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


READS = Reads()
monitoring.register(READS)


@pytest.mark.parametrize("server", ["mongodb_server", "ferretdb1_server"])
async def test_a_queue_total_reads_its_kept_counts_and_marked_runs_only(
    request: pytest.FixtureRequest, server: str
) -> None:
    store = mongo_store(with_database(request.getfixturevalue(server)))
    await store.open()
    try:
        # given waiting runs of every agent, thread and resource, one decided, the sweeper past
        runs = [
            snapshot(f"run-{n}", agent_id=AGENTS[n % 2], thread=THREADS[n % 3], resource=RESOURCES[n // 3 % 3])
            for n in range(18)
        ]
        for run in runs:
            await store.insert(run, b"[]")
        decided = DecisionWrite(
            agent_id=AGENTS[0], run_id="run-0", index=0, tool_call_id="c1", decision=decision(), now=T0
        )
        assert await store.record_decision(decided) is not None
        await store.complete_pending_events(before=utcnow() + timedelta(days=1), limit=1000)

        for queue_filter in QUEUE_FILTERS:
            # when the queue's total is counted
            with READS.recording() as sent:
                await store.count_review_questions(queue_filter)

            # then it reads the counts of its keys, and the runs and completions whose entries may
            # be missing through the sparse indexes of their markers: never an aggregation of the
            # runs, whose cost grows with them (issue 45 "Cost")
            assert {name for name, *_ in sent} <= {"find"}, sent  # none at all for no agent
            for _, collection, query, hint in sent:
                if collection == "run_counts":
                    assert set(query) <= {"_id", "scope"}, query
                else:
                    assert (collection, hint) in {
                        ("run_snapshots", "questions_pending"),
                        ("run_events", "events_counts_pending"),
                    }, (collection, query, hint)
    finally:
        await store.drop_all()
        await store.close()


@pytest.mark.parametrize("server", ["mongodb_server", "ferretdb1_server"])
async def test_a_queue_page_holds_none_of_the_stores_own_fields(request: pytest.FixtureRequest, server: str) -> None:
    store = mongo_store(with_database(request.getfixturevalue(server)))
    await store.open()
    try:
        # given a run of two calls, one decided: its questions' move waits for the sweeper
        await store.insert(snapshot("run-1", calls=[tool_call("c1"), tool_call("c2")]), b"[]")
        decided = DecisionWrite(
            agent_id="refund-agent", run_id="run-1", index=0, tool_call_id="c1", decision=decision(), now=T0
        )
        assert await store.record_decision(decided) is not None

        # when the queue's page is read, then its run is the snapshot as `get` reads it
        (listed,) = await store.list_review_runs(QueueFilter(), limit=20)
        assert listed == await store.get("refund-agent", "run-1")
        assert not {"questionsPending", "countsPending", "pendingEvents"} & set(listed), listed
    finally:
        await store.drop_all()
        await store.close()


@pytest.mark.parametrize(
    "server",
    [
        "mongodb_server",
        "ferretdb1_server",
    ],
)
async def test_runs_of_a_hundred_and_more_new_threads_at_once_are_counted(
    request: pytest.FixtureRequest, server: str
) -> None:
    # given 120 runs of one agent, each in a thread of its own: one count each, written together
    store = mongo_store(with_database(request.getfixturevalue(server)), socket_timeout=20.0)
    await store.open()
    try:
        runs = [snapshot(f"run-{n}", thread=f"thread-{n}", resource=f"r{n % 3}") for n in range(120)]
        await store.insert_many([(run, b"[]") for run in runs])

        # then every count is written (FerretDB 1.24 never answered one update command of 100
        # operations or more: the store's write failed after its socket timeout), and the sweeper
        # folds them into the totals
        await store.complete_pending_events(before=utcnow() + timedelta(days=1), limit=1000)
        assert await store.count_runs("refund-agent", RunFilter()) == 120
        assert await store.count_runs("refund-agent", RunFilter(thread_id="thread-7")) == 1
        assert await store.count_runs("refund-agent", RunFilter(resource_id="r1")) == 40
    finally:
        await store.drop_all()
        await store.close()
