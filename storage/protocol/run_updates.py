"""``RunUpdateLog``: batches of the updates of continuing runs, for ``runUpdates`` subscribers on
other instances."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from ..documents import RunUpdateBatchDocument


class RunUpdateLog(Protocol):
    """Batches of the updates of continuing runs (collection or table ``run_updates``), written by
    the instance continuing a run and read by ``runUpdates`` subscribers on the others. Not an
    audit trail: batches are pruned some time after they were written. Every method may raise
    ``StoreUnavailableError``."""

    async def append_run_updates(self, batch: RunUpdateBatchDocument) -> None:
        """Store one batch (its ``_id``, the id of its last update, is new)."""

    async def list_run_updates(
        self, agent_id: str, run_id: str, *, after: str | None, limit: int
    ) -> list[RunUpdateBatchDocument]:
        """The run's batches whose ``_id`` sorts strictly after ``after`` (``None``: all), in ``_id``
        order, at most ``limit``: since a batch is named by its last update, these hold every
        update after the update id ``after``.

        Raises:
            ValueError: ``limit`` is below 1.
        """
        ...

    async def prune_run_updates(self, *, before: datetime, limit: int) -> int:
        """Delete at most ``limit`` batches, of any run, written (``at``) before ``before`` (UTC).

        Returns:
            How many were deleted.
        """
        ...


__all__ = ["RunUpdateLog"]
