"""The SQLite store's reviewers' queue: pages of index ``runs_review_queue`` (or of its copy
leading with the thread or the resource, ``_index``) in queue order (``QueueKey``), and the review
claims written on a run's calls (``ReviewQueueStore``)."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..documents import SnapshotDocument
from ..protocol import QueueFilter, QueueKey, ReviewCandidates, ReviewClaimWrite
from . import conditions, queue_counts
from .connection import _Connection
from .rows import _COLUMNS, _calls, _calls_text, _marks, _ms, _snapshot

_WAITING = "pending_count > 0 AND status = 'suspended'"
"""The partial condition of the queue's indexes: every queue query states it as is."""


def _index(f: QueueFilter) -> str:
    """The index a page of ``f`` and its count with ``expires_before`` search: the one leading
    with ``f``'s thread, else with its resource (named, or a principal's only one), else
    ``runs_review_queue``; the filter's other fields are checked while walking it."""
    if f.thread_id is not None:
        return "runs_review_queue_thread"
    if f.resource_id is not None or (f.resource_ids is not None and len(f.resource_ids) == 1):
        return "runs_review_queue_resource"
    return "runs_review_queue"


def _filter_sql(f: QueueFilter) -> tuple[str, list[Any]]:
    """The ``AND ...`` clauses of ``QueueFilter``, applied while walking the index."""
    clauses, params = "", list[Any]()
    for column, values in (("agent_id", f.agent_ids), ("resource_id", f.resource_ids)):
        if values is not None:
            allowed = sorted(values)
            clauses += f" AND {column} IN ({_marks(len(allowed))})" if allowed else " AND 0"
            params.extend(allowed)
    for column, value in (("thread_id", f.thread_id), ("resource_id", f.resource_id)):
        if value is not None:
            clauses += f" AND {column} = ?"
            params.append(value)
    return clauses, params


def _matches_nothing(f: QueueFilter) -> bool:
    """An empty set of agents or resources (``INDEXED BY`` finds no plan for its ``AND 0``)."""
    return (f.agent_ids is not None and not f.agent_ids) or (f.resource_ids is not None and not f.resource_ids)


def queue_sql(f: QueueFilter, limit: int, after: QueueKey | None) -> tuple[str, list[Any]] | None:
    """The query of one page, strictly after ``after``: the runs with a deadline (earliest first),
    then, unless ``after`` is past them or ``expires_before`` is set, those without one (oldest
    first), each part a search of ``_index(f)`` from its cursor bound, joined by ``UNION ALL``
    in queue order (``expires_at NULLS LAST``), which SQLite merges from the two searches with no
    sort step and stops reading at ``limit`` runs; ``None`` when it reads nothing (``f`` matches
    nothing, or ``after`` is past the runs ``expires_before`` keeps)."""
    if _matches_nothing(f):
        return None
    extra, extra_params = _filter_sql(f)
    table, parts, params = f"run_snapshots INDEXED BY {_index(f)}", list[str](), list[Any]()
    if after is None or after.expires_at is not None:
        where = f"{_WAITING} AND expires_at IS NOT NULL"
        if after is not None and after.expires_at is not None:
            where += " AND (expires_at, suspended_at, run_id) > (?, ?, ?)"
            params += [_ms(after.expires_at), _ms(after.suspended_at), after.run_id]
        if f.expires_before is not None:
            where += " AND expires_at < ?"
            params.append(_ms(f.expires_before))
        parts.append(f"SELECT {_COLUMNS} FROM {table} WHERE {where}{extra}")
        params += extra_params
    if f.expires_before is None:
        where = f"{_WAITING} AND expires_at IS NULL"
        if after is not None and after.expires_at is None:
            where += " AND (suspended_at, run_id) > (?, ?)"
            params += [_ms(after.suspended_at), after.run_id]
        parts.append(f"SELECT {_COLUMNS} FROM {table} WHERE {where}{extra}")
        params += extra_params
    if not parts:  # past the runs with a deadline, and only those asked for
        return None
    order = "ORDER BY expires_at NULLS LAST, suspended_at, run_id LIMIT ?"
    return f"{' UNION ALL '.join(parts)} {order}", [*params, limit]


def _count_sql(f: QueueFilter) -> tuple[str, list[Any]]:
    """The query of ``count_review_questions``: the kept counts (``queue_counts``), or with
    ``expires_before`` a sum over the runs of its index (``_index``) due before it, O(matches)."""
    if f.expires_before is None:
        return queue_counts.kept_count_sql(f)
    if _matches_nothing(f):
        return "SELECT 0", []
    extra, params = _filter_sql(f)
    return (
        f"SELECT coalesce(sum(pending_count), 0) FROM run_snapshots INDEXED BY {_index(f)} "
        f"WHERE {_WAITING} AND parent_run_id IS NULL AND expires_at < ?{extra}",
        [_ms(f.expires_before), *params],
    )


_MARK_KINDS = {"tool": "t", "approver": "a", "starter": "s", "unknown starter": "u", "claimed": "c", "escalated": "e"}
"""``review_marks.kind`` of each part of ``ReviewCandidates`` (``queue_counts._mark``)."""


def candidates_sql(f: QueueFilter, c: ReviewCandidates, limit: int, after: str | None) -> tuple[str, list[Any]] | None:
    """The query of one page of ``list_review_candidates`` (``None``: it matches nothing): per
    part of ``c`` (and the runs whose calls SQLite cannot read), a walk of ``review_marks`` in run
    id order from ``after`` on, to its first ``limit`` runs that pass ``f``; their union's first
    ``limit``, in run id order."""
    parts = [(_MARK_KINDS[kind], value or "") for kind, value in c.parts()]
    if not parts or _matches_nothing(f):
        return None
    parts.append(("x", ""))  # calls SQLite cannot read (``queue_counts._mark``): a candidate of every part
    extra, extra_params = _filter_sql(f)
    if f.expires_before is not None:
        extra += " AND expires_at < ?"
        extra_params.append(_ms(f.expires_before))
    selects, params = [], list[Any]()
    for kind, value in parts:
        selects.append(
            "SELECT run_id FROM (SELECT m.run_id FROM review_marks AS m JOIN run_snapshots AS r ON r.run_id = m.run_id "
            f"WHERE m.kind = ? AND m.value = ? AND m.run_id > ?{extra} ORDER BY m.run_id LIMIT ?)"
        )
        params += [kind, value, after or "", *extra_params, limit]
    sql = f"SELECT {_COLUMNS} FROM run_snapshots WHERE run_id IN ({' UNION '.join(selects)}) ORDER BY run_id LIMIT ?"
    return sql, [*params, limit]


class _Review(_Connection):
    """``ReviewQueueStore`` on ``run_snapshots``."""

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        query = queue_sql(queue_filter, limit, after) if limit > 0 else None
        return [] if query is None else [_snapshot(row) for row in await self._read(*query)]

    async def list_review_candidates(
        self, queue_filter: QueueFilter, candidates: ReviewCandidates, *, limit: int, after: str | None = None
    ) -> list[SnapshotDocument]:
        query = candidates_sql(queue_filter, candidates, limit, after) if limit > 0 else None
        return [] if query is None else [_snapshot(row) for row in await self._read(*query)]

    async def explain_review_candidates(self, queue_filter: QueueFilter, candidates: ReviewCandidates) -> list[str]:
        """SQLite's query plan of a page of ``list_review_candidates`` (``EXPLAIN QUERY PLAN``)."""
        query = candidates_sql(queue_filter, candidates, 500, None)
        return [] if query is None else await self._explain(*query)

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        rows = await self._read(*_count_sql(queue_filter))
        return int(rows[0][0])

    async def count_review_questions_seeing(self, queue_filter: QueueFilter, approver: str) -> tuple[int, bool]:
        """``ApproverSeeingCount``: the kept count and whether a waiting run holds a pending call
        approved by ``approver`` (or calls SQLite cannot read), in one read
        (``queue_counts.seeing_count_sql``); with ``expires_before``, ``count_review_questions``
        and ``True``."""
        if queue_filter.expires_before is not None:
            return await self.count_review_questions(queue_filter), True
        rows = await self._read(*queue_counts.seeing_count_sql(queue_filter, approver))
        return int(rows[0][0]), bool(rows[0][1])

    async def explain_review_count_seeing(self, queue_filter: QueueFilter, approver: str) -> list[str]:
        """SQLite's query plan of ``count_review_questions_seeing`` (``EXPLAIN QUERY PLAN``)."""
        return await self._explain(*queue_counts.seeing_count_sql(queue_filter, approver))

    async def explain_review_count(self, queue_filter: QueueFilter) -> list[str]:
        """SQLite's query plan of ``count_review_questions`` (``EXPLAIN QUERY PLAN``)."""
        return await self._explain(*_count_sql(queue_filter))

    async def explain_review_queue(
        self, queue_filter: QueueFilter, limit: int, *, after: QueueKey | None = None
    ) -> list[str]:
        """SQLite's query plan of a queue page after ``after`` (``EXPLAIN QUERY PLAN``; none when
        the page reads nothing)."""
        query = queue_sql(queue_filter, limit, after)
        return [] if query is None else await self._explain(*query)

    async def record_review_claim(self, write: ReviewClaimWrite) -> SnapshotDocument | None:
        on_columns, on_calls = conditions.split(write.condition)
        sql, params = conditions.where(on_columns)

        def claim(db: sqlite3.Connection) -> SnapshotDocument | None:
            rows = db.execute(f"SELECT tool_calls FROM run_snapshots WHERE {sql}", params).fetchall()
            if not rows:
                return None
            calls = _calls(rows[0][0])
            if not conditions.calls_match(on_calls, calls):
                return None
            if write.claim is None:
                calls[write.index].pop("reviewClaim", None)
            else:
                calls[write.index]["reviewClaim"] = write.claim
            updated = db.execute(
                "UPDATE run_snapshots SET tool_calls = ?, updated_at = ?, version = version + 1 WHERE run_id = ? "
                f"RETURNING {_COLUMNS}",
                (_calls_text(calls), _ms(write.now), write.run_id),
            ).fetchall()
            self._append_in(db, write.event)
            return _snapshot(updated[0])

        return await self._write(claim)


__all__ = ["_Review", "candidates_sql", "queue_sql"]
