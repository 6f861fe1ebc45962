"""The writes of the store protocols, each one value: what a write changes and on which
conditions (``storage.rules``), named once here for every store. A write's conditions are plain
fields, made with it. The contract of each write is on its protocol method (``RunStore``,
``IdempotencyKeys``, ``WebhookDeliveries``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import rules
from ..documents import (
    ApprovalDocument,
    ClaimDocument,
    DecisionDocument,
    EventDocument,
    IdempotencyDocument,
    NoticeKind,
    ReviewClaimDocument,
    RunErrorDocument,
    RunUpdateBatchDocument,
    ToolCallDocument,
    WebhookDeliveryStatus,
    WebhookLeaseDocument,
)

Events = EventDocument | Sequence[EventDocument] | None
"""A write's ``event``: one event, several written in order, or none (``event_list``)."""


_made = object.__setattr__
"""``_made(write, name, value)``: set a field a frozen write derives from its others, once, as it
is made (``__post_init__``)."""


# -- idempotency keys ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyReservation:
    """An idempotency key reserved for the request ``by`` (``IdempotencyKeys.reserve_idempotency_key``,
    or ``RunStore.record_decision``'s ``key``), with a lease until ``until`` (``None``: no lease,
    held until completed or released); UTC datetimes."""

    key_id: str
    fingerprint: str
    now: datetime
    by: str | None = None
    until: datetime | None = None
    document: IdempotencyDocument = field(init=False)
    """The key's document when it is new: reserved, no result yet, created ``now`` (a store keeps
    its own copy)."""

    def __post_init__(self) -> None:
        document: IdempotencyDocument = {
            "_id": self.key_id,
            "fingerprint": self.fingerprint,
            "result": None,
            "createdAt": self.now,
            "reservedBy": self.by,
            "reservedUntil": self.until,
        }
        _made(self, "document", document)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyAnswer:
    """The answer of a reserved idempotency key, written while ``by`` holds it (``None``: whoever
    does) with ``finishedAt`` ``now`` (UTC): ``IdempotencyKeys.complete_idempotency_key``, or
    ``RunStore.delete_claimed``'s ``key``."""

    key_id: str
    result: dict[str, Any]
    now: datetime
    by: str | None = None


# -- runs ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionClaim:
    """The claim a decision takes with it when it decides the run's last pending call
    (``DecisionWrite.claim``), as ``RunStore.claim`` would take it.

    Attributes:
        by: The instance that will continue the run.
        until: When the claim lapses (UTC).
        version: The run's ``version`` as read when ``events`` were made: the claim is taken only
            if the run is still at it (``rules.last_pending``).
        events: The continuation's events (its ``resumed``), written after the decision's.
        updates: The continuation's first run-update batches (its ``resumed`` update), written
            with the claim as ``ClaimWrite.updates``.
    """

    by: str
    until: datetime
    version: int
    events: Sequence[EventDocument] = ()
    updates: Sequence[RunUpdateBatchDocument] = ()
    document: ClaimDocument = field(init=False)
    """The run's ``claim`` once taken (a store keeps its own copy)."""

    def __post_init__(self) -> None:
        _made(self, "document", {"by": self.by, "until": self.until})


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionWrite:
    """``RunStore.record_decision``: ``decision`` on call ``index`` of run ``run_id``, still the
    undecided ``tool_call_id`` waiting on ``question_id`` (``None``: a call stored before calls
    had one), at ``now`` (UTC), with ``event`` (the ``decision`` event) after
    ``preceding_events`` (the sweeper's ``expired``), and optionally the run's ``claim`` and an
    idempotency ``key``. The call's review claim ends with it; with ``claimant`` (a decision that
    takes the review claim as it decides), only while no other principal holds a live one.

    Derived: ``condition``, what the run must meet to be written at all (``rules.pending_call``;
    with ``claimant``, ``rules.review_claim_open``); ``claiming``, what it must meet besides for
    the write to claim it too (``rules.last_pending``; ``None`` without ``claim``); ``events``,
    the decision's events in order (``preceding_events``, then ``event``)."""

    agent_id: str
    run_id: str
    index: int
    tool_call_id: str
    question_id: str | None = None
    decision: DecisionDocument
    now: datetime
    event: EventDocument | None = None
    preceding_events: Sequence[EventDocument] = ()
    claim: DecisionClaim | None = None
    key: KeyReservation | None = None
    claimant: str | None = None
    condition: rules.AllOf = field(init=False)
    claiming: rules.AllOf | None = field(init=False)
    events: tuple[EventDocument, ...] = field(init=False)

    def __post_init__(self) -> None:
        pending = rules.pending_call(self.agent_id, self.run_id, self.index, self.tool_call_id, self.question_id)
        if self.claimant is not None:
            pending = rules.all_of(pending, rules.review_claim_open(self.index, self.claimant, self.now))
        _made(self, "condition", pending)
        _made(self, "claiming", None if self.claim is None else rules.last_pending(self.claim.version))
        _made(self, "events", (*self.preceding_events, *(() if self.event is None else (self.event,))))

    def claimed(self, run: Mapping[str, Any]) -> DecisionClaim | None:
        """``claim`` when the write claims ``run`` (a snapshot as read before it: it meets
        ``claiming``), else ``None``."""
        return self.claim if self.claiming is not None and rules.matches(self.claiming, run) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalWrite:
    """``RunStore.record_approval``: one more ``approval`` of call ``index`` (as ``DecisionWrite``
    names it), which held ``approvals_before`` approvals when read, and ``decision`` when it is
    the last one needed; ``event``: the ``approval`` event, then the ``decision`` event.

    The last approval ends the call's review claim, whoever holds it; another ends the one of
    ``ends_review_claim_of`` (its approver's), written only while that principal holds it, live or
    lapsed (``rules.review_claim_held``). ``claimant``: as ``DecisionWrite``'s."""

    agent_id: str
    run_id: str
    index: int
    tool_call_id: str
    question_id: str | None = None
    approval: ApprovalDocument
    approvals_before: int
    decision: DecisionDocument | None
    now: datetime
    event: Events = None
    ends_review_claim_of: str | None = None
    claimant: str | None = None
    condition: rules.AllOf = field(init=False)
    """What the run must meet (``rules.pending_call`` and ``rules.approvals_counted``; with
    ``ends_review_claim_of``, ``rules.review_claim_held``; with ``claimant``,
    ``rules.review_claim_open``)."""

    def __post_init__(self) -> None:
        conditions: list[rules.Condition] = [
            rules.pending_call(self.agent_id, self.run_id, self.index, self.tool_call_id, self.question_id),
            rules.approvals_counted(self.index, self.approvals_before),
        ]
        if self.ends_review_claim_of is not None:
            conditions.append(rules.review_claim_held(self.index, self.ends_review_claim_of))
        if self.claimant is not None:
            conditions.append(rules.review_claim_open(self.index, self.claimant, self.now))
        _made(self, "condition", rules.all_of(*conditions))

    def ends_review_claim(self) -> bool:
        """Whether the write clears the call's review claim: the last approval, or ``ends_review_claim_of``."""
        return self.decision is not None or self.ends_review_claim_of is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeWrite:
    """``RunStore.record_notice``: ``notice`` (a reminder or an escalation) of call ``index`` (as
    ``DecisionWrite`` names it), at ``now`` (UTC), with ``event`` (its ``reminded`` or
    ``escalated`` event)."""

    agent_id: str
    run_id: str
    index: int
    tool_call_id: str
    question_id: str | None
    notice: NoticeKind
    now: datetime
    event: EventDocument
    condition: rules.AllOf = field(init=False)
    """What the run must meet (``rules.pending_call`` and ``rules.notice_unsent``)."""

    def __post_init__(self) -> None:
        pending = rules.pending_call(self.agent_id, self.run_id, self.index, self.tool_call_id, self.question_id)
        _made(self, "condition", rules.all_of(pending, rules.notice_unsent(self.index, self.notice)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewClaimWrite:
    """``ReviewQueueStore.record_review_claim``: set ``claim`` (``None``: clear it) on call
    ``index`` (as ``DecisionWrite`` names it) of a run still at ``version``, at ``now`` (UTC), with
    ``event`` (its ``reviewClaimed`` or ``reviewReleased`` event)."""

    agent_id: str
    run_id: str
    index: int
    tool_call_id: str
    question_id: str | None
    version: int
    claim: ReviewClaimDocument | None
    now: datetime
    event: EventDocument
    condition: rules.AllOf = field(init=False)
    """What the run must meet (``rules.review_claim_write``)."""

    def __post_init__(self) -> None:
        condition = rules.review_claim_write(
            self.agent_id, self.run_id, self.index, self.tool_call_id, self.question_id, self.version
        )
        _made(self, "condition", condition)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimWrite:
    """``RunStore.claim``: run ``run_id`` claimed by ``by`` until ``until`` at ``now`` (UTC), with
    ``events`` (its ``takeover`` and ``resumed``) and ``updates``; with ``version``, only while the
    run is at it."""

    agent_id: str
    run_id: str
    by: str
    until: datetime
    now: datetime
    events: Sequence[EventDocument] = ()
    version: int | None = None
    updates: Sequence[RunUpdateBatchDocument] = ()
    condition: rules.AllOf = field(init=False)
    """What the run must meet (``rules.owned`` and ``rules.claimable``)."""
    document: ClaimDocument = field(init=False)
    """The run's ``claim`` once taken (a store keeps its own copy)."""

    def __post_init__(self) -> None:
        claimable = rules.claimable(self.now, self.version)
        _made(self, "condition", rules.all_of(rules.owned(self.agent_id, self.run_id), claimable))
        _made(self, "document", {"by": self.by, "until": self.until})


@dataclass(frozen=True, slots=True, kw_only=True)
class _WhileHeld:
    """A write of run ``run_id`` made only while ``by`` holds its claim."""

    agent_id: str
    run_id: str
    by: str
    condition: rules.AllOf = field(init=False)
    """What the run must meet (``rules.held``)."""

    def __post_init__(self) -> None:
        _made(self, "condition", rules.held(self.agent_id, self.run_id, self.by))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRenewal(_WhileHeld):
    """``RunStore.renew_claim``: the claim ``by`` holds on the run extended to ``until`` (UTC)."""

    until: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedReplacement(_WhileHeld):
    """``RunStore.replace_claimed``: the claimed run suspended again at ``now`` (UTC) with
    ``tool_calls`` and ``history`` (stored under the new ``history_id``), ``event`` and ``updates``."""

    tool_calls: list[ToolCallDocument]
    history: bytes
    history_id: str
    now: datetime
    event: Events = None
    updates: Sequence[RunUpdateBatchDocument] = ()
    pending_count: int = field(init=False)
    """The run's ``pendingCount`` (``rules.pending_count``)."""
    expires_at: datetime | None = field(init=False)
    """The run's ``expiresAt`` (``rules.earliest_deadline``)."""

    def __post_init__(self) -> None:
        _WhileHeld.__post_init__(self)
        _made(self, "pending_count", rules.pending_count(self.tool_calls))
        _made(self, "expires_at", rules.earliest_deadline(self.tool_calls))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedDeletion(_WhileHeld):
    """``RunStore.delete_claimed``: the claimed run finished, deleted with ``event`` (its
    ``completed``), ``updates`` and the answer of its request's idempotency ``key``."""

    event: EventDocument | None = None
    updates: Sequence[RunUpdateBatchDocument] = ()
    key: KeyAnswer | None = None
    events: tuple[EventDocument, ...] = field(init=False)
    """The events written: ``event``, if any."""

    def __post_init__(self) -> None:
        _WhileHeld.__post_init__(self)
        _made(self, "events", () if self.event is None else (self.event,))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRelease(_WhileHeld):
    """``RunStore.release_claim``: the claimed run back to ``suspended`` at ``now`` (UTC) with
    ``error``, ``event`` (its ``failed``) and ``updates``; with ``history``, stored under the new
    ``history_id`` first.

    Raises:
        ValueError: ``history`` without ``history_id``.
    """

    error: RunErrorDocument
    now: datetime
    history: bytes | None = None
    history_id: str | None = None
    event: EventDocument | None = None
    updates: Sequence[RunUpdateBatchDocument] = ()

    def __post_init__(self) -> None:
        if self.history is not None and self.history_id is None:
            raise ValueError("a new history needs a new history_id")
        _WhileHeld.__post_init__(self)


# -- webhook deliveries ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryLease:
    """``WebhookDeliveries.claim_webhook_deliveries``: up to ``limit`` deliveries due at ``now``
    leased to ``by`` until ``until`` (UTC); with ``endpoint_id``, only to that endpoint; none to
    an endpoint of ``other_than``."""

    by: str
    until: datetime
    now: datetime
    limit: int
    endpoint_id: str | None = None
    other_than: Collection[str] = ()

    def document(self) -> WebhookLeaseDocument:
        """A leased delivery's ``lease``."""
        return {"by": self.by, "until": self.until}


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookAttempt:
    """``WebhookDeliveries.finish_webhook_attempt``: one attempt at ``at`` (UTC) of delivery
    ``delivery_id`` leased to ``by``, its answer's ``status_code`` and ``error``, and what follows:
    ``status`` and ``next_attempt_at``."""

    delivery_id: str
    by: str
    status: WebhookDeliveryStatus
    at: datetime
    next_attempt_at: datetime
    status_code: int | None
    error: str | None

    def finished_at(self) -> datetime | None:
        """The delivery's ``finishedAt`` after the attempt (``rules.finished_at``)."""
        return rules.finished_at(self.status, self.at)

    def changes(self) -> dict[str, Any]:
        """The fields the attempt sets on the delivery document (``attempts`` also grows by one):
        ``finishedAt`` per ``finished_at``, the lease released."""
        return {
            "status": self.status,
            "lastAttemptAt": self.at,
            "nextAttemptAt": self.next_attempt_at,
            "lastStatusCode": self.status_code,
            "lastError": self.error,
            "finishedAt": self.finished_at(),
            "lease": None,
        }
