"""The SQLite store's translation of ``storage.rules`` (``storage/sqlite/conditions.py``): for run
documents Hypothesis draws, stored in a real SQLite file, the rows a compiled condition selects
are exactly the stored documents ``rules.matches`` accepts; a rule with conditions on the calls
selects, with its SQL part and its part on the decoded calls together, the same documents."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import SnapshotDocument, SQLiteSnapshotStore, ToolCallDocument, rules
from storage.rules import AllOf, AnyOf, Condition, Equals, Length, NoValue
from storage.sqlite import conditions
from storage.sqlite.rows import _calls

from ._contract import T0, decision, snapshot, tool_call

AGENTS = ("a1", "a2")
RUNS = ("r1", "r2", "r3", "r4", "r5")
HOLDERS = ("i1", "i2")
CALL_IDS = ("c0", "c1")


def moments() -> st.SearchStrategy[datetime]:
    """Datetimes within 3 ms of ``T0``, to the microsecond: on, between and around the whole
    milliseconds a row holds."""
    return st.integers(-3000, 3000).map(lambda us: T0 + timedelta(microseconds=us))


@st.composite
def calls(draw: st.DrawFn) -> ToolCallDocument:
    call = tool_call(draw(st.sampled_from(CALL_IDS)))
    if draw(st.booleans()):
        call["questionId"] = draw(st.sampled_from(("q1", "q2")))
    if draw(st.integers(0, 2)) == 0:
        call["decision"] = decision()
    if draw(st.booleans()):
        call["expiresAt"] = draw(moments())
    approvals = draw(st.integers(0, 2))
    if approvals or draw(st.booleans()):
        call["approvals"] = [{"decidedBy": f"key:{i}", "decidedAt": T0} for i in range(approvals)]
    return call


@st.composite
def runs(draw: st.DrawFn, run_id: str) -> SnapshotDocument:
    doc = snapshot(run_id, agent_id=draw(st.sampled_from(AGENTS)), calls=draw(st.lists(calls(), max_size=3)))
    doc["status"] = draw(st.sampled_from(("suspended", "resuming")))
    doc["pendingCount"] = draw(st.integers(0, 2))  # stored as given, not always the count of its calls
    doc["version"] = draw(st.integers(1, 3))
    doc["updatedAt"] = draw(moments())
    if draw(st.booleans()):
        doc["claim"] = {"by": draw(st.sampled_from(HOLDERS)), "until": draw(moments())}
    if draw(st.booleans()):
        doc["lastError"] = {"type": "RuntimeError", "message": "boom", "at": T0}
    return doc


@st.composite
def stored_runs(draw: st.DrawFn) -> list[SnapshotDocument]:
    ids = draw(st.lists(st.sampled_from(RUNS), unique=True, max_size=len(RUNS)))
    return [draw(runs(run_id)) for run_id in ids]


def _aimed(draw: st.DrawFn, docs: list[SnapshotDocument]) -> SnapshotDocument | None:
    """One of ``docs`` whose values a rule's arguments take (so that it selects some), or ``None``."""
    return draw(st.sampled_from(docs)) if docs and draw(st.integers(0, 3)) else None


@st.composite
def column_rules(draw: st.DrawFn, docs: list[SnapshotDocument]) -> Condition:
    """One of the rules whose paths are all columns, with drawn arguments, often those of one of
    ``docs``."""
    now, idle_before = draw(moments()), draw(moments())
    agent, run, by = draw(st.sampled_from(AGENTS)), draw(st.sampled_from(RUNS)), draw(st.sampled_from(HOLDERS))
    version = draw(st.none() | st.integers(1, 3))
    aimed = _aimed(draw, docs)
    if aimed is not None:
        agent, run, version = aimed["agentId"], aimed["_id"], aimed["version"]
        claim = aimed["claim"]
        by = by if claim is None else claim["by"]
    return draw(
        st.sampled_from(
            [
                rules.owned(agent, run),
                rules.lease_lapsed(now),
                rules.claimable(now),
                rules.claimable(now, version),
                rules.last_pending(version or 1),
                rules.all_of(rules.owned(agent, run), rules.claimable(now, version)),
                rules.held(agent, run, by),
                rules.stalled(now, idle_before),
                rules.expired(now),
            ]
        )
    )


@st.composite
def call_rules(draw: st.DrawFn, docs: list[SnapshotDocument]) -> Condition:
    """A decision's condition (``rules.pending_call``, with ``rules.approvals_counted`` or not),
    with drawn arguments, often those of a call of one of ``docs``."""
    agent, run = draw(st.sampled_from(AGENTS)), draw(st.sampled_from(RUNS))
    index, call_id = draw(st.integers(-1, 3)), draw(st.sampled_from(CALL_IDS))
    question, count = draw(st.none() | st.sampled_from(("q1", "q2"))), draw(st.integers(0, 2))
    aimed = _aimed(draw, docs)
    if aimed is not None and aimed["toolCalls"]:
        agent, run = aimed["agentId"], aimed["_id"]
        index = draw(st.integers(0, len(aimed["toolCalls"]) - 1))
        call = aimed["toolCalls"][index]
        call_id, question, count = call["toolCallId"], call.get("questionId"), len(call.get("approvals") or ())
    pending = rules.pending_call(agent, run, index, call_id, question)
    return draw(st.sampled_from([pending, rules.all_of(pending, rules.approvals_counted(index, count))]))


@pytest.fixture
async def sqlite(sqlite_path: Path) -> AsyncIterator[SQLiteSnapshotStore]:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def _stored(store: SQLiteSnapshotStore, docs: list[SnapshotDocument]) -> list[SnapshotDocument]:
    """``docs`` as the only runs of the store, read back as stored (datetimes in whole ms)."""
    await store.drop_all()
    await store.insert_many([(doc, b"[]") for doc in docs])
    return await store.get_many([doc["_id"] for doc in docs])


def _select(path: Path, condition: Condition) -> dict[str, list[ToolCallDocument]]:
    """The rows ``conditions.where(condition)`` selects in the file, as their decoded calls by run id."""
    sql, params = conditions.where(condition)
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT run_id, tool_calls FROM run_snapshots WHERE {sql}", params).fetchall()
    return {row[0]: _calls(row[1]) for row in rows}


SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(data=st.data())
async def test_a_rule_on_columns_selects_exactly_the_documents_it_matches(
    sqlite: SQLiteSnapshotStore, sqlite_path: Path, data: st.DataObject
) -> None:
    stored = await _stored(sqlite, data.draw(stored_runs(), label="docs"))
    condition = data.draw(column_rules(stored), label="condition")

    selected = set(_select(sqlite_path, condition))

    assert selected == {doc["_id"] for doc in stored if rules.matches(condition, doc)}, condition


@SETTINGS
@given(data=st.data())
async def test_a_rule_on_calls_selects_with_its_sql_and_its_call_part_the_documents_it_matches(
    sqlite: SQLiteSnapshotStore, sqlite_path: Path, data: st.DataObject
) -> None:
    stored = await _stored(sqlite, data.draw(stored_runs(), label="docs"))
    condition = data.draw(call_rules(stored), label="condition")

    on_columns, on_calls = conditions.split(condition)
    selected = {
        run_id for run_id, found in _select(sqlite_path, on_columns).items() if conditions.calls_match(on_calls, found)
    }

    assert selected == {doc["_id"] for doc in stored if rules.matches(condition, doc)}, condition


async def test_a_lease_lapsed_by_less_than_a_millisecond_is_lapsed(
    sqlite: SQLiteSnapshotStore, sqlite_path: Path
) -> None:
    # given a run resuming under a lease until T0 (a whole millisecond)
    run = snapshot("r1")
    run["status"] = "resuming"
    run["claim"] = {"by": "i1", "until": T0}
    await _stored(sqlite, [run])

    # then 0.5 ms later its lease has lapsed, as rules.matches says; at T0 it has not
    assert set(_select(sqlite_path, rules.lease_lapsed(T0 + timedelta(microseconds=500)))) == {"r1"}
    assert set(_select(sqlite_path, rules.lease_lapsed(T0))) == set()
    # and a deadline is reached at T0, not 0.5 ms before it
    run["toolCalls"][0]["expiresAt"] = T0
    await _stored(sqlite, [run])
    assert set(_select(sqlite_path, rules.expired(T0 - timedelta(microseconds=500)))) == set()
    assert set(_select(sqlite_path, rules.expired(T0))) == {"r1"}


def test_a_value_of_another_type_than_the_column_s_never_matches() -> None:
    # matches compares types: the text "0" is no pending count, the number 1 no run id
    assert conditions.where(Equals("pendingCount", "0")) == ("0", [])
    assert conditions.where(Equals("_id", 1)) == ("0", [])
    assert conditions.where(Equals("updatedAt", 1)) == ("0", [])
    assert conditions.where(AnyOf(())) == ("0", [])
    assert conditions.where(AllOf(())) == ("1", [])
    assert conditions.where(NoValue("claim.by")) == ("claim_by IS NULL", [])


@pytest.mark.parametrize(
    "condition",
    [
        Equals("toolCalls.0.toolCallId", "c0"),
        NoValue("threadId.x"),
        Length("toolCalls.0.approvals", 1),
        rules.pending_call("a1", "r1", 0, "c0", None),
    ],
)
def test_a_path_that_is_no_column_is_refused(condition: Condition) -> None:
    with pytest.raises(ValueError, match="column"):
        conditions.where(condition)


def test_a_condition_mixing_calls_and_columns_in_one_branch_is_refused() -> None:
    mixed = rules.any_of(Equals("status", "suspended"), NoValue("toolCalls.0.decision"))
    with pytest.raises(ValueError, match="mixes"):
        conditions.split(mixed)
