"""The event log and the outcomes it accompanies (docs/architecture.md "Events": who, when, what)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from storage import EventLog, EventType, SnapshotDocument

from ._json import jsonable
from ._scope import RunScope
from .outcome import RunOutcome

logger = logging.getLogger(__name__)


def event_id() -> str:
    """A unique id that sorts in creation order (nanosecond clock first, then randomness), so
    events of the same millisecond keep their order when listed by ``(at, _id)``."""
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}"


def event_id_floor(epoch_ns: int) -> str:
    """A bound that sorts after every event id created before ``epoch_ns`` (UTC nanoseconds since
    the epoch) and before every one created at or after it: the keyset position of a moment."""
    return f"{max(epoch_ns, 0):020d}"


class Journal:
    """Appends events to the store's log and builds the matching ``RunOutcome``.

    Args:
        store: The event log (collection or table ``run_events``).
        now: Aware UTC now at millisecond precision.
    """

    def __init__(self, store: EventLog, now: Callable[[], datetime]) -> None:
        self._store = store
        self._now = now

    async def event(
        self,
        scope: RunScope,
        event_type: EventType,
        *,
        by: str | None,
        data: dict[str, Any],
        at: datetime | None = None,
    ) -> None:
        """Append one event of the run in ``scope``; ``data`` is made JSON-safe."""
        await self._store.append_event(
            {
                "_id": event_id(),
                "runId": scope.run_id,
                "agentId": scope.agent_id,
                "threadId": scope.thread_id,
                "resourceId": scope.resource_id,
                "type": event_type,
                "at": at or self._now(),
                "by": by,
                "data": jsonable(data),
            }
        )

    async def completed(self, scope: RunScope, output: Any) -> RunOutcome:
        """Event ``completed`` (its data keeps the output, read by ``delegate()``)."""
        await self.event(scope, "completed", by=scope.principal, data={"output": output})
        return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="completed", output=output)

    async def suspended(self, scope: RunScope, doc: SnapshotDocument) -> RunOutcome:
        """Event ``suspended`` listing the pending tool call ids."""
        calls = [c["toolCallId"] for c in doc["toolCalls"] if c["decision"] is None]
        await self.event(scope, "suspended", by=scope.principal, data={"toolCallIds": calls})
        return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="suspended", run=doc)

    async def failed(
        self, scope: RunScope, exc: Exception, *, run: SnapshotDocument | None, tools_ran: bool = False
    ) -> RunOutcome:
        """Event ``failed``; the outcome's error is ``"Type: message"``.

        ``tools_ran``: the decided tools ran and their results are kept (a retry does not run
        them again); recorded in the event's data as ``toolsRan``.
        """
        logger.warning("run %s of agent %s failed", scope.run_id, scope.agent_id, exc_info=exc)
        data: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
        if tools_ran:
            data["toolsRan"] = True
        await self.event(scope, "failed", by=scope.principal, data=data)
        return RunOutcome(
            run_id=scope.run_id,
            agent_id=scope.agent_id,
            status="failed",
            error=f"{data['type']}: {data['message']}",
            run=run,
        )
