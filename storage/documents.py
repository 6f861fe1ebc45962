"""Typed shapes of the documents runsgate stores (docs/architecture.md "Snapshot document").

A suspended run is one document in the ``run_snapshots`` collection, ``_id`` = runId.
All datetimes are timezone-aware UTC, truncated to milliseconds (BSON's precision), so
the memory store and MongoDB compare and order them identically.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict

SCHEMA_VERSION = 7
"""Version of the snapshot document layout written by this code: 7 since a MongoDB snapshot carries
its place in the reviewers' queue (``queueAt``), which an older runsgate would not write (so it
must refuse the store); 6 since a MongoDB snapshot records
the changes of its waiting questions for the queue's kept counts (``questionsPending``), which an
older runsgate would not write (so it must refuse the store); 5 since a run records who
started it (``startedBy``); 4 since each tool call's
question carries its place in the call's life (``questionNumber``); 3 since each tool call's
``toolCallId`` is runsgate's own identity (the model's id in ``modelToolCallId``, the stored
history holding the identities); 2 since tool- and client-defined JSON is stored as text
(``storage.stored_json``). Versions 1 to 3 are still read: before 4 a call's question has no
number (the audit trail tells whether it is the call's first); before 5 no starter is known
(a rule's separation of duties then refuses every approval); before 3 ``toolCallId`` is the
model's id, also in the history."""

RunStatus = Literal["suspended", "resuming"]
"""Stored status: ``suspended`` while waiting (or after a failed continuation), ``resuming`` under a claim."""

DecisionKind = Literal["approved", "declined", "resumed"]

ExpiryAction = Literal["decline", "approve"]
"""What the sweeper records on a call still pending after its deadline (``ToolCallDocument.onExpiry``)."""

EXPIRY_DECIDER = "expiry"
"""The ``decidedBy`` of a decision the sweeper records after a call's deadline."""


class DecisionDocument(TypedDict):
    """A decision recorded on one pending tool call."""

    kind: DecisionKind
    decidedAt: datetime
    """UTC."""
    decidedBy: str | None
    reason: str | None
    """Decline reason passed to the model (``declined`` only)."""
    resumeData: Any
    """Resume data (``resumed`` only), already validated against the call's ``resumeSchema``."""
    idempotencyKey: str | None
    editedArgs: NotRequired[Any]
    """The arguments the approver replaced the model's with (``approved`` only; absent: none),
    already validated by the tool's own argument validator; the tool runs with them."""
    scopes: NotRequired[list[str]]
    """The per-tool scopes the decision was checked to hold (those the rules required of it;
    absent: none). A supervisor's decision forwarded to its sub-run carries them."""


class ApprovalDocument(TypedDict):
    """One approval of a call that needs several (``ToolCallDocument.approvals``)."""

    decidedBy: str | None
    """The approving principal's identity."""
    decidedAt: datetime
    """UTC."""


class DelegationDocument(TypedDict):
    """The sub-run call a supervisor's delegated call stands for (``ToolCallDocument.delegatedTo``)."""

    agentId: str
    """The sub-agent: its rules bind the call."""
    runId: str
    toolCallId: str


class ReviewClaimDocument(TypedDict):
    """Who is reviewing a pending question, for a bounded time (``ToolCallDocument.reviewClaim``):
    advice to other reviewers, never a lock."""

    by: str
    """The reviewing principal's identity."""
    at: datetime
    """UTC; when it claimed the question (kept when it claims it again)."""
    until: datetime
    """UTC; the review claim lapses after it."""


class ToolCallDocument(TypedDict):
    """One pending deferred tool call of a suspended run (GraphQL ``toolCalls``)."""

    toolCallId: str
    """The call's identity, unique for the run's whole life (schema version 3; before it, the
    model's id)."""
    modelToolCallId: NotRequired[str]
    """The id the model gave the call, which need not be unique (absent before schema version 3:
    ``toolCallId``)."""
    toolName: str
    args: Any
    """The model's arguments (approval suspensions); ``None`` for a tool that suspended itself."""
    requiresApproval: bool
    suspendPayload: Any
    """What the tool passed to ``suspend()``; ``None`` for approvals."""
    resumeSchema: dict[str, Any] | None
    """JSON Schema the resume data must satisfy, when the tool declared one."""
    decision: DecisionDocument | None
    delegated: NotRequired[bool]
    """True when the call stands for a sub-agent's pending call (supervisor runs)."""
    delegatedTo: NotRequired[DelegationDocument]
    """The sub-run call it stands for (absent in documents written before schema version 3)."""
    requiredScopes: NotRequired[list[str]]
    """The per-tool scopes approving (or resuming) the call needs, set when it suspends from the
    rules of the agent whose tool it is (absent: none)."""
    questionId: NotRequired[str]
    """Id of the question (decision point) the call waits on; new each time the same call
    suspends again. Absent in documents written before it existed: the ``toolCallId`` stands in."""
    questionNumber: NotRequired[int]
    """The question's place in the call's life: 1 for the call's first question, 2 for the one it
    asks after the first was decided, and so on (absent before schema version 4: unknown)."""
    answers: NotRequired[list[Any]]
    """Resume data already given to this call's earlier ``suspend()`` points, in order (absent: none)."""
    approved: NotRequired[bool]
    """True when this call was approved at an earlier decision point (absent: false)."""
    approvalMetadata: NotRequired[Any]
    """What the tool passed to ``ApprovalRequired(metadata=...)`` (approvals; absent: none)."""
    # deadlines (issue 18 part 2)
    expiresAt: NotRequired[datetime]
    """UTC deadline of the question the call waits on (``suspendedAt`` + the rule's
    ``expiresAfter``); absent: no deadline. The sweeper applies ``onExpiry`` after it."""
    onExpiry: NotRequired[ExpiryAction]
    """What the sweeper records after ``expiresAt`` (absent: ``decline``)."""
    # reminders and escalation (issue 45 part 3)
    reminded: NotRequired[bool]
    """True once the question's reminder was recorded (``RunStore.record_notice``; absent: not yet)."""
    escalated: NotRequired[bool]
    """True once the question was escalated (``RunStore.record_notice``; absent: not yet)."""
    # policy (issue 18 part 4): two-person approval
    approvalsRequired: NotRequired[int]
    """Distinct principals whose approval the call needs, set when it suspends (absent: 1)."""
    approvals: NotRequired[list[ApprovalDocument]]
    """The approvals recorded so far, in order, each principal once (absent: none); the decision
    is recorded with the ``approvalsRequired``-th."""
    editedArgs: NotRequired[Any]
    """The arguments an earlier decision point of this call approved with edits (absent: none);
    the call re-runs with them at every later decision point."""
    # the reviewers' queue (issue 45)
    reviewClaim: NotRequired[ReviewClaimDocument]
    """Who reviews the question now (absent: nobody); cleared by the decision's own write."""


class ClaimDocument(TypedDict):
    by: str
    """Id of the instance continuing the run."""
    until: datetime
    """UTC expiry; after it another instance may take the run over."""


class RunErrorDocument(TypedDict):
    type: str
    message: str
    at: datetime


class SnapshotDocument(TypedDict):
    """A suspended run as stored (collection ``run_snapshots``)."""

    _id: str
    """The runId."""
    agentId: str
    threadId: str | None
    resourceId: str | None
    parentRunId: str | None
    status: RunStatus
    createdAt: datetime
    suspendedAt: datetime
    updatedAt: datetime
    toolCalls: list[ToolCallDocument]
    pendingCount: int
    """Number of tool calls whose ``decision`` is still null; the run continues at 0."""
    version: int
    """Incremented on every write."""
    claim: ClaimDocument | None
    lastError: RunErrorDocument | None
    schemaVersion: int
    historyId: str
    """Key of the stored message history (never read by listing); a new id on every rewrite."""
    startedBy: NotRequired[str | None]
    """Identity of the principal who started the run (a sub-run: its supervisor's); ``None``:
    trusted in-process code. Absent before schema version 5: unknown."""
    # deadlines (issue 18 part 2)
    expiresAt: NotRequired[datetime]
    """Earliest ``expiresAt`` of the calls still pending (UTC); absent when none has a deadline
    (GraphQL: null). The stores derive it from ``toolCalls`` on every write (``earliest_deadline``)
    and index it; documents written before it existed have none."""


EventType = Literal[
    "started",
    "suspended",
    "decision",
    "resumed",
    "completed",
    "failed",
    "takeover",
    "expired",
    "approval",
    "reminded",
    "escalated",
    "reviewClaimed",
    "reviewReleased",
]

NoticeKind = Literal["reminded", "escalated"]
"""A deadline's notice before expiry (issue 45): the ``ToolCallDocument`` flag it sets once and
the event type it writes."""


class EventDocument(TypedDict):
    """One entry of the append-only audit log (collection ``run_events``)."""

    _id: str
    """Time-ordered: ``{UTC nanoseconds since the epoch, 20 digits}-{12 hex digits}`` (runtime's
    ``event_id``); the event feed reads the log in this order (``list_events_after``)."""
    runId: str
    agentId: str
    threadId: NotRequired[str | None]
    """The run's memory thread (events written before it was recorded lack it)."""
    resourceId: NotRequired[str | None]
    """The run's ``resourceId``: subscriptions, ``runEvents`` and ``SuspendedRun.events`` hide
    events of other resources by it, so access to the trail outlives the snapshot (absent in
    events written before it existed: only unrestricted principals see those)."""
    type: EventType
    at: datetime
    """UTC."""
    by: str | None
    """Principal or instance id that caused the event."""
    data: dict[str, Any]
    retentionFrom: NotRequired[datetime]
    """UTC, only in an event that finishes its run (``rules.FINISHING_EVENTS``): the run's events
    may be deleted ``RUNSGATE_EVENT_RETENTION`` seconds after it (``rules.events_expired``); the
    sweeper moves it later while the run or its supervisor's is still stored."""


class IdempotencyDocument(TypedDict):
    """The remembered answer of a mutation sent with an ``idempotencyKey``."""

    _id: str
    """``{agentId}:{operation}:{key}``."""
    fingerprint: str
    """Hash of the request's arguments; the same key with other arguments is refused."""
    result: dict[str, Any] | None
    """The outcome, once known; ``None`` while the first request is still running."""
    createdAt: datetime
    reservedBy: str | None
    """The request holding the key while ``result`` is ``None`` (``{instanceId}:{uuid}``);
    ``None`` in documents written before reservations were leases."""
    reservedUntil: datetime | None
    """UTC end of the holder's lease, renewed while its request runs; once it lapsed without a
    ``result``, the holder is presumed dead and a retry with the same fingerprint takes the key
    over. ``None``: no lease (held until completed or released)."""
    finishedAt: NotRequired[datetime]
    """UTC time the ``result`` was stored, absent while the request is in flight; keys stored
    before it get the time their store was first opened by a version that has it (a backfill).
    The sweeper deletes keys finished longer than ``RUNSGATE_IDEMPOTENCY_KEY_RETENTION`` ago."""


WebhookDeliveryStatus = Literal["pending", "delivered", "failed"]
"""``pending`` until the receiver answered 2xx (``delivered``) or the retry time ran out (``failed``)."""


class WebhookLeaseDocument(TypedDict):
    by: str
    """Id of the instance sending the delivery now."""
    until: datetime
    """UTC expiry; after it another instance may send the delivery (its sender died)."""


class WebhookDeliveryDocument(TypedDict):
    """One webhook message for one endpoint (collection or table ``webhook_deliveries``),
    derived from one event of the log (docs/webhooks.md)."""

    _id: str
    """``{eventId}.{endpointId}``: the ``webhook-id`` header, the same on every retry; sorts in
    the order of the events (newest first in listings)."""
    endpointId: str
    """Short hash of the endpoint's URL (``runtime.webhooks.messages.endpoint_id``)."""
    eventId: str
    agentId: str
    runId: str
    resourceId: str | None
    """The run's resource: who may list the delivery (``webhookDeliveries``)."""
    type: str
    """The webhook event type, e.g. ``run.suspended``."""
    body: str
    """The JSON body sent on every attempt, unchanged."""
    status: WebhookDeliveryStatus
    attempts: int
    """Attempts made so far (answered or not)."""
    createdAt: datetime
    """UTC; retries stop ``RUNSGATE_WEBHOOK_RETRY_FOR`` seconds after it."""
    nextAttemptAt: datetime
    """UTC; a pending delivery is not sent before it."""
    lastAttemptAt: datetime | None
    lastStatusCode: int | None
    """HTTP status of the last answer; ``None`` when there was none (timeout, refused)."""
    lastError: str | None
    """Why the last attempt failed (never the secret)."""
    finishedAt: datetime | None
    """UTC; when it was delivered or given up."""
    lease: WebhookLeaseDocument | None


def pending_delivery(
    delivery_id: str,
    endpoint_id: str,
    event: Mapping[str, Any],
    *,
    resource_id: str | None,
    type: str,
    body: str,
    now: datetime,
    due: datetime | None = None,
) -> WebhookDeliveryDocument:
    """A new delivery of ``event`` (its ``_id``, ``agentId`` and ``runId``) to ``endpoint_id``:
    pending, never attempted, created ``now`` and due at ``due`` (``None``: ``now``); UTC."""
    return {
        "_id": delivery_id,
        "endpointId": endpoint_id,
        "eventId": event["_id"],
        "agentId": event["agentId"],
        "runId": event["runId"],
        "resourceId": resource_id,
        "type": type,
        "body": body,
        "status": "pending",
        "attempts": 0,
        "createdAt": now,
        "nextAttemptAt": now if due is None else due,
        "lastAttemptAt": None,
        "lastStatusCode": None,
        "lastError": None,
        "finishedAt": None,
        "lease": None,
    }


class RunUpdateBatchDocument(TypedDict):
    """Updates of one continuation of a run, written together (collection or table ``run_updates``):
    what ``runUpdates`` subscribers on other instances read (docs/architecture.md "Run updates")."""

    _id: str
    """The id of its last update, ``{continuationId}.{8-digit sequence}`` or ``{continuationId}.end``:
    the batches holding updates after an update id are those whose ``_id`` sorts after it."""
    agentId: str
    runId: str
    at: datetime
    """UTC; when it was written (pruning reads it)."""
    updates: str
    """JSON text: the updates, in id order (``runtime.updates.run_updates``); the store never reads it."""


__all__ = [
    "EXPIRY_DECIDER",
    "SCHEMA_VERSION",
    "ApprovalDocument",
    "ClaimDocument",
    "DecisionDocument",
    "DecisionKind",
    "DelegationDocument",
    "EventDocument",
    "EventType",
    "ExpiryAction",
    "IdempotencyDocument",
    "NoticeKind",
    "ReviewClaimDocument",
    "RunErrorDocument",
    "RunStatus",
    "RunUpdateBatchDocument",
    "SnapshotDocument",
    "ToolCallDocument",
    "WebhookDeliveryDocument",
    "WebhookDeliveryStatus",
    "WebhookLeaseDocument",
    "pending_delivery",
]
