"""The SQLite store's kept counts: ``run_counts`` holds how many runs each filter combination of a
listing matches (per agent; per agent and thread; per agent and resource; per agent, thread and
resource), so a ``totalCount`` without dates is one search by key (docs/storage.md "What a page
costs").

Triggers on ``run_snapshots`` keep the counts in the transaction of every insert and delete,
whichever code runs it (a deletion that finishes a run, ``drop_all``, an older runsgate of the same
schema version on the same file, the ``sqlite3`` shell), so a count always equals ``COUNT(*)``
of its runs in every committed state. ``file.backfill`` fills them once for a file written before them.
"""

from __future__ import annotations

from typing import Any

import aiosqlite

from .._query import normalized_filter
from ..protocol import RunFilter
from .rows import _marks

AGENT, THREAD, RESOURCE, THREAD_RESOURCE = 0, 1, 2, 3
"""``run_counts.scope``: which keys a count row names besides the agent (the others are ``''``)."""

_KEYS = {
    AGENT: ("''", "''", "1"),
    THREAD: ("{row}.thread_id", "''", "{row}.thread_id IS NOT NULL"),
    RESOURCE: ("''", "{row}.resource_id", "{row}.resource_id IS NOT NULL"),
    THREAD_RESOURCE: (
        "{row}.thread_id",
        "{row}.resource_id",
        "{row}.thread_id IS NOT NULL AND {row}.resource_id IS NOT NULL",
    ),
}
"""Scope -> (its ``thread_id``, its ``resource_id``, whether a run has that row), for a run ``{row}``."""


def key_parts(row: str) -> dict[int, tuple[str, str, str]]:
    """``_KEYS`` for the run ``row`` (``NEW``, ``OLD`` or a table): scope -> its three SQL parts."""
    return {scope: tuple(part.format(row=row) for part in parts) for scope, parts in _KEYS.items()}  # type: ignore[misc]


def _added(row: str) -> str:
    statements = []
    for scope, (thread, resource, present) in _KEYS.items():
        t, r, p = (part.format(row=row) for part in (thread, resource, present))
        statements.append(
            f"INSERT INTO run_counts (agent_id, scope, thread_id, resource_id, runs) "
            f"SELECT {row}.agent_id, {scope}, {t}, {r}, 1 WHERE {p} "
            "ON CONFLICT DO UPDATE SET runs = runs + 1;"
        )
    return "\n    ".join(statements)


def _removed(row: str) -> str:
    statements = []
    for scope, (thread, resource, _) in _KEYS.items():
        t, r = (part.format(row=row) for part in (thread, resource))
        key = f"(agent_id, scope, thread_id, resource_id) = ({row}.agent_id, {scope}, {t}, {r})"
        statements.append(f"UPDATE run_counts SET runs = runs - 1 WHERE {key};")
        statements.append(f"DELETE FROM run_counts WHERE {key} AND runs = 0;")
    return "\n    ".join(statements)


TABLES = f"""
CREATE TABLE IF NOT EXISTS run_counts (
    agent_id TEXT NOT NULL,
    scope INTEGER NOT NULL,
    thread_id TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    runs INTEGER NOT NULL,
    PRIMARY KEY (agent_id, scope, thread_id, resource_id)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS run_counts_inserted AFTER INSERT ON run_snapshots BEGIN
    {_added("NEW")}
END;
CREATE TRIGGER IF NOT EXISTS run_counts_deleted AFTER DELETE ON run_snapshots BEGIN
    {_removed("OLD")}
END;
CREATE TRIGGER IF NOT EXISTS run_counts_moved AFTER UPDATE OF agent_id, thread_id, resource_id ON run_snapshots BEGIN
    {_removed("OLD")}
    {_added("NEW")}
END;
"""
"""``run_counts`` and its three triggers (``statements`` splits them). No write of runsgate
changes a run's agent, thread or resource; the third trigger keeps the counts exact if anything
ever does."""


def statements() -> list[str]:
    """``TABLES`` as separate statements (a trigger's body holds ``;`` of its own)."""
    table, *triggers = TABLES.split("CREATE TRIGGER")
    return [table.strip(), *(f"CREATE TRIGGER {body.strip()}" for body in triggers)]


async def rebuild(conn: aiosqlite.Connection) -> None:
    """Inside ``open()``'s transaction: set every count from the runs stored (four grouped walks
    of the listing indexes, O(runs) once)."""
    await conn.execute("DELETE FROM run_counts")
    for scope, (thread, resource, present) in _KEYS.items():
        t, r, p = (part.format(row="run_snapshots") for part in (thread, resource, present))
        await conn.execute(
            f"INSERT INTO run_counts (agent_id, scope, thread_id, resource_id, runs) "
            f"SELECT agent_id, {scope}, {t}, {r}, count(*) FROM run_snapshots WHERE {p} "
            f"GROUP BY agent_id, {t}, {r}"
        )


def kept_count_sql(agent_id: str, run_filter: RunFilter) -> tuple[str, list[Any]] | None:
    """The query of ``count_runs`` from the kept counts (one search of ``run_counts`` by key, or of
    k keys with ``resource_ids``), or ``None`` when the filter has dates (``from_date``, ``to_date``,
    ``expires_before``): those totals count their index range."""
    f = normalized_filter(run_filter)
    if f.from_date is not None or f.to_date is not None or f.expires_before is not None:
        return None
    thread = "" if f.thread_id is None else f.thread_id
    select = "SELECT coalesce(sum(runs), 0) FROM run_counts WHERE agent_id = ? AND scope = ? AND thread_id = ? AND "
    if f.resource_ids is not None:
        allowed = sorted(f.resource_ids)
        if not allowed:
            return "SELECT 0", []
        scope = RESOURCE if f.thread_id is None else THREAD_RESOURCE
        return f"{select}resource_id IN ({_marks(len(allowed))})", [agent_id, scope, thread, *allowed]
    if f.resource_id is None:
        scope = AGENT if f.thread_id is None else THREAD
        return f"{select}resource_id = ''", [agent_id, scope, thread]
    scope = RESOURCE if f.thread_id is None else THREAD_RESOURCE
    return f"{select}resource_id = ?", [agent_id, scope, thread, f.resource_id]


__all__ = [
    "AGENT",
    "RESOURCE",
    "TABLES",
    "THREAD",
    "THREAD_RESOURCE",
    "kept_count_sql",
    "key_parts",
    "rebuild",
    "statements",
]
