"""The queue's kept counts (``count_review_questions``) equal its runs' pending calls after any
interleaving of writes, on the memory store and on a real SQLite file.

A hypothesis state machine starts runs (one by one and in batches; 1 to 3 calls, some sub-runs,
some with deadlines), decides calls, claims decided runs, takes lapsed claims over, suspends them
again with new calls, releases and finishes them, and on SQLite also writes through a plain
``sqlite3`` connection (code that knows nothing of the counts). After every step each filter's
count equals the pending calls of the matching runs read through the queue's own listing, and on
SQLite ``review_counts`` equals the counts recomputed from ``run_snapshots``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from storage import MemorySnapshotStore, QueueFilter, SnapshotStore, SQLiteSnapshotStore
from storage.protocol import ClaimedDeletion, ClaimedReplacement, ClaimRelease, ClaimWrite, DecisionWrite
from storage.sqlite.rows import _INSERT_RUN, _run_row

from ._contract import T0, decision, snapshot, tool_call

AGENTS = ("refund-agent", "weather-agent")
THREADS = (None, "t1", "t2")
RESOURCES = (None, "r1", "r2")
CLAIM = timedelta(seconds=30)

_start = st.tuples(
    st.sampled_from(AGENTS),
    st.sampled_from(THREADS),
    st.sampled_from(RESOURCES),
    st.integers(1, 3),
    st.booleans(),  # a sub-run
    st.booleans(),  # with deadlines
)
"""A new run: (agent, thread, resource, calls, sub-run, deadlines)."""

_op = st.one_of(
    st.tuples(st.just("start"), _start),
    st.tuples(st.just("start many"), st.lists(_start, min_size=1, max_size=4)),
    st.tuples(st.just("decide"), st.integers(0, 50), st.integers(0, 2)),
    st.tuples(st.sampled_from(["claim", "take over", "suspend again", "release", "finish"]), st.integers(0, 50)),
)
"""One write; an integer picks one of the runs started so far (it may be gone by then)."""

_raw_op = st.tuples(
    st.sampled_from(["raw insert", "raw delete", "raw status", "raw parent", "raw move", "raw pending"]),
    _start,
    st.integers(0, 50),
)
"""One write through a plain ``sqlite3`` connection (SQLite only)."""


def _filters() -> list[QueueFilter]:
    """Filters a count reads the kept counts for, over the keys above."""
    found = [QueueFilter(thread_id=t, resource_id=r) for t in THREADS for r in RESOURCES]
    found += [QueueFilter(agent_ids=frozenset({agent})) for agent in AGENTS]
    found += [QueueFilter(agent_ids=frozenset(AGENTS), thread_id="t1"), QueueFilter(agent_ids=frozenset())]
    found += [QueueFilter(resource_ids=frozenset(allowed)) for allowed in ({"r1"}, {"r1", "r2"}, set())]
    found += [QueueFilter(agent_ids=frozenset({"weather-agent"}), thread_id="t2", resource_ids=frozenset({"r2"}))]
    found += [QueueFilter(resource_id="r1", resource_ids=frozenset({"r2"}))]
    return found


def _matches(f: QueueFilter, doc: dict[str, Any]) -> bool:
    return (
        doc["parentRunId"] is None
        and (f.agent_ids is None or doc["agentId"] in f.agent_ids)
        and (f.thread_id is None or doc["threadId"] == f.thread_id)
        and (f.resource_id is None or doc["resourceId"] == f.resource_id)
        and (f.resource_ids is None or doc["resourceId"] in f.resource_ids)
    )


class QueueCountsMachine(RuleBasedStateMachine):
    """One store (``KIND``) written by the runtime's write paths, and on SQLite by a plain connection."""

    KIND = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.path = Path(DIRECTORY[0]) / f"queue-{uuid.uuid4().hex}.db"
        self.store: SnapshotStore = MemorySnapshotStore() if self.KIND == "memory" else SQLiteSnapshotStore(self.path)
        self._run(self.store.open())
        self.ids: list[str] = []
        self.clock = T0

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _pick(self, index: int) -> str | None:
        return self.ids[index % len(self.ids)] if self.ids else None

    def _new(self, start: tuple[Any, ...]) -> dict[str, Any]:
        agent, thread, resource, calls, sub_run, deadlines = start
        run_id = uuid.uuid4().hex
        self.ids.append(run_id)
        self.clock += timedelta(milliseconds=1)
        tool_calls = [tool_call(f"c{index}") for index in range(calls)]
        if deadlines:
            for index, call in enumerate(tool_calls):
                call["expiresAt"] = self.clock + timedelta(minutes=10 * (index + 1))
        doc = dict(snapshot(run_id, agent_id=agent, thread=thread, resource=resource, created=self.clock))
        doc["toolCalls"] = tool_calls
        doc["pendingCount"] = calls
        if deadlines:
            doc["expiresAt"] = tool_calls[0]["expiresAt"]
        if sub_run:
            doc["parentRunId"] = self.ids[0]
        return doc

    async def _one(self, op: tuple[Any, ...]) -> None:
        kind, store = op[0], self.store
        if kind == "start":
            await store.insert(self._new(op[1]), b"[]")  # type: ignore[arg-type]
        elif kind == "start many":
            await store.insert_many([(self._new(start), b"[]") for start in op[1]])  # type: ignore[misc]
        else:
            run_id = self._pick(op[1])
            docs = [] if run_id is None else await store.get_many([run_id])
            if docs:
                await self._on_stored(kind, docs[0], op[2] if len(op) > 2 else 0)

    async def _on_stored(self, kind: str, doc: dict[str, Any], index: int) -> None:
        store, agent, run_id, now = self.store, doc["agentId"], doc["_id"], self.clock
        calls = doc["toolCalls"]
        if kind in {"decide", "finish"}:
            for at in range(len(calls)) if kind == "finish" else [index % len(calls)]:
                await store.record_decision(
                    DecisionWrite(
                        agent_id=agent,
                        run_id=run_id,
                        index=at,
                        tool_call_id=calls[at]["toolCallId"],
                        decision=decision(),
                        now=now,
                    )
                )
        if kind in {"claim", "finish"}:
            await store.claim(ClaimWrite(agent_id=agent, run_id=run_id, by="i1", until=now + CLAIM, now=now))
        if kind == "finish":
            await store.delete_claimed(ClaimedDeletion(agent_id=agent, run_id=run_id, by="i1"))
        elif kind == "take over":  # the holder died: its lapsed claim is taken by another instance
            await store.claim(
                ClaimWrite(agent_id=agent, run_id=run_id, by="i2", until=now + 3 * CLAIM, now=now + 2 * CLAIM)
            )
        elif kind == "suspend again":
            await store.replace_claimed(
                ClaimedReplacement(
                    agent_id=agent,
                    run_id=run_id,
                    by=(doc.get("claim") or {}).get("by", "i1"),
                    tool_calls=[tool_call("n1"), tool_call("n2")],
                    history=b"[]",
                    history_id=uuid.uuid4().hex,
                    now=now,
                )
            )
        elif kind == "release":
            await store.release_claim(
                ClaimRelease(
                    agent_id=agent,
                    run_id=run_id,
                    by=(doc.get("claim") or {}).get("by", "i1"),
                    error={"message": "boom", "at": now},  # type: ignore[typeddict-item]
                    now=now,
                )
            )

    def _raw(self, op: tuple[Any, ...]) -> None:
        """A write by code that knows nothing of the counts: a plain connection's SQL."""
        kind, start, index = op
        with sqlite3.connect(self.path, timeout=30) as db:
            if kind == "raw insert":
                db.execute(_INSERT_RUN, _run_row(self._new(start)))  # type: ignore[arg-type]
                return
            run_id = self._pick(index)
            statement = {
                "raw delete": "DELETE FROM run_snapshots WHERE run_id = ?",
                "raw status": "UPDATE run_snapshots SET status = CASE status WHEN 'suspended' THEN 'resuming' "
                "ELSE 'suspended' END WHERE run_id = ?",
                "raw parent": "UPDATE run_snapshots SET parent_run_id = CASE WHEN parent_run_id IS NULL "
                "THEN 'someone' END WHERE run_id = ?",
                "raw move": "UPDATE run_snapshots SET agent_id = 'weather-agent', thread_id = 't2', "
                "resource_id = NULL WHERE run_id = ?",
                "raw pending": "UPDATE run_snapshots SET pending_count = pending_count + 1 WHERE run_id = ?",
            }[kind]
            if run_id is not None:
                db.execute(statement, (run_id,))

    @rule(ops=st.lists(_op, min_size=1, max_size=5))
    def writes(self, ops: list[tuple[Any, ...]]) -> None:
        """A batch of writes at once; failures (a lost race, a condition not met) write nothing."""

        async def all_at_once() -> None:
            await asyncio.gather(*(self._one(op) for op in ops), return_exceptions=True)

        self._run(all_at_once())
        self.clock += timedelta(seconds=1)

    @rule(op=_raw_op)
    def raw_write(self, op: tuple[Any, ...]) -> None:
        if self.KIND == "sqlite":
            self._raw(op)

    @rule()
    def drop_all(self) -> None:
        if isinstance(self.store, SQLiteSnapshotStore):
            self._run(self.store.drop_all())

    @invariant()
    def every_count_is_the_pending_calls_of_its_runs(self) -> None:
        waiting = self._run(self.store.list_review_runs(QueueFilter(), limit=1_000_000))
        for f in _filters():
            truth = sum(doc["pendingCount"] for doc in waiting if _matches(f, doc))
            assert self._run(self.store.count_review_questions(f)) == truth, f
        if isinstance(self.store, SQLiteSnapshotStore):
            self._check_table()

    def _check_table(self) -> None:
        waiting = "status = 'suspended' AND pending_count > 0 AND parent_run_id IS NULL"
        with sqlite3.connect(self.path, isolation_level=None) as db:
            db.execute("BEGIN")  # one read transaction: the counts and the runs of one committed state
            kept = sorted(db.execute("SELECT scope, thread_id, resource_id, agent_id, questions FROM review_counts"))
            recomputed = sorted(
                db.execute(
                    f"SELECT 0, '', '', agent_id, sum(pending_count) FROM run_snapshots WHERE {waiting} "
                    "GROUP BY agent_id "
                    f"UNION ALL SELECT 1, thread_id, '', agent_id, sum(pending_count) FROM run_snapshots "
                    f"WHERE {waiting} AND thread_id IS NOT NULL GROUP BY agent_id, thread_id "
                    f"UNION ALL SELECT 2, '', resource_id, agent_id, sum(pending_count) FROM run_snapshots "
                    f"WHERE {waiting} AND resource_id IS NOT NULL GROUP BY agent_id, resource_id "
                    f"UNION ALL SELECT 3, thread_id, resource_id, agent_id, sum(pending_count) FROM run_snapshots "
                    f"WHERE {waiting} AND thread_id IS NOT NULL AND resource_id IS NOT NULL "
                    "GROUP BY agent_id, thread_id, resource_id"
                )
            )
            db.execute("COMMIT")
        assert kept == recomputed

    def teardown(self) -> None:
        self._run(self.store.close())
        self.loop.close()


class SQLiteQueueCountsMachine(QueueCountsMachine):
    KIND = "sqlite"


DIRECTORY: list[str] = []

SETTINGS = settings(
    max_examples=25,
    stateful_step_count=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
QueueCountsMachine.TestCase.settings = SETTINGS
SQLiteQueueCountsMachine.TestCase.settings = SETTINGS


def test_memory_counts_equal_the_pending_calls_after_any_writes(tmp_path: Path) -> None:
    DIRECTORY[:] = [str(tmp_path)]
    QueueCountsMachine.TestCase().runTest()


def test_sqlite_counts_equal_the_pending_calls_after_any_writes_by_any_code(tmp_path: Path) -> None:
    DIRECTORY[:] = [str(tmp_path)]
    SQLiteQueueCountsMachine.TestCase().runTest()


async def test_a_count_without_dates_is_a_search_of_the_kept_counts(tmp_path: Path) -> None:
    store = SQLiteSnapshotStore(tmp_path / "plan.db")
    await store.open()
    try:
        for f in _filters():
            plan = " / ".join(await store.explain_review_count(f))
            assert plan == "SCAN CONSTANT ROW" or "SEARCH review_counts USING PRIMARY KEY" in plan, (f, plan)
            assert "run_snapshots" not in plan, (f, plan)
        due = await store.explain_review_count(QueueFilter(expires_before=T0))
        assert "SEARCH run_snapshots USING INDEX runs_review_queue (expires_at<?)" in due
    finally:
        await store.close()
