"""``storage.rules`` conditions as SQL on ``run_snapshots``: ``where`` compiles a condition on the
run's columns to a ``WHERE`` fragment and its parameters, keeping ``rules.matches``'s meaning;
``split`` separates the part on ``toolCalls`` (JSON text), which the store applies with
``calls_match`` to the calls it read in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from .. import rules
from .._query import to_bson_precision
from ..documents import ToolCallDocument
from ..rules import AllOf, AnyOf, AtMost, Before, Condition, Equals, Length, NoValue
from .rows import _ms

Kind = Literal["text", "int", "ms", "json"]
"""How a column holds its path's value: text, an integer, UTC ms (a datetime), JSON text (a document)."""


@dataclass(frozen=True, slots=True)
class Column:
    """The ``run_snapshots`` column holding a document path's value."""

    name: str
    kind: Kind


COLUMNS: dict[str, Column] = {
    "_id": Column("run_id", "text"),
    "agentId": Column("agent_id", "text"),
    "threadId": Column("thread_id", "text"),
    "resourceId": Column("resource_id", "text"),
    "parentRunId": Column("parent_run_id", "text"),
    "status": Column("status", "text"),
    "createdAt": Column("created_at", "ms"),
    "suspendedAt": Column("suspended_at", "ms"),
    "updatedAt": Column("updated_at", "ms"),
    "pendingCount": Column("pending_count", "int"),
    "version": Column("version", "int"),
    "claim.by": Column("claim_by", "text"),
    "claim.until": Column("claim_until", "ms"),
    "lastError": Column("last_error", "json"),
    "schemaVersion": Column("schema_version", "int"),
    "historyId": Column("history_id", "text"),
    "expiresAt": Column("expires_at", "ms"),
}
"""The document paths that are columns (``rows._run_row``), by path."""

CALLS = "toolCalls"
"""The path of the calls, one JSON column: conditions under it are applied by ``calls_match``."""

_NEVER = "0"
"""The fragment of a condition no row meets (as ``matches`` says of a value of another type)."""


def where(condition: Condition, columns: dict[str, Column] = COLUMNS) -> tuple[str, list[Any]]:
    """The SQL fragment and parameters selecting exactly the rows whose document ``condition``
    ``matches``, on the table whose paths ``columns`` maps (default: ``run_snapshots``'s):
    ``NoValue`` is ``IS NULL``; ``Equals`` holds only for a value of the column's type; datetimes
    compare as their UTC milliseconds, a sub-millisecond bound rounded the way that keeps the
    comparison exact (rows hold whole milliseconds).

    Raises:
        ValueError: ``condition`` names a path that is no column (``toolCalls...``: ``split``
            first), or a ``Length`` (no column holds a list).
    """
    params: list[Any] = []
    return _fragment(condition, params, columns), params


def oldest_expired(
    table: str, key: str, condition: Condition, columns: dict[str, Column], limit: int
) -> tuple[str, list[Any]]:
    """A ``DELETE`` of ``table``'s rows (primary key ``key``) meeting ``condition`` on ``columns``,
    the ``limit`` oldest by ``finished_at`` (its index), and its parameters.

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    sql, params = where(condition, columns)
    inner = f"SELECT {key} FROM {table} WHERE {sql} ORDER BY finished_at LIMIT ?"
    return f"DELETE FROM {table} WHERE {key} IN ({inner})", [*params, limit]


def _fragment(condition: Condition, params: list[Any], columns: dict[str, Column]) -> str:
    match condition:
        case Equals(path, value):
            column = _column(path, columns)
            kind = column.kind
            if (kind == "text" and type(value) is str) or (kind == "int" and type(value) is int):
                params.append(value)
                return f"{column.name} = ?"
            return _NEVER
        case NoValue(path):
            return f"{_column(path, columns).name} IS NULL"
        case Before(path, value):
            return _compared(_column(path, columns), "<", _ceil_ms(value), params)
        case AtMost(path, value):
            return _compared(_column(path, columns), "<=", _ms(value), params)
        case Length(path, _):
            raise ValueError(f"no column holds the list {path!r}")
        case AllOf():
            return _joined(_flat(condition, AllOf), " AND ", "1", params, columns)
        case AnyOf():
            return _joined(_flat(condition, AnyOf), " OR ", _NEVER, params, columns)
    raise TypeError(f"not a condition: {condition!r}")


def _column(path: str, columns: dict[str, Column]) -> Column:
    column = columns.get(path)
    if column is None:
        raise ValueError(f"the document path {path!r} is no column of the table")
    return column


def _compared(column: Column, operator: str, ms: int, params: list[Any]) -> str:
    if column.kind != "ms":
        return _NEVER  # matches: only a datetime is before or at a datetime
    params.append(ms)
    return f"{column.name} {operator} ?"


def _ceil_ms(value: datetime) -> int:
    """``value`` in UTC ms rounded up: a whole millisecond ``m`` is before ``value`` iff ``m`` is
    before this."""
    ms = _ms(value)
    return ms + 1 if to_bson_precision(value) < value else ms


def _joined(
    conditions: Sequence[Condition], operator: str, empty: str, params: list[Any], columns: dict[str, Column]
) -> str:
    if not conditions:
        return empty
    parts = [_fragment(c, params, columns) for c in conditions]
    return parts[0] if len(parts) == 1 else "(" + operator.join(parts) + ")"


def split(condition: Condition) -> tuple[AllOf, AllOf]:
    """``condition`` as two conditions that together mean it: the one on columns (for ``where``)
    and the one on ``toolCalls`` (for ``calls_match``); each an ``AllOf`` of its conjuncts.

    Raises:
        ValueError: A conjunct (an ``AnyOf`` say) mixes paths of both.
    """
    on_columns: list[Condition] = []
    on_calls: list[Condition] = []
    for one in _flat(condition, AllOf):
        under = {_on_calls(path) for path in _paths(one)}
        if under == {True}:
            on_calls.append(one)
        elif under <= {False}:
            on_columns.append(one)
        else:
            raise ValueError(f"{one!r} mixes the calls with columns")
    return AllOf(tuple(on_columns)), AllOf(tuple(on_calls))


def calls_match(condition: Condition, calls: Sequence[ToolCallDocument]) -> bool:
    """Whether a run with ``calls`` (decoded, ``rows._calls``) meets ``condition`` on its
    ``toolCalls`` paths (``rules.matches``)."""
    return rules.matches(condition, {CALLS: list(calls)})


def _flat(condition: Condition, kind: type[AllOf] | type[AnyOf]) -> list[Condition]:
    """The parts ``kind`` joins in ``condition``, those of a nested ``kind`` taken in its place."""
    if not isinstance(condition, kind):
        return [condition]
    found: list[Condition] = []
    for one in condition.conditions:
        if isinstance(one, kind):
            found += _flat(one, kind)
        else:
            found.append(one)
    return found


def _paths(condition: Condition) -> list[str]:
    """The document paths ``condition`` names, in order (with repeats)."""
    if not isinstance(condition, AllOf | AnyOf):
        return [condition.path]
    found: list[str] = []
    for one in condition.conditions:
        found += _paths(one)
    return found


def _on_calls(path: str) -> bool:
    return path == CALLS or path.startswith(CALLS + ".")


__all__ = ["CALLS", "COLUMNS", "Column", "calls_match", "split", "where"]
