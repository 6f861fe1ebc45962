"""The commands a MongoDB client sends, recorded through PyMongo's command monitoring, to explain
each query the store makes exactly as it made it (``test_explain.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pymongo import monitoring

from ._null_conditions import conditions

READS = ("find", "aggregate")
WRITES = ("update", "delete", "findAndModify")


@dataclass(frozen=True)
class Sent:
    """One query: a read command as sent (``command``), or the condition of a write."""

    name: str
    """The command's name (``find``, ``aggregate``, ``update``...)."""
    collection: str
    command: Mapping[str, Any]
    """For a read, the command to explain (without its ``$``-fields, ``lsid``...); for a write, a
    ``find`` with the write's condition, since FerretDB 2.5 explains no update, findAndModify or
    delete."""


class SentCommands(monitoring.CommandListener):
    """Records each read and each write condition sent while ``recording()`` runs (not nested)."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._recording = False

    @contextmanager
    def recording(self) -> Iterator[list[Sent]]:
        self.sent = []
        self._recording = True
        try:
            yield self.sent
        finally:
            self._recording = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if not self._recording or event.command_name not in (*READS, *WRITES):
            return
        collection = str(event.command[event.command_name])
        if event.command_name in READS:
            keep = {k: v for k, v in event.command.items() if k in _READ_FIELDS[event.command_name]}
            self.sent.append(Sent(event.command_name, collection, keep))
            return
        for condition in conditions(event.command_name, event.command):
            self.sent.append(Sent(event.command_name, collection, {"find": collection, "filter": condition}))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


_READ_FIELDS = {
    "find": {"find", "filter", "sort", "projection", "skip", "limit", "hint"},
    "aggregate": {"aggregate", "pipeline", "cursor", "hint"},
}

SENT = SentCommands()
monitoring.register(SENT)  # every client made from now on, the stores' own included
