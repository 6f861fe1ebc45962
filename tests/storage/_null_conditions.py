"""Watches the conditions a MongoDB client sends (PyMongo command monitoring) for comparisons
with null, which DocumentDB and MongoDB answer differently through an array index.

``{"toolCalls.0.decision": None}`` means "no decision" on MongoDB and FerretDB 1.24, and matches
every run on DocumentDB, whatever the decision holds; ``$eq``, ``$in``, ``$lte`` with null
likewise. A condition on "no value" is ``storage``'s ``no_value`` instead (docs/storage.md
"Conditions that mean the same on every engine"); ``WATCH`` records every comparison with null
that any client of this process sends while a block of ``WATCH.recording()`` runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pymongo import monitoring

COMPARISONS = frozenset({"$eq", "$ne", "$lt", "$lte", "$gt", "$gte"})
LISTS = frozenset({"$in", "$nin", "$all"})


def null_comparisons(condition: Any) -> list[str]:
    """Each comparison with null in a query condition, as ``path: operator``."""
    found: list[str] = []
    if not isinstance(condition, Mapping):
        return found
    for key, value in condition.items():
        if key in ("$and", "$or", "$nor"):
            for branch in value:
                found += null_comparisons(branch)
        elif not key.startswith("$"):
            found += _field(key, value)
    return found


def _field(path: str, value: Any) -> list[str]:
    if value is None:
        return [f"{path}: null"]
    if not (isinstance(value, Mapping) and value and all(str(k).startswith("$") for k in value)):
        return []  # an equality with a value (a document compared whole included)
    found: list[str] = []
    for operator, operand in value.items():
        if operator in COMPARISONS and operand is None:
            found.append(f"{path}: {operator} null")
        elif operator in LISTS and any(item is None for item in operand):
            found.append(f"{path}: {operator} [null]")
        elif operator == "$not":
            found += _field(path, operand)
        elif operator == "$elemMatch":
            found += [f"{path}.{inner}" for inner in null_comparisons(operand)]
    return found


def conditions(command_name: str, command: Mapping[str, Any]) -> list[Any]:
    """The query conditions of one command (its filters, ``q`` of each update or delete, ``$match``)."""
    if command_name in ("find", "count", "distinct"):
        return [command.get("filter", command.get("query"))]
    if command_name == "findAndModify":
        return [command.get("query")]
    if command_name in ("update", "delete"):
        return [one.get("q") for one in command.get("updates", command.get("deletes", []))]
    if command_name == "aggregate":
        return [stage["$match"] for stage in command.get("pipeline", []) if "$match" in stage]
    return []


class NullConditions(monitoring.CommandListener):
    """Records ``(command, comparison)`` for each comparison with null sent while recording."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []
        self._recording = False

    @contextmanager
    def recording(self) -> Iterator[list[tuple[str, str]]]:
        """Record during the block (not nested); yields the list of what is found, filled as
        commands are sent."""
        self.found = []
        self._recording = True
        try:
            yield self.found
        finally:
            self._recording = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if not self._recording:
            return
        for condition in conditions(event.command_name, event.command):
            for comparison in null_comparisons(condition):
                self.found.append((event.command_name, comparison))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


WATCH = NullConditions()
monitoring.register(WATCH)  # every client made from now on, the stores' own included
