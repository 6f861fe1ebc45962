"""The SQLite store's kept queue counts: ``review_counts`` holds the pending questions
(``pending_count``) of the runs the reviewers' queue lists (suspended, a call pending, not a
sub-run), per filter combination as ``run_counts`` keys the listing's (``counts``), so the queue's
``totalCount`` without ``expiresBefore`` is a search by key (docs/storage.md "What a page costs").

Triggers on ``run_snapshots`` keep them in the transaction of every insert, delete and change of
the columns they read, whichever code writes (``drop_all``, an older runsgate of the same schema
version, the ``sqlite3`` shell), so they equal the runs' sum in every committed state.
``file.backfill`` fills them once (backfill 4). ``review_marks`` indexes the same runs by what
may make the gate refuse a principal a question (``ReviewCandidates``), kept alike (backfill 5).
"""

from __future__ import annotations

from typing import Any

import aiosqlite

from ..protocol import QueueFilter
from .counts import AGENT, RESOURCE, THREAD, THREAD_RESOURCE, key_parts
from .rows import _marks

WAITING = "{row}.status = 'suspended' AND {row}.pending_count > 0 AND {row}.parent_run_id IS NULL"
"""Whether a run ``{row}`` is counted: what ``count_review_questions`` sums over."""


def _questions(row: str) -> str:
    """The questions run ``row`` adds to its counts (0 when it is not counted)."""
    return f"(CASE WHEN {WAITING.format(row=row)} THEN {row}.pending_count ELSE 0 END)"


def _add(row: str, delta: str, *, may_reach_zero: bool) -> str:
    """Statements adding ``delta`` to every count row of run ``row`` (deleting a row that reaches 0)."""
    statements = []
    for scope, (thread, resource, present) in key_parts(row).items():
        statements.append(
            f"INSERT INTO review_counts (scope, thread_id, resource_id, agent_id, questions) "
            f"SELECT {scope}, {thread}, {resource}, {row}.agent_id, {delta} WHERE {present} AND {delta} != 0 "
            "ON CONFLICT DO UPDATE SET questions = questions + excluded.questions;"
        )
        if may_reach_zero:
            statements.append(
                f"DELETE FROM review_counts WHERE (scope, thread_id, resource_id, agent_id) = "
                f"({scope}, {thread}, {resource}, {row}.agent_id) AND questions = 0;"
            )
    return "\n    ".join(statements)


_SAME_KEYS = "OLD.agent_id IS NEW.agent_id AND OLD.thread_id IS NEW.thread_id AND OLD.resource_id IS NEW.resource_id"

TABLES = f"""
CREATE TABLE IF NOT EXISTS review_counts (
    scope INTEGER NOT NULL,
    thread_id TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    questions INTEGER NOT NULL,
    PRIMARY KEY (scope, thread_id, resource_id, agent_id)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS review_counts_inserted AFTER INSERT ON run_snapshots
WHEN {_questions("NEW")} != 0 BEGIN
    {_add("NEW", _questions("NEW"), may_reach_zero=False)}
END;
CREATE TRIGGER IF NOT EXISTS review_counts_deleted AFTER DELETE ON run_snapshots
WHEN {_questions("OLD")} != 0 BEGIN
    {_add("OLD", "-" + _questions("OLD"), may_reach_zero=True)}
END;
CREATE TRIGGER IF NOT EXISTS review_counts_changed
AFTER UPDATE OF status, pending_count, parent_run_id ON run_snapshots
WHEN {_SAME_KEYS} AND {_questions("OLD")} != {_questions("NEW")} BEGIN
    {_add("NEW", f"({_questions('NEW')} - {_questions('OLD')})", may_reach_zero=True)}
END;
CREATE TRIGGER IF NOT EXISTS review_counts_moved
AFTER UPDATE OF agent_id, thread_id, resource_id ON run_snapshots
WHEN NOT ({_SAME_KEYS}) BEGIN
    {_add("OLD", "-" + _questions("OLD"), may_reach_zero=True)}
    {_add("NEW", _questions("NEW"), may_reach_zero=False)}
END;
"""
"""``review_counts``, keyed scope first so a count of every agent is one range, and its four
triggers: a decision, claim, release or rewrite changes a run's questions (``review_counts_changed``,
one upsert and one conditional delete per scope); no write of runsgate changes a run's agent,
thread or resource, but ``review_counts_moved`` keeps the counts exact if anything does (an
``UPDATE`` of both kinds of column fires the one its keys call for)."""


def _mark(row: str, table: str = "") -> str:
    """The statement adding the marks of run ``row`` when it is counted: the tools and approvers
    of its pending calls, ``c`` when one holds a review claim (lapsed or not), ``e`` when one was
    escalated, its starter (``''``: in-process code) or ``u`` when it records none, and
    ``x`` when its calls are not JSON SQLite reads (an older runsgate stored ``Infinity``): such a
    run is a candidate of every part. ``table``: ``"run_snapshots AS r"`` with ``row`` ``r`` to
    mark every run (``rebuild_marks``)."""
    waiting, pending = WAITING.format(row=row), "json_type(c.value, '$.decision') = 'null'"
    both = f"{table}, " if table else ""
    alone = f" FROM {table}" if table else ""
    calls = f"json_each(CASE WHEN json_valid({row}.tool_calls) THEN {row}.tool_calls ELSE '[]' END)"
    return (
        "INSERT OR IGNORE INTO review_marks (kind, value, run_id) "
        f"SELECT 't', json_extract(c.value, '$.toolName'), {row}.run_id FROM {both}{calls} AS c "
        f"WHERE {waiting} AND {pending} "
        f"UNION SELECT 'a', json_extract(a.value, '$.decidedBy'), {row}.run_id "
        f"FROM {both}{calls} AS c, json_each(c.value, '$.approvals') AS a "
        f"WHERE {waiting} AND {pending} AND json_type(a.value, '$.decidedBy') = 'text' "
        f"UNION SELECT 'c', '', {row}.run_id FROM {both}{calls} AS c "
        f"WHERE {waiting} AND {pending} AND json_type(c.value, '$.reviewClaim') = 'object' "
        f"UNION SELECT 'e', '', {row}.run_id FROM {both}{calls} AS c "
        f"WHERE {waiting} AND {pending} AND json_type(c.value, '$.escalated') = 'true' "
        f"UNION SELECT 's', {row}.started_by, {row}.run_id{alone} WHERE {waiting} AND {row}.started_by IS NOT NULL "
        f"UNION SELECT 'u', '', {row}.run_id{alone} WHERE {waiting} AND {row}.started_by IS NULL "
        f"UNION SELECT 'x', '', {row}.run_id{alone} WHERE {waiting} AND NOT json_valid({row}.tool_calls);"
    )


MARKS = f"""
CREATE TABLE IF NOT EXISTS review_marks (
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (kind, value, run_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS review_marks_run ON review_marks (run_id);
CREATE TRIGGER IF NOT EXISTS review_marks_inserted AFTER INSERT ON run_snapshots
WHEN {WAITING.format(row="NEW")} BEGIN
    {_mark("NEW")}
END;
CREATE TRIGGER IF NOT EXISTS review_marks_deleted AFTER DELETE ON run_snapshots
WHEN {WAITING.format(row="OLD")} BEGIN
    DELETE FROM review_marks WHERE run_id = OLD.run_id;
END;
CREATE TRIGGER IF NOT EXISTS review_marks_changed
AFTER UPDATE OF run_id, tool_calls, status, pending_count, parent_run_id, started_by ON run_snapshots
WHEN ({WAITING.format(row="OLD")}) OR ({WAITING.format(row="NEW")}) BEGIN
    DELETE FROM review_marks WHERE run_id = OLD.run_id;
    {_mark("NEW")}
END;
"""
"""``review_marks``: one row per (part, value) of ``ReviewCandidates`` a counted run belongs to,
keyed part first so each part's runs are one range in run id order, and its three triggers (a
write that changes a counted run's calls re-marks it)."""


def statements() -> list[str]:
    """``TABLES`` and ``MARKS`` as separate statements (a trigger's body holds ``;`` of its own)."""
    found = []
    for text in (TABLES, MARKS):
        tables, *triggers = text.split("CREATE TRIGGER")
        found += [s.strip() for s in tables.split(";") if s.strip()]
        found += [f"CREATE TRIGGER {body.strip()}" for body in triggers]
    return found


async def rebuild(conn: aiosqlite.Connection) -> None:
    """Inside ``open()``'s transaction: set every count from the runs stored, by one grouped walk of
    the runs (O(runs) once) into a temporary table of (agent, thread, resource) sums, which the
    four scopes then sum up."""
    await conn.execute("DELETE FROM review_counts")
    await conn.execute(
        "CREATE TEMP TABLE review_groups AS SELECT agent_id, thread_id, resource_id, sum(pending_count) AS questions "
        f"FROM run_snapshots WHERE {WAITING.format(row='run_snapshots')} GROUP BY agent_id, thread_id, resource_id"
    )
    try:
        for scope, (thread, resource, present) in key_parts("review_groups").items():
            await conn.execute(
                f"INSERT INTO review_counts (scope, thread_id, resource_id, agent_id, questions) "
                f"SELECT {scope}, {thread}, {resource}, agent_id, sum(questions) FROM review_groups "
                f"WHERE {present} GROUP BY {thread}, {resource}, agent_id"
            )
    finally:
        await conn.execute("DROP TABLE temp.review_groups")


async def renew_mark_triggers(conn: aiosqlite.Connection) -> None:
    """Inside ``open()``'s transaction: replace ``review_marks``' triggers of a file written before
    they marked claims and escalations (``CREATE TRIGGER IF NOT EXISTS`` keeps a trigger's old body)."""
    for name in ("review_marks_inserted", "review_marks_deleted", "review_marks_changed"):
        await conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    _, *triggers = MARKS.split("CREATE TRIGGER")
    for body in triggers:
        await conn.execute(f"CREATE TRIGGER {body.strip()}")


async def rebuild_marks(conn: aiosqlite.Connection) -> None:
    """Inside ``open()``'s transaction: set ``review_marks`` from the runs stored (O(runs) once)."""
    await conn.execute("DELETE FROM review_marks")
    await conn.execute(_mark("r", "run_snapshots AS r"))


def kept_count_sql(f: QueueFilter) -> tuple[str, list[Any]]:
    """The query of ``count_review_questions`` from the kept counts: a search of ``review_counts``
    by its key, a range over the agents (k ranges with k resources in ``resource_ids``).
    ``f.expires_before`` is not read (that count walks the matching runs: ``review._count_sql``)."""
    allowed = f.resource_ids
    if allowed is not None and f.resource_id is not None:
        allowed = None if f.resource_id in allowed else frozenset()
    named = [""] if f.resource_id is None else [f.resource_id]
    resources = named if allowed is None else sorted(allowed)
    if not resources or (f.agent_ids is not None and not f.agent_ids):
        return "SELECT 0", []
    if allowed is None and f.resource_id is None:
        scope = AGENT if f.thread_id is None else THREAD
    else:
        scope = RESOURCE if f.thread_id is None else THREAD_RESOURCE
    sql = (
        "SELECT coalesce(sum(questions), 0) FROM review_counts WHERE scope = ? AND thread_id = ? "
        f"AND resource_id IN ({_marks(len(resources))})"
    )
    params: list[Any] = [scope, "" if f.thread_id is None else f.thread_id, *resources]
    if f.agent_ids is not None:
        agents = sorted(f.agent_ids)
        sql += f" AND agent_id IN ({_marks(len(agents))})"
        params += agents
    return sql, params


SEEN = (
    "EXISTS (SELECT 1 FROM review_marks WHERE kind = 'a' AND value = ?) "
    "OR EXISTS (SELECT 1 FROM review_marks WHERE kind = 'x' AND value = '')"
)
"""Whether a counted run holds an approval by a principal (``?``) in a pending call, or calls
SQLite cannot read (``x``, a candidate of every part): two searches of ``review_marks``' key."""


def seeing_count_sql(f: QueueFilter, approver: str) -> tuple[str, list[Any]]:
    """The query of ``count_review_questions_seeing``: one row of ``kept_count_sql(f)``'s sum and
    ``SEEN`` for ``approver`` (1 or 0), whatever ``f`` selects, so 1 whenever
    ``list_review_candidates`` of ``ReviewCandidates(approver=approver)`` may find a run of ``f``;
    ``(0, 0)`` when ``f`` matches nothing. ``f.expires_before`` is not read."""
    sql, params = kept_count_sql(f)
    if not params:  # ``f`` matches nothing: neither questions nor candidates
        return "SELECT 0, 0", []
    return f"SELECT ({sql}), {SEEN}", [*params, approver]


__all__ = [
    "MARKS",
    "SEEN",
    "TABLES",
    "WAITING",
    "kept_count_sql",
    "rebuild",
    "rebuild_marks",
    "renew_mark_triggers",
    "seeing_count_sql",
    "statements",
]
