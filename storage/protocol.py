"""The store protocols: where suspended runs live (docs/storage.md "Stores").

``RunStore`` (snapshots and histories), ``EventLog`` (the audit log), ``IdempotencyKeys``,
``WebhookDeliveries`` and ``RunUpdateLog`` (batches of ``runUpdates``), one per aggregate;
``SnapshotStore`` is all five plus open, close and
ping, implemented by one class per store. Every method naming a run is scoped by ``agent_id``;
a write that changes a run takes the event recording it (``event=``), one unit of work
(docs/modules.md).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .documents import (
    ApprovalDocument,
    DecisionDocument,
    EventDocument,
    IdempotencyDocument,
    RunErrorDocument,
    RunUpdateBatchDocument,
    SnapshotDocument,
    ToolCallDocument,
    WebhookDeliveryDocument,
    WebhookDeliveryStatus,
)


@dataclass(frozen=True, kw_only=True)
class RunFilter:
    """Listing filters (as Mastra's ``listSuspendedRuns()``); both date bounds are inclusive, on ``createdAt``."""

    thread_id: str | None = None
    resource_id: str | None = None
    from_date: datetime | None = None
    """UTC; runs created at or after it."""
    to_date: datetime | None = None
    """UTC; runs created at or before it."""
    expires_before: datetime | None = None
    """UTC; runs whose ``expiresAt`` (earliest deadline of a pending call) is before it; runs
    without a deadline never match."""
    resource_ids: frozenset[str] | None = None
    """Access restriction, not a client's filter: only runs whose ``resourceId`` is one of these
    (runs without one never match); ``None`` for no restriction. Applied inside the query, so
    pages and counts only ever see the allowed runs."""


@dataclass(frozen=True)
class SortKey:
    """Position of a run in listing order (``createdAt`` descending, then runId descending)."""

    created_at: datetime
    run_id: str


def sort_key(doc: SnapshotDocument) -> SortKey:
    """The listing-order key of a stored run."""
    return SortKey(doc["createdAt"], doc["_id"])


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


def event_list(event: EventDocument | Sequence[EventDocument] | None) -> list[EventDocument]:
    """A write's ``event=`` (one event, several written in order, or none) as a list."""
    if event is None:
        return []
    if isinstance(event, dict):
        return [event]
    return list(event)


class RunStore(Protocol):
    """Suspended runs (snapshots) and their message histories: reads and conditional writes by key.

    Every method may raise ``StoreUnavailableError`` (nothing may be assumed written).
    """

    # -- reading -----------------------------------------------------------------------------
    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        """The run, or ``None`` when it does not exist or belongs to another agent."""

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        """Runs by id in one query, any agent, in no particular order; missing ids are skipped."""

    async def list_runs(
        self,
        agent_id: str,
        run_filter: RunFilter,
        *,
        limit: int | None = None,
        skip: int = 0,
        after: SortKey | None = None,
        before: SortKey | None = None,
        from_end: bool = False,
    ) -> list[SnapshotDocument]:
        """Runs of ``agent_id`` matching ``run_filter``, newest first, never reading histories.

        Args:
            limit: At most this many runs; ``None`` for all.
            skip: Runs to skip first (``page * perPage``); not used with ``from_end``.
            after: Only runs strictly after this key in listing order.
            before: Only runs strictly before this key in listing order.
            from_end: Take the ``limit`` runs closest to the end of the range (Relay ``last``);
                the result is still newest first.
        """
        ...

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        """Number of runs of ``agent_id`` matching ``run_filter`` (``totalCount``)."""
        ...

    async def load_history(self, agent_id: str, run_id: str) -> bytes | None:
        """The run's message history (pydantic-ai JSON bytes), or ``None`` if the run is gone."""

    # -- writing -----------------------------------------------------------------------------
    async def insert(
        self,
        snapshot: SnapshotDocument,
        history: bytes,
        *,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> None:
        """Store a new suspended run, and ``event`` (its ``suspended`` event, and the ``decision``
        events of calls an approval policy decided) with it as one unit of work (module
        docstring). Raises ``DuplicateRunError`` (nothing written)."""

    async def record_decision(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        decision: DecisionDocument,
        now: datetime,
        event: EventDocument | None = None,
        preceding_events: Sequence[EventDocument] = (),
    ) -> SnapshotDocument | None:
        """Set ``toolCalls[index].decision`` if the run is suspended and that call is still pending.

        One conditional update: the run exists, belongs to ``agent_id``, has status
        ``suspended``, and ``toolCalls[index]`` has ``tool_call_id``, the ``questionId``
        ``question_id`` (``None``: it has none, as in documents written before questions had ids)
        and no decision, so a decision read for a question the call no longer waits on is never
        recorded on the next one. Returns the
        updated run, or ``None`` when any condition failed (nothing was written, ``event``
        neither). ``event`` (the ``decision`` event) is written with the update as one unit of work,
        after ``preceding_events`` (the sweeper's ``expired`` event), in that order. The run's
        ``expiresAt`` becomes the earliest deadline of the calls still pending (``earliest_deadline``).
        """

    async def record_approval(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        approval: ApprovalDocument,
        approvals_before: int,
        decision: DecisionDocument | None,
        now: datetime,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> SnapshotDocument | None:
        """Append ``approval`` to ``toolCalls[index].approvals`` (two-person approval), and with
        ``decision`` (the last approval needed) also set the call's decision.

        One conditional update, on the conditions of ``record_decision`` plus: the call has
        exactly ``approvals_before`` approvals (absent counts as none), so of two approvals read
        on the same state only one is recorded, and each approval is recorded once. Without
        ``decision`` ``pendingCount`` is unchanged; with it, it drops by one. Returns the updated
        run, or ``None`` when any condition failed (nothing written). ``event`` (the ``approval``
        event, then the ``decision`` event) is written with the update as one unit of work.
        """

    async def claim(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        until: datetime,
        now: datetime,
        events: Sequence[EventDocument] = (),
        version: int | None = None,
    ) -> SnapshotDocument | None:
        """Take the claim to continue a run whose every call is decided.

        Succeeds when the run is ``suspended`` with ``pendingCount == 0``, or ``resuming`` with a
        claim that expired before ``now`` (takeover). Sets status ``resuming`` and the claim.
        ``events`` (the continuation's ``takeover`` and ``resumed``, in order) are written with
        the claim as one unit of work, only when it succeeds: every claim is in the log before
        anything else (a renewal, another instance's takeover of it) can happen to it. With
        ``version``, the run must also still be at that ``version`` (the one the events were made
        from: a takeover's ``previousClaim`` is then the claim it replaces).
        Returns the claimed run, or ``None`` (nothing written).
        """

    async def renew_claim(self, agent_id: str, run_id: str, *, by: str, until: datetime) -> bool:
        """Extend a claim still held by ``by``; ``False`` if it was lost (nothing written)."""

    async def replace_claimed(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        tool_calls: list[ToolCallDocument],
        history: bytes,
        history_id: str,
        now: datetime,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> SnapshotDocument | None:
        """The claimed run suspended again: store its new pending calls and history, and ``event``
        (its ``suspended`` event, and the ``decision`` events of calls an approval policy decided)
        with them as one unit of work. ``pendingCount`` counts the calls without a decision.

        ``history_id`` must be new: the history is written under it before the snapshot points
        to it, so a lost claim never overwrites the history another instance relies on.

        Only while ``by`` holds the claim. Status returns to ``suspended``, the claim and
        ``lastError`` are cleared. Returns the new document, or ``None`` if the claim was lost.
        """

    async def delete_claimed(self, agent_id: str, run_id: str, *, by: str, event: EventDocument | None = None) -> bool:
        """The claimed run finished: delete its snapshot and history, only while ``by`` holds the
        claim, and write ``event`` (its ``completed`` event) as one unit of work with the deletion:
        the run is never gone without its ``completed`` event. ``False`` (nothing written) if the
        claim was lost."""

    async def release_claim(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        error: RunErrorDocument,
        now: datetime,
        history: bytes | None = None,
        history_id: str | None = None,
        event: EventDocument | None = None,
    ) -> SnapshotDocument | None:
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


class EventLog(Protocol):
    """The append-only audit log of runs (collection or table ``run_events``), kept after a run is
    deleted; the source of the ``suspendedRunEvents`` subscription. Every method may raise
    ``StoreUnavailableError``."""

    async def append_event(self, event: EventDocument) -> None:
        """Append to the event log (collection ``run_events``); never updated or deleted."""

    async def list_events(self, agent_id: str, run_id: str) -> list[EventDocument]:
        """Events of one run, oldest first; kept after the snapshot is deleted."""
        ...

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        """Events of several runs of ``agent_id`` in one query, oldest first (DataLoader batches).

        Args:
            resource_ids: Access restriction as ``RunFilter.resource_ids``: only events whose
                ``resourceId`` is one of these (events written without one never match).
        """
        ...

    async def list_events_after(
        self, agent_id: str, after_event_id: str | None, limit: int, *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        """Events of ``agent_id`` whose ``_id`` sorts strictly after ``after_event_id``, in ``_id`` order.

        Event ids are time-ordered strings (``EventDocument._id``), so this is a keyset walk of the
        log in the order events were created, all runs of the agent together (the subscription
        feed polls it). ``None`` starts from the oldest event.

        Args:
            agent_id: Only this agent's events.
            after_event_id: Exclusive lower bound on ``_id`` (compared as strings), or ``None``.
            limit: At most this many events; ask again after the last one for more.
            resource_ids: Access restriction as ``RunFilter.resource_ids``: only events whose
                ``resourceId`` is one of these (a subscriber's replay reads only what it may see).

        Raises:
            ValueError: ``limit`` is below 1.
        """
        ...

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Finish the units of work a dead process left half done: append the events recorded
        inside snapshots (at or before ``before``) but not yet in the log, and finish what they
        record (a run whose ``completed`` event was pending is deleted). Only MongoDB-wire stores
        ever have any (SQLite and memory write both at once); the sweeper calls it.

        Returns:
            How many snapshots were completed (at most ``limit``).
        """
        ...


class IdempotencyKeys(Protocol):
    """Answers remembered for idempotency keys (``key_id`` = ``{agentId}:{operation}:{key}``).
    Every method may raise ``StoreUnavailableError``."""

    async def reserve_idempotency_key(
        self,
        key_id: str,
        fingerprint: str,
        now: datetime,
        *,
        by: str | None = None,
        until: datetime | None = None,
    ) -> IdempotencyDocument | None:
        """Reserve the key for the request ``by``, with a lease until ``until`` (UTC; ``None``:
        no lease, held until completed or released).

        Returns ``None`` when ``by`` now holds the key: it was new, or it had no result, the same
        ``fingerprint`` and a lease that lapsed before ``now`` (its request died or could not
        release it), in which case it is taken over by one conditional write, so of several
        retries only one gets it. Otherwise the existing document (a result to replay, a request
        in flight, or other arguments).
        """

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        """Extend the lease of a reservation ``by`` still holds (no result yet); ``False`` if it
        was taken over or is gone."""

    async def complete_idempotency_key(self, key_id: str, result: dict[str, Any], *, by: str | None = None) -> None:
        """Store the answer given for a reserved key, only while ``by`` holds it (``None``: whoever
        does); a holder whose key was taken over writes nothing."""

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        """Forget a reserved key whose request failed unexpectedly, so it can be retried; only
        while ``by`` holds it (``None``: whoever does), never once it has a result."""


class WebhookDeliveries(Protocol):
    """Webhook deliveries (``webhook_deliveries``) and the per-endpoint cursors over the event log
    they are derived from (``webhook_cursors``); docs/webhooks.md "Delivery guarantees".

    A delivery is never written on the decision path: the dispatcher reads the event log after a
    cursor and adds the deliveries it derives (``add_webhook_deliveries``, insert-if-absent by id,
    so reading an event twice adds it once), then advances the cursor. Sending is guarded by a
    lease, as continuing a run is by a claim: ``claim_webhook_deliveries`` hands each due delivery
    to one instance at a time, and another takes it over once the lease expired. Every method may
    raise ``StoreUnavailableError``.
    """

    async def webhook_cursor(self, cursor_id: str) -> str | None:
        """The event id up to which ``cursor_id`` (``{endpointId}:{agentId}``) read the log, or ``None``."""

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        """Move the cursor to ``event_id`` if that is after where it stands (never backwards;
        created when missing)."""

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        """Insert the deliveries whose ``_id`` is not stored yet (the others are left as they are).

        Returns:
            How many were new.
        """
        ...

    async def claim_webhook_deliveries(
        self,
        *,
        by: str,
        until: datetime,
        now: datetime,
        limit: int,
        endpoint_id: str | None = None,
        other_than: Collection[str] = (),
    ) -> list[WebhookDeliveryDocument]:
        """Lease up to ``limit`` due deliveries to ``by`` until ``until``: those ``pending`` whose
        ``nextAttemptAt`` is at or before ``now`` and that nobody holds (no lease, or one that
        expired before ``now``). Each is leased by one conditional write, so two instances never
        both get one. Oldest ``nextAttemptAt`` first; returns the leased documents. With
        ``endpoint_id``, only deliveries to that endpoint; none to an endpoint of ``other_than``."""
        ...

    async def finish_webhook_attempt(
        self,
        delivery_id: str,
        *,
        by: str,
        status: WebhookDeliveryStatus,
        at: datetime,
        next_attempt_at: datetime,
        status_code: int | None,
        error: str | None,
    ) -> bool:
        """Record one attempt of a delivery ``by`` holds: ``attempts`` + 1, ``lastAttemptAt`` ``at``,
        the answer's ``status_code`` and ``error``, the new ``status`` (``finishedAt`` ``at`` unless
        ``pending``) and ``next_attempt_at``; the lease is released. ``False`` (nothing written)
        when ``by`` no longer holds it or it is no longer pending."""
        ...

    async def list_webhook_deliveries(
        self,
        *,
        status: WebhookDeliveryStatus | None,
        resource_ids: frozenset[str] | None,
        limit: int,
        after: str | None = None,
    ) -> list[WebhookDeliveryDocument]:
        """Deliveries newest first (``_id`` descending), for ``webhookDeliveries``.

        Args:
            status: Only deliveries in this status; ``None`` for all.
            resource_ids: Access restriction as ``RunFilter.resource_ids``: only deliveries about
                runs of these resources (``None``: no restriction).
            limit: At most this many.
            after: Only deliveries whose ``_id`` sorts strictly before this one (the next page).
        """
        ...


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


class SnapshotStore(RunStore, EventLog, IdempotencyKeys, WebhookDeliveries, RunUpdateLog, Protocol):
    """A whole store: runs and histories, the event log, idempotency keys, webhook deliveries and
    run updates, in one place.

    The runtime's components take only the part they use (``Journal`` the ``EventLog``,
    ``IdempotencyGuard`` the ``IdempotencyKeys``, ...); the server opens and closes the whole.
    """

    async def open(self) -> None:
        """Connect and prepare (tables, indexes), then read the stored schema version.

        Raises:
            StoreUnavailableError: The store cannot be reached, opened or written.
            NewerSchemaError: The store holds documents of a ``schemaVersion`` above ``SCHEMA_VERSION``.
        """

    async def close(self) -> None:
        """Release connections."""

    async def ping(self) -> None:
        """Raise ``StoreUnavailableError`` unless the store answers now (``/readyz``)."""


__all__ = [
    "DuplicateRunError",
    "EventLog",
    "IdempotencyKeys",
    "NewerSchemaError",
    "RunFilter",
    "RunStore",
    "RunUpdateLog",
    "SnapshotStore",
    "SortKey",
    "StoreUnavailableError",
    "WebhookDeliveries",
    "event_list",
    "sort_key",
]
