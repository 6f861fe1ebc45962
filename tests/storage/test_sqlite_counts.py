"""The SQLite store's kept counts (``storage/sqlite/counts.py``) stay exact under every write path.

A hypothesis state machine writes one real SQLite file through two stores at once (two writer
connections, so the writes contend for the file's lock) and through a plain ``sqlite3``
connection (code that knows nothing of the counts: an older runsgate, the shell). Each step is a
batch of writes run concurrently: inserts (one, several, a duplicate, one whose event id is taken,
one cancelled), decisions, the sweeper's expiry decision, claims, a takeover of a lapsed claim,
rewrites, releases, finishes (one whose event id is taken), event retention and ``drop_all``.
After every step each total equals ``COUNT(*)`` of its runs read by a fresh connection, and the
``run_counts`` table equals the counts recomputed from ``run_snapshots``.
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

from runtime.events.journal import event_id
from storage import EventDocument, RunFilter, SQLiteSnapshotStore
from storage.protocol import ClaimedDeletion, ClaimedReplacement, ClaimRelease, ClaimWrite, DecisionWrite
from storage.sqlite import listing_where
from storage.sqlite.rows import _INSERT_RUN, _run_row

from ._contract import T0, decision, snapshot, tool_call

AGENTS = ("refund-agent", "weather-agent")
THREADS = (None, "t1", "t2")
RESOURCES = (None, "r1", "r2")
CLAIM = timedelta(seconds=30)

_key = st.tuples(st.sampled_from(AGENTS), st.sampled_from(THREADS), st.sampled_from(RESOURCES))
"""Where a new run lists: (agent, thread, resource)."""

_op = st.one_of(
    st.tuples(st.just("insert"), _key),
    st.tuples(st.just("insert many"), st.lists(_key, min_size=1, max_size=4)),
    st.tuples(st.just("insert cancelled"), _key, st.sampled_from([0, 1, 3])),
    st.tuples(st.just("insert duplicate"), st.integers(0, 50)),
    st.tuples(st.just("insert, event taken"), _key),
    st.tuples(st.sampled_from(["decide", "expire", "finish", "finish, event taken", "claim"]), st.integers(0, 50)),
    st.tuples(st.sampled_from(["take over", "suspend again", "release", "retention"]), st.integers(0, 50)),
    st.tuples(st.sampled_from(["raw insert", "raw delete"]), _key, st.integers(0, 50)),
)
"""One write; an integer picks one of the runs inserted so far (it may be gone by then)."""


def _filters() -> list[RunFilter]:
    """Every filter a total can have without dates, over the keys above."""
    found = [RunFilter(thread_id=t, resource_id=r) for t in THREADS for r in RESOURCES]
    found += [RunFilter(resource_ids=frozenset(allowed)) for allowed in ({"r1"}, {"r1", "r2"}, set())]
    found += [RunFilter(thread_id="t1", resource_ids=frozenset({"r1", "r2"}))]
    return found


class CountsMachine(RuleBasedStateMachine):
    """One SQLite file, two stores and a plain connection writing it."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.path = Path(DIRECTORY[0]) / f"counts-{uuid.uuid4().hex}.db"
        self.stores = [SQLiteSnapshotStore(self.path, busy_timeout=30.0) for _ in range(2)]
        for store in self.stores:
            self._run(store.open())
        self.ids: list[str] = []
        """Every run id inserted (or tried), in order; ops pick among them."""
        self.clock = T0

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _pick(self, index: int) -> str | None:
        return self.ids[index % len(self.ids)] if self.ids else None

    def _new(self, key: tuple[str, str | None, str | None]) -> dict[str, Any]:
        agent, thread, resource = key
        run_id = uuid.uuid4().hex
        self.ids.append(run_id)
        self.clock += timedelta(milliseconds=1)
        return dict(snapshot(run_id, agent_id=agent, thread=thread, resource=resource, created=self.clock))

    def _event(self, run: dict[str, Any], kind: str, given: str | None = None) -> EventDocument:
        return {
            "_id": given or event_id(),
            "runId": run["_id"],
            "agentId": run["agentId"],
            "type": kind,  # type: ignore[typeddict-item]
            "at": self.clock,
            "by": "machine",
            "data": {},
        }

    def _agent_of(self, run_id: str) -> str | None:
        with sqlite3.connect(self.path) as db:
            row = db.execute("SELECT agent_id FROM run_snapshots WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else str(row[0])

    async def _one(self, store: SQLiteSnapshotStore, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "insert":
            run = self._new(op[1])
            await store.insert(run, b"[]", event=self._event(run, "suspended"))  # type: ignore[arg-type]
        elif kind == "insert many":
            await store.insert_many([(self._new(key), b"[]") for key in op[1]])  # type: ignore[misc]
        elif kind == "insert cancelled":
            run = self._new(op[1])
            write = asyncio.ensure_future(store.insert(run, b"[]"))  # type: ignore[arg-type]
            for _ in range(op[2]):
                await asyncio.sleep(0)
            write.cancel()
            await asyncio.gather(write, return_exceptions=True)
        elif kind == "insert duplicate":
            taken = self._pick(op[1])
            if taken is not None:
                run = {**self._new(("refund-agent", "t1", "r1")), "_id": taken}
                await store.insert(run, b"[]")  # type: ignore[arg-type]
        elif kind == "insert, event taken":
            run = self._new(op[1])
            await store.append_event(self._event(run, "started", given=f"taken-{run['_id']}"))
            await store.insert(run, b"[]", event=self._event(run, "suspended", given=f"taken-{run['_id']}"))  # type: ignore[arg-type]
        elif kind in {"raw insert", "raw delete"}:
            self._raw(kind, op[1], op[2])
        else:
            await self._on_stored(store, kind, op[1])

    async def _on_stored(self, store: SQLiteSnapshotStore, kind: str, index: int) -> None:
        run_id = self._pick(index)
        agent = None if run_id is None else self._agent_of(run_id)
        if run_id is None or agent is None:
            return
        run = {"_id": run_id, "agentId": agent}
        by, now = f"instance-{index % 2}", self.clock
        if kind in {"decide", "expire"}:
            expired = [self._event(run, "expired")] if kind == "expire" else []
            await store.record_decision(
                DecisionWrite(
                    agent_id=agent,
                    run_id=run_id,
                    index=0,
                    tool_call_id="c1",
                    decision=decision("declined" if expired else "approved"),
                    now=now,
                    event=self._event(run, "decision"),
                    preceding_events=expired,
                )
            )
        elif kind == "claim":
            await store.claim(
                ClaimWrite(
                    agent_id=agent,
                    run_id=run_id,
                    by=by,
                    until=now + CLAIM,
                    now=now,
                    events=[self._event(run, "resumed")],
                )
            )
        elif kind == "take over":  # the claim's holder died: a lapsed lease is taken by another instance
            await store.claim(
                ClaimWrite(agent_id=agent, run_id=run_id, by="taker", until=now + 3 * CLAIM, now=now + 2 * CLAIM)
            )
        elif kind in {"finish", "finish, event taken"}:
            await store.record_decision(
                DecisionWrite(agent_id=agent, run_id=run_id, index=0, tool_call_id="c1", decision=decision(), now=now)
            )
            await store.claim(ClaimWrite(agent_id=agent, run_id=run_id, by=by, until=now + CLAIM, now=now))
            given = None
            if kind == "finish, event taken":
                given = f"taken-finish-{run_id}"
                await store.append_event(self._event(run, "started", given=given))
            await store.delete_claimed(
                ClaimedDeletion(agent_id=agent, run_id=run_id, by=by, event=self._event(run, "completed", given=given))
            )
        elif kind == "suspend again":
            await store.replace_claimed(
                ClaimedReplacement(
                    agent_id=agent,
                    run_id=run_id,
                    by=by,
                    tool_calls=[tool_call("c1")],
                    history=b"[]",
                    history_id=uuid.uuid4().hex,
                    now=now,
                    event=self._event(run, "suspended"),
                )
            )
        elif kind == "release":
            error = {"message": "boom", "at": now}
            await store.release_claim(
                ClaimRelease(
                    agent_id=agent, run_id=run_id, by=by, error=error, now=now, event=self._event(run, "failed")
                )
            )  # type: ignore[arg-type]
        elif kind == "retention":
            await store.delete_run_events([(agent, run_id)])

    def _raw(self, kind: str, key: tuple[str, str | None, str | None], index: int) -> None:
        """A write by code that knows nothing of ``run_counts``: a plain connection's SQL."""
        with sqlite3.connect(self.path, timeout=30) as db:
            if kind == "raw insert":
                db.execute(_INSERT_RUN, _run_row(self._new(key)))  # type: ignore[arg-type]
            else:
                run_id = self._pick(index)
                if run_id is not None:
                    db.execute("DELETE FROM run_snapshots WHERE run_id = ?", (run_id,))

    @rule(ops=st.lists(_op, min_size=1, max_size=5))
    def writes(self, ops: list[tuple[Any, ...]]) -> None:
        """A batch of writes at once, alternating between the two stores; failures are expected
        (a duplicate, a taken event id, a lost race) and leave nothing of their write."""

        async def all_at_once() -> None:
            await asyncio.gather(
                *(self._one(self.stores[n % 2], op) for n, op in enumerate(ops)), return_exceptions=True
            )

        self._run(all_at_once())
        for store in self.stores:  # a write cancelled once its transaction took it ends with that transaction
            self._run(store._write(lambda db: None))
        self.clock += timedelta(seconds=1)

    @rule()
    def drop_all(self) -> None:
        self._run(self.stores[1].drop_all())

    @invariant()
    def every_total_is_the_number_of_its_runs(self) -> None:
        with sqlite3.connect(self.path, isolation_level=None) as db:
            db.execute("BEGIN")  # one read transaction: the counts and the runs of one committed state
            kept = sorted(db.execute("SELECT * FROM run_counts").fetchall())
            recomputed = sorted(
                db.execute(
                    "SELECT agent_id, 0, '', '', count(*) FROM run_snapshots GROUP BY agent_id "
                    "UNION ALL SELECT agent_id, 1, thread_id, '', count(*) FROM run_snapshots "
                    "WHERE thread_id IS NOT NULL GROUP BY agent_id, thread_id "
                    "UNION ALL SELECT agent_id, 2, '', resource_id, count(*) FROM run_snapshots "
                    "WHERE resource_id IS NOT NULL GROUP BY agent_id, resource_id "
                    "UNION ALL SELECT agent_id, 3, thread_id, resource_id, count(*) FROM run_snapshots "
                    "WHERE thread_id IS NOT NULL AND resource_id IS NOT NULL GROUP BY agent_id, thread_id, resource_id"
                ).fetchall()
            )
            assert kept == recomputed
            for agent in AGENTS:
                for run_filter in _filters():
                    where, params = listing_where(agent, run_filter)
                    truth = db.execute(f"SELECT count(*) FROM run_snapshots WHERE {where}", params).fetchone()[0]
                    for store in self.stores:
                        assert self._run(store.count_runs(agent, run_filter)) == truth, (agent, run_filter)
                    listed = self._run(self.stores[0].list_runs(agent, run_filter))
                    assert len(listed) == truth, (agent, run_filter)

    def teardown(self) -> None:
        for store in self.stores:
            self._run(store.close())
        self.loop.close()


DIRECTORY: list[str] = []

CountsMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_kept_counts_equal_the_runs_under_every_write_path_and_concurrent_writers(tmp_path: Path) -> None:
    DIRECTORY[:] = [str(tmp_path)]
    CountsMachine.TestCase().runTest()
