"""The event log and the outcomes it accompanies (docs/architecture.md "Events": who, when, what)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic_core import to_jsonable_python

from storage import (
    EXPIRY_DECIDER,
    DecisionDocument,
    EventDocument,
    EventLog,
    EventType,
    SnapshotDocument,
    ToolCallDocument,
    rules,
)

from .._json import fingerprint, rfc3339
from ..outcome import RunOutcome
from ..running.deferred import model_id, question_id

logger = logging.getLogger(__name__)


class RunRef(Protocol):
    """The run an event is about (a ``RunScope``, or ``StoredRun``)."""

    @property
    def agent_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def thread_id(self) -> str | None: ...
    @property
    def resource_id(self) -> str | None: ...
    @property
    def principal(self) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class StoredRun:
    """A stored run as an event's subject."""

    agent_id: str
    run_id: str
    thread_id: str | None
    resource_id: str | None
    principal: str | None = None


def stored_run(doc: SnapshotDocument, principal: str | None = None) -> StoredRun:
    """``doc`` as an event's subject, on behalf of ``principal``."""
    return StoredRun(
        agent_id=doc["agentId"],
        run_id=doc["_id"],
        thread_id=doc["threadId"],
        resource_id=doc["resourceId"],
        principal=principal,
    )


def event_id() -> str:
    """A unique id that sorts in creation order (nanosecond clock first, then randomness), so
    events of the same millisecond keep their order when listed by ``(at, _id)``."""
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}"


def event_id_floor(epoch_ns: int) -> str:
    """A bound that sorts after every event id created before ``epoch_ns`` (UTC nanoseconds since
    the epoch) and before every one created at or after it: the keyset position of a moment."""
    return f"{max(epoch_ns, 0):020d}"


def question_data(call: ToolCallDocument) -> dict[str, Any]:
    """What every event about the question ``call`` waits on names: its call's ``toolCallId``,
    ``modelToolCallId`` and ``toolName``, and its ``questionId``."""
    return {
        "toolCallId": call["toolCallId"],
        "modelToolCallId": model_id(call),
        "questionId": question_id(call),
        "toolName": call["toolName"],
    }


class Journal:
    """Builds events and the matching ``RunOutcome``; appends the events that record no state change.

    An event that records a state change (``suspended``, ``decision``, ``completed``, ``failed``)
    is built here (``*_event``) and written by the store together with that change
    (``RunStore`` methods' ``event=``: one unit of work, docs/storage.md).

    Args:
        store: The event log (collection or table ``run_events``).
        now: Aware UTC now at millisecond precision.
    """

    def __init__(self, store: EventLog, now: Callable[[], datetime]) -> None:
        self._store = store
        self._now = now

    def new_event(
        self,
        scope: RunRef,
        event_type: EventType,
        *,
        by: str | None,
        data: dict[str, Any],
        at: datetime | None = None,
    ) -> EventDocument:
        """One event of the run in ``scope``, not yet written; ``data`` is made JSON-safe. Its id
        is made now (``event_id``), before any wait for the store; a finishing event records its
        ``retentionFrom`` (``rules.retention_from``)."""
        event: EventDocument = {
            "_id": event_id(),
            "runId": scope.run_id,
            "agentId": scope.agent_id,
            "threadId": scope.thread_id,
            "resourceId": scope.resource_id,
            "type": event_type,
            "at": at or self._now(),
            "by": by,
            "data": to_jsonable_python(data),
        }
        if event_type in rules.FINISHING_EVENTS:  # rules.retention_from
            event["retentionFrom"] = event["at"]
        return event

    async def append(self, event: EventDocument) -> None:
        """Write ``event`` (a ``new_event``) alone: one that records no state change of its own
        (``started``). A continuation's ``takeover`` and ``resumed`` are written with its claim
        instead (``RunStore.claim(events=...)``)."""
        await self._store.append_event(event)

    def completed_event(self, scope: RunRef, output: Any, *, at: datetime | None = None) -> EventDocument:
        """The ``completed`` event at ``at`` (``None``: now; its data keeps the output, read by
        ``delegate()``), to write with the run's deletion (``RunStore.delete_claimed(event=...)``)."""
        return self.new_event(scope, "completed", by=scope.principal, data={"output": output}, at=at)

    async def completed(self, scope: RunRef, output: Any, *, event: EventDocument | None = None) -> RunOutcome:
        """The ``completed`` outcome. ``event``: the ``completed_event`` the store already wrote
        with the state change; without it (a run that finished without being stored) one is
        appended now."""
        if event is None:
            await self._store.append_event(self.completed_event(scope, output))
        return self.completed_outcome(scope, output)

    @staticmethod
    def completed_outcome(scope: RunRef, output: Any) -> RunOutcome:
        """The ``completed`` outcome of a run whose ``completed`` event is written."""
        return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="completed", output=output)

    def decision_event(
        self,
        run: RunRef,
        call: ToolCallDocument,
        decision: DecisionDocument,
        *,
        kind: EventType = "decision",
        **data: Any,
    ) -> EventDocument:
        """The ``decision`` event (or, ``kind`` ``approval``, one approval of several) of
        ``decision`` on the question ``call`` waits on, by its decider, at its time; ``data`` adds to it."""
        details = {
            **question_data(call),
            "kind": decision["kind"],
            "reason": decision["reason"],
            "argsFingerprint": fingerprint(call["args"]),
            **data,
        }
        return self.new_event(
            run, kind, by=decision["decidedBy"] or "anonymous", at=decision["decidedAt"], data=details
        )

    def expired_event(self, run: RunRef, call: ToolCallDocument, now: datetime) -> EventDocument:
        """The ``expired`` event of the question ``call`` waits on, whose deadline passed by ``now`` (UTC)."""
        data = {
            **question_data(call),
            "expiresAt": rfc3339(call["expiresAt"]),
            "onExpiry": call.get("onExpiry", "decline"),
        }
        return self.new_event(run, "expired", by=EXPIRY_DECIDER, at=now, data=data)

    def suspended_event(self, scope: RunRef, calls: Sequence[ToolCallDocument]) -> EventDocument:
        """The ``suspended`` event listing the pending tool call ids of ``calls``, to write with
        the snapshot (``RunStore.insert`` / ``replace_claimed``, ``event=...``)."""
        pending = [c["toolCallId"] for c in calls if c["decision"] is None]
        return self.new_event(scope, "suspended", by=scope.principal, data={"toolCallIds": pending})

    async def suspended(
        self, scope: RunRef, doc: SnapshotDocument, *, event: EventDocument | None = None
    ) -> RunOutcome:
        """The ``suspended`` outcome; ``event`` as in ``completed`` (appended now when ``None``)."""
        if event is None:
            await self._store.append_event(self.suspended_event(scope, doc["toolCalls"]))
        return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="suspended", run=doc)

    def failed_event(self, scope: RunRef, exc: Exception, *, tools_ran: bool = False) -> EventDocument:
        """The ``failed`` event, ``data`` ``{type, message}`` and ``toolsRan`` when ``tools_ran``:
        the decided tools ran and their results are kept (a retry does not run them again)."""
        data: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
        if tools_ran:
            data["toolsRan"] = True
        return self.new_event(scope, "failed", by=scope.principal, data=data)

    async def failed(
        self,
        scope: RunRef,
        exc: Exception,
        *,
        run: SnapshotDocument | None,
        tools_ran: bool = False,
        event: EventDocument | None = None,
    ) -> RunOutcome:
        """The ``failed`` outcome (logged); its error is ``"Type: message"``. ``event`` as in
        ``completed`` (a ``failed_event`` appended now when ``None``)."""
        logger.warning("run %s of agent %s failed", scope.run_id, scope.agent_id, exc_info=exc)
        if event is None:
            event = self.failed_event(scope, exc, tools_ran=tools_ran)
            await self._store.append_event(event)
        return RunOutcome(
            run_id=scope.run_id,
            agent_id=scope.agent_id,
            status="failed",
            error=f"{event['data']['type']}: {event['data']['message']}",
            run=run,
        )
