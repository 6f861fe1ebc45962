"""The conditions and derived values every store applies, each defined once (docs/storage.md
"Rules, each once").

A condition is a small tree (``Equals``, ``NoValue``, ``Before``, ``AtMost``, ``Length``,
``AllOf``, ``AnyOf``) over a document's dotted paths (``"toolCalls.0.decision"``). ``matches``
gives its meaning, which the memory store uses as is; the SQLite store translates it to SQL and
the MongoDB store to a filter. No store owns this module, and it imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .documents import EventType, SnapshotDocument, ToolCallDocument, WebhookDeliveryStatus


@dataclass(frozen=True, slots=True)
class Equals:
    """``path`` holds ``value`` (never ``None``: a missing value is ``NoValue``)."""

    path: str
    value: str | int

    def __post_init__(self) -> None:
        if self.value is None:
            raise ValueError(f"Equals({self.path!r}, None): a missing value is NoValue")


@dataclass(frozen=True, slots=True)
class NoValue:
    """``path`` is missing or null."""

    path: str


@dataclass(frozen=True, slots=True)
class _Bound:
    """A bound ``value`` on the datetime at ``path``."""

    path: str
    value: datetime


@dataclass(frozen=True, slots=True)
class Before(_Bound):
    """``path`` holds a datetime earlier than ``value`` (a missing or null one never is)."""


@dataclass(frozen=True, slots=True)
class AtMost(_Bound):
    """``path`` holds a datetime at or before ``value`` (a missing or null one never does)."""


@dataclass(frozen=True, slots=True)
class Length:
    """The list at ``path`` has exactly ``count`` items (a missing or null list has none)."""

    path: str
    count: int


@dataclass(frozen=True, slots=True)
class AllOf:
    """Every one of ``conditions`` holds."""

    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """At least one of ``conditions`` holds."""

    conditions: tuple[Condition, ...]


Condition = Equals | NoValue | Before | AtMost | Length | AllOf | AnyOf
"""A condition on one stored document."""

_MISSING = object()


def value_at(doc: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` of ``doc`` (list items by number), ``None`` when missing."""
    current: Any = doc
    for part in path.split("."):
        if type(current) is dict or isinstance(current, Mapping):
            current = current.get(part, _MISSING)
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return None
        if current is _MISSING:
            return None
    return current


def matches(condition: Condition, doc: Mapping[str, Any]) -> bool:
    """Whether ``doc`` meets ``condition``: the meaning every store's translation keeps."""
    match condition:
        case Equals(path, value):
            found = value_at(doc, path)
            return found is not None and type(found) is type(value) and found == value
        case NoValue(path):
            return value_at(doc, path) is None
        case Before(path, value):
            found = value_at(doc, path)
            return isinstance(found, datetime) and found < value
        case AtMost(path, value):
            found = value_at(doc, path)
            return isinstance(found, datetime) and found <= value
        case Length(path, count):
            found = value_at(doc, path)
            return len(found or ()) == count
        case AllOf(conditions):
            return all(matches(c, doc) for c in conditions)
        case AnyOf(conditions):
            return any(matches(c, doc) for c in conditions)
    raise TypeError(f"not a condition: {condition!r}")


def all_of(*conditions: Condition) -> AllOf:
    return AllOf(tuple(conditions))


def any_of(*conditions: Condition) -> AnyOf:
    return AnyOf(tuple(conditions))


# -- runs ------------------------------------------------------------------------------------


def owned(agent_id: str, run_id: str) -> AllOf:
    """The run ``run_id`` of agent ``agent_id``."""
    return all_of(Equals("_id", run_id), Equals("agentId", agent_id))


def call_undecided(index: int, tool_call_id: str, question_id: str | None) -> AllOf:
    """Call ``index`` is still the undecided ``tool_call_id`` waiting on ``question_id``
    (``None``: a call stored before calls had a ``questionId``)."""
    path = f"toolCalls.{index}"
    question: Condition = (
        NoValue(f"{path}.questionId") if question_id is None else Equals(f"{path}.questionId", question_id)
    )
    return all_of(Equals(f"{path}.toolCallId", tool_call_id), question, NoValue(f"{path}.decision"))


def pending_call(agent_id: str, run_id: str, index: int, tool_call_id: str, question_id: str | None) -> AllOf:
    """The condition of every decision's write (``record_decision``, ``record_approval``): the
    suspended run whose call ``index`` is still undecided (``call_undecided``)."""
    return all_of(
        owned(agent_id, run_id), Equals("status", "suspended"), call_undecided(index, tool_call_id, question_id)
    )


def notice_unsent(index: int, notice: str) -> NoValue:
    """Call ``index`` has not had its ``notice`` (``reminded``, ``escalated``) yet (``record_notice``)."""
    return NoValue(f"toolCalls.{index}.{notice}")


def last_pending(version: int) -> AllOf:
    """A run at ``version`` with one pending call: the one a decision's write decides, whose
    ``claim`` (``record_decision``) then takes the run, as ``claimable`` would once it is decided."""
    return all_of(Equals("pendingCount", 1), Equals("version", version))


def review_claim_write(
    agent_id: str, run_id: str, index: int, tool_call_id: str, question_id: str | None, version: int
) -> AllOf:
    """The condition of a review claim's write (``record_review_claim``): the call still waits on
    the question (``pending_call``) and the run is still at ``version``, as read."""
    return all_of(pending_call(agent_id, run_id, index, tool_call_id, question_id), Equals("version", version))


def review_claim_held(index: int, by: str) -> Equals:
    """Call ``index``'s review claim is ``by``'s, live or lapsed: the one an approval that does not
    yet decide the call ends (``record_approval``'s ``ends_review_claim_of``)."""
    return Equals(f"toolCalls.{index}.reviewClaim.by", by)


def review_claim_open(index: int, by: str, now: datetime) -> AnyOf:
    """No principal but ``by`` holds a live review claim on call ``index`` at ``now`` (UTC): none is
    stored, it is ``by``'s, or it lapsed (``until`` at or before ``now``). The condition of a
    decision that takes the review claim as it decides (a link's, ``claimant``)."""
    path = f"toolCalls.{index}.reviewClaim"
    return any_of(NoValue(path), Equals(f"{path}.by", by), AtMost(f"{path}.until", now))


def approvals_counted(index: int, count: int) -> Length:
    """Call ``index`` holds exactly ``count`` approvals (``record_approval``'s ``approvals_before``)."""
    return Length(f"toolCalls.{index}.approvals", count)


def lease_lapsed(now: datetime) -> AllOf:
    """A resuming run whose claim ended before ``now``: another instance may take it over."""
    return all_of(Equals("status", "resuming"), Before("claim.until", now))


def claimable(now: datetime, version: int | None = None) -> Condition:
    """A run ``claim`` may take: suspended with every call decided, or resuming under a lapsed
    lease; with ``version``, only while the run is still at that version."""
    ready = any_of(all_of(Equals("status", "suspended"), Equals("pendingCount", 0)), lease_lapsed(now))
    return ready if version is None else all_of(ready, Equals("version", version))


def held(agent_id: str, run_id: str, by: str) -> AllOf:
    """The run while ``by`` holds its claim (every write of a continuation)."""
    return all_of(owned(agent_id, run_id), Equals("status", "resuming"), Equals("claim.by", by))


def queued() -> AllOf:
    """A run whose every call was decided, waiting for an instance to claim it (not one that
    failed: ``retryRun`` continues that one)."""
    return all_of(Equals("status", "suspended"), Equals("pendingCount", 0), NoValue("lastError"))


def stalled(now: datetime, idle_before: datetime) -> AllOf:
    """A decided run nobody continues: under a lapsed lease, or queued and untouched since
    ``idle_before`` (the sweeper's ``list_stalled_runs``; ``pendingCount`` first, the index's)."""
    return all_of(
        Equals("pendingCount", 0), any_of(lease_lapsed(now), all_of(queued(), Before("updatedAt", idle_before)))
    )


def expired(now: datetime) -> AtMost:
    """A run whose earliest pending deadline is at or before ``now`` (``list_expired_runs``)."""
    return AtMost("expiresAt", now)


def call_expired(call: ToolCallDocument, now: datetime) -> bool:
    """Whether ``call`` waits with a deadline at or before ``now`` (UTC): its fallback is due. A run
    holding such a call is ``expired``: its ``expiresAt`` is the earliest of its calls'."""
    deadline = call.get("expiresAt")
    return call.get("decision") is None and deadline is not None and deadline <= now


def pending_count(calls: Iterable[ToolCallDocument]) -> int:
    """``SnapshotDocument.pendingCount`` of a run with ``calls``: those without a decision."""
    return sum(1 for c in calls if c.get("decision") is None)


def earliest_deadline(calls: Sequence[ToolCallDocument], *, deciding: int | None = None) -> datetime | None:
    """``SnapshotDocument.expiresAt`` of a run with ``calls``: the earliest ``expiresAt`` of a
    call without a decision, call ``deciding`` counted as decided; ``None`` when none has one."""
    deadlines = [
        c["expiresAt"]
        for i, c in enumerate(calls)
        if i != deciding and c.get("decision") is None and c.get("expiresAt") is not None
    ]
    return min(deadlines, default=None)


@dataclass(frozen=True, slots=True)
class Decided:
    """A run as a decision's write leaves it (``deciding``)."""

    claimed: bool
    """The write takes the run's claim too: it met the write's ``claiming`` condition."""
    pending_count: int
    """``SnapshotDocument.pendingCount`` once the call is decided."""
    expires_at: datetime | None
    """``SnapshotDocument.expiresAt`` once the call is decided."""


def deciding(
    doc: SnapshotDocument, condition: Condition, index: int, claiming: Condition | None = None
) -> Decided | None:
    """What a decision's write on call ``index`` of ``doc`` (the run as stored) changes besides
    the call, or ``None`` when ``doc`` does not meet the write's ``condition``: whether it meets
    ``claiming`` too (``None``: never), and the fields that follow from the calls with call
    ``index`` decided (``pending_count``, ``earliest_deadline``)."""
    if not matches(condition, doc):
        return None
    calls = doc["toolCalls"]
    return Decided(
        claimed=claiming is not None and matches(claiming, doc),
        pending_count=pending_count(c for i, c in enumerate(calls) if i != index),
        expires_at=earliest_deadline(calls, deciding=index),
    )


def derived(doc: SnapshotDocument) -> dict[str, Any]:
    """The fields of ``doc`` that follow from its calls (``pendingCount``, ``expiresAt``)."""
    return {"pendingCount": pending_count(doc["toolCalls"]), "expiresAt": earliest_deadline(doc["toolCalls"])}


# -- idempotency keys --------------------------------------------------------------------------


def key_expired(before: datetime) -> Before:
    """An idempotency key whose answer was stored (``finishedAt``) before ``before`` (UTC): the
    sweeper deletes it (``delete_expired_idempotency_keys``). A key in flight has no ``finishedAt``,
    so it never is."""
    return Before("finishedAt", before)


# -- webhook deliveries ------------------------------------------------------------------------


def finished_at(status: WebhookDeliveryStatus, at: datetime) -> datetime | None:
    """``WebhookDeliveryDocument.finishedAt`` after an attempt at ``at`` (UTC) that left the
    delivery ``status``: ``None`` while it is still pending, else ``at``."""
    return None if status == "pending" else at


def delivery_expired(before: datetime) -> Before:
    """A webhook delivery done (delivered or failed, ``finishedAt``) before ``before`` (UTC): the
    sweeper deletes it (``delete_expired_webhook_deliveries``). A pending one has no
    ``finishedAt``, so it never is."""
    return Before("finishedAt", before)


# -- events of finished runs ------------------------------------------------------------------

FINISHING_EVENTS: frozenset[str] = frozenset({"completed", "failed"})
"""The event types that finish a run: each records ``retentionFrom``."""


def retention_from(event_type: EventType, at: datetime) -> datetime | None:
    """``EventDocument.retentionFrom`` of an event of ``event_type`` at ``at`` (UTC): ``at`` for a
    finishing event (``FINISHING_EVENTS``), else ``None`` (the event records none)."""
    return at if event_type in FINISHING_EVENTS else None


def events_expired(before: datetime) -> Before:
    """An event whose run finished (``retentionFrom``, UTC) before ``before``: the sweeper lists its
    run (``list_expired_events``) and deletes the run's events unless the run or its supervisor's
    is still stored. Events that do not finish a run have no ``retentionFrom``, so none is."""
    return Before("retentionFrom", before)


__all__ = [
    "FINISHING_EVENTS",
    "AllOf",
    "AnyOf",
    "AtMost",
    "Before",
    "Condition",
    "Decided",
    "Equals",
    "Length",
    "NoValue",
    "all_of",
    "any_of",
    "approvals_counted",
    "call_undecided",
    "claimable",
    "deciding",
    "delivery_expired",
    "derived",
    "earliest_deadline",
    "events_expired",
    "expired",
    "finished_at",
    "held",
    "key_expired",
    "last_pending",
    "lease_lapsed",
    "matches",
    "notice_unsent",
    "owned",
    "pending_call",
    "pending_count",
    "retention_from",
    "review_claim_held",
    "review_claim_open",
    "review_claim_write",
    "stalled",
    "value_at",
]
