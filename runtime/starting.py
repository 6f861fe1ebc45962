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
    rules,
)

from .continuing.continuation import Continuation
from .deciding.gate import DecisionGate
from .events.journal import Journal
from .outcome import RunOutcome
from .registry import AgentRegistry
from .running.deferred import tool_call_documents
from .running.execution import Finished, run_agent
from .running.scope import RunScope


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

    async def start(
        self, scope: RunScope, prompt: str, *, parent_run_id: str | None, keyed: bool = False
    ) -> RunOutcome:
        """Run ``scope``'s agent on ``prompt`` as the new run ``scope.run_id``.

        ``keyed``: ``scope.run_id`` is derived from an idempotency key, so an earlier try of the
        same start may have got further. Its answer is given instead (``answered``), looked up
        before the agent runs and again when the insert finds the id taken.

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
        if keyed and (earlier := await self.answered(scope)) is not None:
            return earlier
        started = self.now()
        await self.journal.append(
            self.journal.new_event(
                scope,
                "started",
                by=scope.principal,
                at=started,
                data={"prompt": prompt, "parentRunId": parent_run_id, "instanceId": self.instance_id},
            )
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
            "pendingCount": rules.pending_count(calls),
            "version": 1,
            "claim": None,
            "lastError": None,
            "schemaVersion": SCHEMA_VERSION,
            "historyId": uuid.uuid4().hex,
            "startedBy": scope.principal,
        }
        deadline = earliest_deadline(calls)
        if deadline is not None:
            doc["expiresAt"] = deadline
        try:
            await self.store.insert(doc, ran.history, event=[*([suspension] if suspension else []), *decisions])
        except DuplicateRunError:
            # Another try of this keyed start stored the run first (its lease lapsed while it ran).
            if keyed and (earlier := await self.answered(scope)) is not None:
                return earlier
            raise
        except StoreUnavailableError:
            raise
        except Exception as exc:  # the store refused the run (e.g. over its document size): it failed
            return await self.journal.failed(scope, exc, run=None)
        if suspension is None:  # every call was approved by a policy: continue at once
            return await self.continuation.run(doc, scope.principal)
        return await self.journal.suspended(scope, doc, event=suspension)

    async def answered(self, scope: RunScope) -> RunOutcome | None:
        """What an earlier try of the start ``scope`` left: the stored run's state (``suspended``
        with it, ``resuming`` while claimed, ``failed`` with its ``lastError``), else the logged
        ``completed`` output or ``failed`` error of a run no longer (or never) stored; ``None``
        when it left neither (it stored nothing: the start runs). Raises StoreUnavailableError."""
        doc = await self.store.get(scope.agent_id, scope.run_id)
        if doc is not None:
            return _state(doc)
        for event in reversed(await self.store.list_events(scope.agent_id, scope.run_id)):
            if event["type"] == "completed":
                output = event["data"].get("output")
                return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="completed", output=output)
            if event["type"] == "failed":
                error = f"{event['data'].get('type')}: {event['data'].get('message')}"
                return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="failed", error=error)
        return None


def _state(doc: SnapshotDocument) -> RunOutcome:
    """The outcome a stored run stands for now."""
    run_id, agent_id = doc["_id"], doc["agentId"]
    if doc["status"] == "resuming":
        return RunOutcome(run_id=run_id, agent_id=agent_id, status="resuming")
    error = doc.get("lastError")
    if error is not None:
        return RunOutcome(
            run_id=run_id, agent_id=agent_id, status="failed", error=f"{error['type']}: {error['message']}", run=doc
        )
    return RunOutcome(run_id=run_id, agent_id=agent_id, status="suspended", run=doc)


__all__ = ["Starter"]
