"""Starting a run (docs/architecture.md "Start"): run the agent on a prompt, store it if it suspends."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from pydantic_ai.models import Model

from storage import (
    SCHEMA_VERSION,
    DuplicateRunError,
    SnapshotDocument,
    SnapshotStore,
    StoreUnavailableError,
    earliest_deadline,
)

from ._continuation import Continuation
from ._deferred import tool_call_documents
from ._execution import Finished, run_agent
from ._journal import Journal
from ._scope import RunScope
from .gate import DecisionGate
from .outcome import RunOutcome
from .registry import AgentRegistry


@dataclass(kw_only=True)
class Starter:
    """What starting a run needs; one per ``RunManager``."""

    store: SnapshotStore
    agents: AgentRegistry
    journal: Journal
    gate: DecisionGate
    continuation: Continuation
    instance_id: str
    model: Model | str | None
    now: Callable[[], datetime]

    async def start(self, scope: RunScope, prompt: str, *, parent_run_id: str | None) -> RunOutcome:
        """Run ``scope``'s agent on ``prompt`` as the new run ``scope.run_id``.

        Returns:
            ``completed`` (nothing stored), ``suspended`` with the stored run, or ``failed``
            (the agent failed, or the store refused the run: nothing stored). A run whose every
            call a policy approved is continued at once.

        Raises:
            AgentNotFoundError: No agent ``scope.agent_id``.
            StoreUnavailableError: The store failed, here or inside the run (a sub-run's start).
            DuplicateRunError: ``scope.run_id`` is already stored.
        """
        agent = self.agents.get_agent(scope.agent_id)
        started = self.now()
        await self.journal.event(
            scope,
            "started",
            by=scope.principal,
            at=started,
            data={"prompt": prompt, "parentRunId": parent_run_id, "instanceId": self.instance_id},
        )
        try:
            ran = await run_agent(agent, scope, model=self.model, prompt=prompt)
        except StoreUnavailableError:
            # The store failed inside the run (a supervisor's delegate() could not store its
            # sub-run): nothing of this run is stored, so FAILED would leave nothing to retry.
            # The client gets STORE_UNAVAILABLE and repeats the start.
            raise
        except Exception as exc:
            return await self.journal.failed(scope, exc, run=None)
        if isinstance(ran, Finished):
            return await self.journal.completed(scope, ran.output)
        calls = tool_call_documents(ran.requests, ran.messages)
        suspension, decisions = self.gate.suspending(scope, calls, parent_run_id=parent_run_id, suspended_at=started)
        doc: SnapshotDocument = {
            "_id": scope.run_id,
            "agentId": scope.agent_id,
            "threadId": scope.thread_id,
            "resourceId": scope.resource_id,
            "parentRunId": parent_run_id,
            "status": "suspended",
            "createdAt": started,
            "suspendedAt": started,
            "updatedAt": started,
            "toolCalls": calls,
            "pendingCount": sum(1 for call in calls if call["decision"] is None),
            "version": 1,
            "claim": None,
            "lastError": None,
            "schemaVersion": SCHEMA_VERSION,
            "historyId": uuid.uuid4().hex,
        }
        deadline = earliest_deadline(calls)
        if deadline is not None:
            doc["expiresAt"] = deadline
        try:
            await self.store.insert(doc, ran.history, event=[*([suspension] if suspension else []), *decisions])
        except (StoreUnavailableError, DuplicateRunError):
            raise
        except Exception as exc:  # the store refused the run (e.g. over its document size): it failed
            return await self.journal.failed(scope, exc, run=None)
        if suspension is None:  # every call was approved by a policy: continue at once
            return await self.continuation.run(doc, scope.principal)
        return await self.journal.suspended(scope, doc, event=suspension)


__all__ = ["Starter"]
