"""The errors every store raises: a run already stored, a store out of reach, a store of a newer
schema version."""

from __future__ import annotations


class DuplicateRunError(Exception):
    """A snapshot with this runId is already stored."""


class StoreUnavailableError(Exception):
    """The store could not be reached or answered with an error; nothing may be assumed written."""


class NewerSchemaError(Exception):
    """The store holds documents written by a newer runsgate (``schemaVersion`` above ours).

    Raised by ``open()``: reading or rewriting them could lose fields this version does not know.
    """

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the store holds run snapshots of schema version {found}, but this runsgate knows versions up "
            f"to {known}: upgrade runsgate (documents are never downgraded)"
        )
        self.found = found
        self.known = known


__all__ = ["DuplicateRunError", "NewerSchemaError", "StoreUnavailableError"]
