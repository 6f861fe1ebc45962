"""``RunStore``: suspended runs (snapshots) and their message histories, read by key and written
by conditional updates."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from ..documents import SnapshotDocument
from . import writes
from .filters import EVERY_RUN, RunFilter, RunPage


class RunStore(Protocol):
    """Suspended runs (snapshots) and their message histories: reads and conditional writes by key.

    Every method may raise ``StoreUnavailableError`` (nothing may be assumed written).

    Updates with a claim's writes: ``claim``, ``replace_claimed``, ``delete_claimed``,
    ``release_claim`` (and ``record_decision``'s ``claim.updates``) take ``updates``, run-update
    batches (``RunUpdateLog.append_run_updates``) written in order only when the write succeeds:
    in its transaction where the store has them (memory, SQLite), else after it (MongoDB: each
    batch one insert, a failure logged, as run updates are progress only).
    """

    # -- reading -----------------------------------------------------------------------------
    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        """The run, or ``None`` when it does not exist or belongs to another agent."""

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        """Runs by id in one query, any agent, in no particular order; missing ids are skipped."""

    async def list_runs(
        self, agent_id: str, run_filter: RunFilter, window: RunPage = EVERY_RUN
    ) -> list[SnapshotDocument]:
        """The runs of ``window`` among those of ``agent_id`` matching ``run_filter``,
        newest first, never reading histories."""
        ...

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        """Number of runs of ``agent_id`` matching ``run_filter`` (``totalCount``)."""
        ...

    async def load_history(self, agent_id: str, run_id: str, *, history_id: str | None = None) -> bytes | None:
        """The run's message history (pydantic-ai JSON bytes), or ``None`` if the run is gone.
        ``history_id``: the run's ``historyId`` as read by the holder of its claim (a history is
        never rewritten under its id): a store may read that history without reading the run."""

    # -- writing -----------------------------------------------------------------------------
    async def insert(self, snapshot: SnapshotDocument, history: bytes, *, event: writes.Events = None) -> None:
        """Store a new suspended run, and ``event`` (its ``suspended`` event, and the ``decision``
        events of calls an approval policy decided) with it as one unit of work (``storage.protocol``).
        Raises ``DuplicateRunError`` (nothing written)."""

    async def record_decision(self, write: writes.DecisionWrite) -> SnapshotDocument | None:
        """Set ``toolCalls[index].decision`` if the run is suspended and that call still waits on
        ``question_id`` with no decision (``write.condition``, ``rules.pending_call``; ``None``:
        a document written before questions had ids). One conditional update; returns the updated
        run, or ``None`` when a condition failed (nothing written). ``event`` is written with it
        as one unit of work, after ``preceding_events``; ``expiresAt`` becomes the earliest
        deadline of the calls still pending.

        With ``claim``, when the run also meets ``write.claiming`` (``rules.last_pending``), the
        same write claims it (status ``resuming``, ``claim.by`` until ``claim.until``) and writes
        ``claim.events`` after the decision's; the returned status tells which happened. With
        ``key`` (only where ``reserves_with_decisions``), the same write reserves the idempotency
        key once the run meets the conditions. Raises ``IdempotencyKeyTakenError`` (nothing
        written) when another request holds or answered the key.
        """

    async def record_approval(self, write: writes.ApprovalWrite) -> SnapshotDocument | None:
        """Append ``approval`` to ``toolCalls[index].approvals`` (two-person approval), and with
        ``decision`` (the last approval needed) also set the call's decision.

        One conditional update (``write.condition``), on the conditions of ``record_decision`` plus: the call has
        exactly ``approvals_before`` approvals (absent counts as none), so of two approvals read
        on the same state only one is recorded, and each approval is recorded once. Without
        ``decision`` ``pendingCount`` is unchanged; with it, it drops by one. The call's review
        claim is cleared when ``write.ends_review_claim()``. Returns the updated
        run, or ``None`` when any condition failed (nothing written). ``event`` (the ``approval``
        event, then the ``decision`` event) is written with the update as one unit of work.
        """

    async def record_notice(self, write: writes.NoticeWrite) -> SnapshotDocument | None:
        """Set ``toolCalls[index][notice]`` to ``True`` (a reminder or an escalation), once.

        One conditional update (``write.condition``: ``rules.pending_call`` and
        ``rules.notice_unsent``), so of several instances noticing the same deadline only one
        records it. ``event`` is written with the update as one unit of work. Returns the updated
        run, or ``None`` when any condition failed (nothing written)."""

    async def claim(self, write: writes.ClaimWrite) -> SnapshotDocument | None:
        """Take the claim to continue a run whose every call is decided.

        Succeeds when the run is ``suspended`` with ``pendingCount == 0``, or ``resuming`` with a
        claim that expired before ``now`` (takeover). Sets status ``resuming`` and the claim.
        ``events`` (the continuation's ``takeover`` and ``resumed``, in order) are written with
        the claim as one unit of work, only when it succeeds: every claim is in the log before
        anything else (a renewal, another instance's takeover of it) can happen to it. With
        ``version``, the run must also still be at that ``version`` (the one the events were made
        from: a takeover's ``previousClaim`` is then the claim it replaces). ``updates``: run-update
        batches written only when it succeeds (``Updates with a claim's writes`` below).
        Returns the claimed run, or ``None`` (nothing written).
        """

    async def renew_claim(self, write: writes.ClaimRenewal) -> bool:
        """Extend the claim to ``until`` while ``by`` still holds it (``write.condition``);
        ``False`` if it was lost (nothing written)."""

    async def replace_claimed(self, write: writes.ClaimedReplacement) -> SnapshotDocument | None:
        """The claimed run suspended again: store its new pending calls and history, and ``event``
        (its ``suspended`` event, and the ``decision`` events of calls an approval policy decided)
        with them as one unit of work. ``pendingCount`` counts the calls without a decision.

        ``history_id`` must be new: the history is written under it before the snapshot points
        to it, so a lost claim never overwrites the history another instance relies on.

        Only while ``by`` holds the claim. Status returns to ``suspended``, the claim and
        ``lastError`` are cleared. Returns the new document, or ``None`` if the claim was lost.
        """

    async def delete_claimed(self, write: writes.ClaimedDeletion) -> bool:
        """The claimed run finished: delete its snapshot and history, only while ``by`` holds the
        claim, and write ``event`` (its ``completed`` event) as one unit of work with the deletion:
        the run is never gone without its ``completed`` event. ``False`` (nothing written) if the
        claim was lost. ``key``: the answer of the idempotency key whose request finished the run,
        written only if the deletion is, in its transaction (SQLite; memory in the same step),
        else right after it (MongoDB: a failure raises, the run being gone)."""

    async def release_claim(self, write: writes.ClaimRelease) -> SnapshotDocument | None:
        """Continuing failed: back to ``suspended`` with decisions kept and ``lastError`` set, and
        ``event`` (its ``failed`` event) written with that change as one unit of work.

        With ``history`` (and a new ``history_id``), the run's history is replaced first, as in
        ``replace_claimed``: the continuation got as far as running the decided tools, and their
        results must not be lost (so a retry does not run them again). Only while ``by`` holds
        the claim; returns the new document, or ``None`` if the claim was lost.
        """

    async def list_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[SnapshotDocument]:
        """Runs, of any agent, whose every call is decided but that nobody is continuing.

        That is: ``resuming`` with a claim that expired before ``now`` (its instance died), or
        ``suspended`` with ``pendingCount == 0``, no ``lastError`` and ``updatedAt`` before
        ``idle_before`` (the deciding instance died before claiming). Failed runs
        (``lastError`` set) are left to ``retryRun``. At most ``limit``, least recently updated first.
        """

    async def list_expired_runs(self, *, now: datetime, limit: int) -> list[SnapshotDocument]:
        """Runs, of any agent, with a pending call whose deadline is at or before ``now``: their
        ``expiresAt`` is at or before it. Read through an index on ``expiresAt``, so the runs whose
        deadlines lie ahead are never read. At most ``limit``, earliest deadline first."""
        ...

    async def insert_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        """Bulk-insert new runs (data generator). Raises ``DuplicateRunError``."""


__all__ = ["RunStore"]
