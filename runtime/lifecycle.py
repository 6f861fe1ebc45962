"""``RunManager``: the run lifecycle's one entry point (docs/architecture.md "Run lifecycle").

It composes the use cases, each a module of its own: starting (``runtime.starting``), deciding
(``runtime.deciding.decisions``, every decision through ``runtime.deciding.gate``), and continuing after the last
decision, a retry or a takeover (``runtime.continuing.continuation``). It is also what a supervisor's
``delegate()`` reaches through its run's scope (``runtime.running.scope.SubRuns``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.models import Model

from storage import SnapshotDocument, SnapshotStore, to_bson_precision, utcnow

from ._json import jsonable
from .access import ToolApprovalRule, check_start
from .continuing.continuation import Continuation
from .continuing.queued import QueuedContinuations
from .deciding.decisions import BulkDecision, Caller, Decisions, DecisionWait, owned, split
from .deciding.fair_slots import FairSlots
from .deciding.gate import DecisionGate
from .deciding.questions import DecisionRequest
from .errors import RunsgateError
from .events.journal import Journal
from .idempotency import HeldKey, IdempotencyGuard, keyed_run_id
from .outcome import RunOutcome
from .registry import AgentRegistry
from .reviewing.claims import ReviewClaims
from .reviewing.live import LiveQueue
from .reviewing.queue import ReviewQueue
from .running.scope import RunScope
from .starting import Starter
from .updates.publishing import FIRST_TEXT_DELAY, UpdateHub


class RunManager:
    """The run lifecycle over a ``SnapshotStore`` (docs/architecture.md "Run lifecycle"); any
    number of instances may share one store.

    Args:
        store: Where runs, events and idempotency keys live (opened by the caller).
        agents: The registered agents.
        instance_id: This instance's id, recorded in claims and key reservations.
        claim_ttl: Seconds a claim (and a key reservation) lasts, renewed every third of it.
        model: Overrides every agent's model (``RUNSGATE_MODEL``).
        clock: Aware UTC now; stored datetimes are truncated to milliseconds.
        in_flight_wait: Seconds a repeat waits for a first request with its key still running.
        tool_rules: The per-tool rules (``RUNSGATE_TOOL_RULES``; ``runtime.deciding.rules``).
        bulk_concurrency: Runs continued at once by bulk and ``recorded`` decisions (``RUNSGATE_BULK_CONCURRENCY``).
        update_interval, first_text_delay: Seconds between update batches, and at most before the
            first text delta, written (``RUNSGATE_RUN_UPDATES_*``; ``runtime.updates.publishing``).
        review_claim_ttl: Seconds a review claim lasts (``RUNSGATE_REVIEW_CLAIM_TTL``; ``runtime.reviewing``).
    """

    def __init__(
        self,
        store: SnapshotStore,
        agents: AgentRegistry,
        *,
        instance_id: str,
        claim_ttl: float = 60.0,
        model: Model | str | None = None,
        clock: Callable[[], datetime] = utcnow,
        in_flight_wait: float = 2.0,
        tool_rules: Iterable[ToolApprovalRule] = (),
        bulk_concurrency: int = 8,
        update_interval: float = 0.1,
        first_text_delay: float = FIRST_TEXT_DELAY,
        review_claim_ttl: float = 900.0,
    ) -> None:
        self._store = store
        self._agents = agents
        self._instance_id = instance_id
        self._claim_ttl = claim_ttl
        self.now: Callable[[], datetime] = clock if clock is utcnow else functools.partial(_at_bson_precision, clock)
        """This manager's clock: aware UTC now at millisecond (BSON) precision (``utcnow`` itself
        by default, so reading it calls into no module of runtime/)."""
        journal = Journal(store, self.now)
        self._updates = UpdateHub(store, interval=update_interval, now=self.now, first_text_delay=first_text_delay)
        self._gate = DecisionGate(store=store, agents=agents, rules=tuple(tool_rules), journal=journal, now=self.now)
        self._idempotency = IdempotencyGuard(
            store, self.now, in_flight_wait=in_flight_wait, owner=instance_id, lease=claim_ttl
        )
        self._continuation = Continuation(
            store=store,
            agents=agents,
            journal=journal,
            gate=self._gate,
            runs=self,
            instance_id=instance_id,
            claim_ttl=claim_ttl,
            model=model,
            now=self.now,
            updates=self._updates,
        )
        self._queued = QueuedContinuations(self._continuation, limit=bulk_concurrency)
        self.review_queue = ReviewQueue(store, self._gate, self.now)
        """The reviewers' queue (``runtime.reviewing.queue``)."""
        self.live_queue = LiveQueue(self.review_queue)
        """The queue kept live: its subscribers' watches (``runtime.reviewing.live``)."""
        self.review_claims = ReviewClaims(store, self._gate, journal, review_claim_ttl, self.now)
        """Review claims on pending questions (``runtime.reviewing.claims``)."""
        self._starter = Starter(
            store=store,
            agents=agents,
            journal=journal,
            gate=self._gate,
            continuation=self._continuation,
            instance_id=instance_id,
            model=model,
            now=self.now,
        )
        self._decisions = Decisions(
            store=store,
            agents=agents,
            gate=self._gate,
            continuation=self._continuation,
            idempotency=self._idempotency,
            bulk_slots=FairSlots(bulk_concurrency),  # shared fairly among the principals deciding
            queued=self._queued,
        )

    @property
    def store(self) -> SnapshotStore:
        """The store runs are kept in."""
        return self._store

    @property
    def agents(self) -> AgentRegistry:
        """The registered agents."""
        return self._agents

    @property
    def instance_id(self) -> str:
        """This instance's id, as written in claims."""
        return self._instance_id

    @property
    def tool_rules(self) -> tuple[ToolApprovalRule, ...]:
        """The per-tool rules every decision is held to."""
        return self._gate.rules

    @property
    def claim_ttl(self) -> float:
        """Seconds a claim lasts."""
        return self._claim_ttl

    @property
    def updates(self) -> UpdateHub:
        """This process's live run updates (``runtime.updates.publishing``; ``RunUpdateFeed`` reads them)."""
        return self._updates

    async def close(self) -> None:
        """Cancel the continuations ``recorded`` decisions queued here and wait for them; the sweeper
        of any instance takes their runs over (docs/guarantees.md)."""
        await self._queued.close()

    # -- start -----------------------------------------------------------------------------------
    async def start_run(
        self,
        agent_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        idempotency_key: str | None = None,
        principal: Caller = None,
        parent_run_id: str | None = None,
        run_id: str | None = None,
    ) -> RunOutcome:
        """Run ``agent_id`` on ``prompt``; store the run if it suspends (docs/architecture.md "Start").

        ``thread_id`` and ``resource_id`` are listing filters; ``principal`` (``Caller``) starts runs of
        its resources only. With ``idempotency_key`` (and no ``run_id``) the run id derives from the key
        and the time it was first reserved (``keyed_run_id``): a repeat answers what the first try left.
        ``run_id``: the run's id (default: a new uuid4 hex); ``parent_run_id``: its supervisor run.

        Returns:
            ``completed`` (nothing stored), ``suspended`` with the stored run, or ``failed`` (the agent
            failed or the store refused the run; a ``failed`` event follows ``started``).

        Raises:
            ForbiddenError, AgentNotFoundError, IdempotencyKeyReusedError, DuplicateRunError.
            StoreUnavailableError: Nothing of the run is stored; repeat the start.
        """
        name, caller = split(principal)
        if caller is not None:
            check_start(caller, resource_id)
        arguments = {
            "prompt": prompt,
            "threadId": thread_id,
            "resourceId": resource_id,
            "parentRunId": parent_run_id,
            "runId": run_id,
            "principal": name,
        }
        operation = owned("startRun", name)

        async def start(held: HeldKey | None) -> RunOutcome:
            # Under a key, the run's id is the key's own (``keyed_run_id``): a repeat finds its run.
            keyed = held is not None and idempotency_key is not None and run_id is None
            new_id = run_id or uuid.uuid4().hex
            if keyed:
                assert held is not None
                assert idempotency_key is not None
                new_id = keyed_run_id(agent_id, operation, idempotency_key, arguments, await held.reserved_at())
            scope = RunScope(
                runs=self,
                agent_id=agent_id,
                run_id=new_id,
                thread_id=thread_id,
                resource_id=resource_id,
                principal=name,
            )
            return await self._starter.start(scope, prompt, parent_run_id=parent_run_id, keyed=keyed)

        return await self._idempotency.run(
            agent_id=agent_id, operation=operation, key=idempotency_key, arguments=arguments, action=start
        )

    # -- decide ----------------------------------------------------------------------------------
    async def approve(
        self,
        agent_id: str,
        run_id: str,
        tool_call_id: str,
        *,
        principal: Caller = None,
        idempotency_key: str | None = None,
        edited_args: Any = None,
        question_id: str | None = None,
        wait_for: DecisionWait = "outcome",
        claiming_review: bool = False,
    ) -> RunOutcome:
        """Approve the question ``question_id`` of the call ``tool_call_id`` (``None``: the call's
        first question; docs/api.md "Questions"); its tool runs when the run continues.

        ``edited_args`` (a JSON object) replace the model's, checked by the tool's validator first.
        ``principal`` (``Caller``) is recorded as ``decidedBy`` and held to its resources and scopes;
        ``wait_for``: ``outcome`` or ``recorded`` (``DecisionWait``); ``claiming_review``: see
        ``DecisionRequest``. Every decision passes the gate with every rule of the tool's agent.

        Returns:
            ``suspended`` while questions wait; else the continuation's outcome (``resuming`` at once
            with ``wait_for="recorded"``).

        Raises:
            The decision errors of docs/api.md "Errors" (``RunsgateError`` subclasses); nothing is
            recorded with any of them.
        """
        request = DecisionRequest(
            kind="approved",
            tool_call_id=tool_call_id,
            question_id=question_id,
            edited_args=None if edited_args is None else jsonable(edited_args),
            idempotency_key=idempotency_key,
            claiming_review=claiming_review,
        )
        return await self._decisions.once(agent_id, run_id, "approveToolCall", request, principal, wait_for)

    async def decline(
        self,
        agent_id: str,
        run_id: str,
        tool_call_id: str,
        *,
        reason: str | None = None,
        principal: Caller = None,
        idempotency_key: str | None = None,
        question_id: str | None = None,
        wait_for: DecisionWait = "outcome",
        claiming_review: bool = False,
    ) -> RunOutcome:
        """Decline a call waiting for approval; the tool never runs, the model reads ``reason``.

        A decline is final for that call: it is never run, even if it had answered questions.
        Returns and raises as ``approve`` (declining needs no per-tool scope).
        """
        request = DecisionRequest(
            kind="declined",
            tool_call_id=tool_call_id,
            question_id=question_id,
            reason=reason,
            idempotency_key=idempotency_key,
            claiming_review=claiming_review,
        )
        return await self._decisions.once(agent_id, run_id, "declineToolCall", request, principal, wait_for)

    async def resume(
        self,
        agent_id: str,
        run_id: str,
        tool_call_id: str | None,
        resume_data: Any,
        *,
        principal: Caller = None,
        idempotency_key: str | None = None,
        question_id: str | None = None,
        wait_for: DecisionWait = "outcome",
    ) -> RunOutcome:
        """Answer the question ``question_id`` that the call ``tool_call_id`` waits on with
        ``resume_data`` (Mastra's ``resumeStream()``), validated against its ``resumeSchema``. Without
        ``question_id``, the call's first question; without ``tool_call_id`` either, that of the one
        call waiting for resume data. A resume never approves.

        Returns and raises as ``approve`` (with ``InvalidResumeDataError``, ``WrongToolCallKindError``).
        """
        request = DecisionRequest(
            kind="resumed",
            tool_call_id=tool_call_id,
            question_id=question_id,
            resume_data=jsonable(resume_data),
            idempotency_key=idempotency_key,
        )
        return await self._decisions.once(agent_id, run_id, "resumeRun", request, principal, wait_for)

    async def decide_many(
        self,
        agent_id: str,
        decisions: Sequence[BulkDecision],
        *,
        principal: Caller = None,
        idempotency_key: str | None = None,
        wait_for: DecisionWait = "outcome",
    ) -> list[RunOutcome | RunsgateError]:
        """Record many decisions on ``agent_id``'s runs (``decideToolCalls``), each as ``approve``,
        ``decline`` or ``resume`` would, on its own: one item's error does not stop the others. Items of
        one run are recorded in order (the one deciding its last question continues it, once); runs are
        decided at most ``bulk_concurrency`` at a time on this instance, fairly between principals.
        Each item is keyed ``<idempotency_key>/<index>``, so a repeated batch records nothing twice.

        Returns:
            One ``RunOutcome`` or domain error per decision, in order. When every item was refused,
            nothing was recorded and the key is released.

        Raises:
            AgentNotFoundError, IdempotencyKeyReusedError.
        """
        return await self._decisions.many(agent_id, decisions, principal, idempotency_key, wait_for)

    # -- continue --------------------------------------------------------------------------------
    async def retry(self, agent_id: str, run_id: str, *, principal: Caller = None) -> RunOutcome:
        """Continue a run whose every call is decided, after a failure or a crash.

        Also takes over a run whose claim expired (the instance continuing it died). A
        ``Principal`` (``Caller``) retries only runs of its resources: any other run is
        ``RunNotFoundError``, as a missing one.

        Returns:
            ``completed``, ``suspended`` (suspended again), ``failed`` or ``resuming``.

        Raises:
            AgentNotFoundError, RunNotFoundError.
            RunNotReadyError: Calls still wait for decisions, or another instance holds an
                unexpired claim on the run.
        """
        name, caller = split(principal)
        return await self._continuation.retry(agent_id, run_id, name, caller)

    async def take_over(self, doc: SnapshotDocument) -> RunOutcome:
        """Continue a stalled run found by ``StalledRunSweeper`` (``SnapshotStore.list_stalled_runs``).

        Logs a ``takeover`` event by this instance, then continues as ``retry`` does. The claim's
        compare-and-set makes only one instance win; the others get ``resuming``.

        Raises:
            AgentNotFoundError: The run's agent is not registered on this instance.
        """
        return await self._continuation.run(doc, None, takeover=True)

    async def expire(self, doc: SnapshotDocument) -> RunOutcome | None:
        """Apply the fallback of every call of ``doc`` whose deadline passed (found by
        ``StalledRunSweeper`` through ``SnapshotStore.list_expired_runs``), through the gate
        (``DecisionGate.expire``): ``decidedBy`` ``expiry``, an ``expired`` event before the
        ``decision`` event; an ``approve`` fallback declines a call whose rules need a scope or
        several approvers. When no call is left waiting, the run continues as after a person's
        last decision.

        Returns:
            ``None`` when nothing was recorded, else ``suspended`` while other calls wait, or
            the continuation's outcome.

        Raises:
            AgentNotFoundError: The run's agent is not registered on this instance.
        """
        self._agents.get_agent(doc["agentId"])
        updated = await self._gate.expire(doc)
        if updated is None:
            return None
        if updated["pendingCount"] > 0:
            return RunOutcome(run_id=updated["_id"], agent_id=updated["agentId"], status="suspended", run=updated)
        return await self._continuation.run(updated, "expiry")

    # -- what delegate() reaches (runtime.running.scope.SubRuns) ---------------------------------------
    def check_agent(self, agent_id: str) -> None:
        """Raises ``AgentNotFoundError`` when ``agent_id`` is not registered."""
        self._agents.get_agent(agent_id)

    async def get_run(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        """The stored run, or ``None``."""
        return await self._store.get(agent_id, run_id)

    async def finished_output(self, agent_id: str, run_id: str) -> tuple[Any] | None:
        """``(output,)`` when the event log says the run completed, else ``None``."""
        for event in reversed(await self._store.list_events(agent_id, run_id)):
            if event["type"] == "completed":
                return (event["data"].get("output"),)
        return None

    async def start_sub_run(self, agent_id: str, prompt: str, *, parent: RunScope, run_id: str) -> RunOutcome:
        """Start ``parent``'s sub-run ``run_id`` (same thread, resource and principal)."""
        return await self.start_run(
            agent_id,
            prompt,
            thread_id=parent.thread_id,
            resource_id=parent.resource_id,
            principal=parent.principal,
            parent_run_id=parent.run_id,
            run_id=run_id,
        )

    async def forward(self, inner: SnapshotDocument, index: int, answer: dict[str, Any]) -> RunOutcome:
        """Record the supervisor's decision on the sub-run's call at ``index`` (``Decisions.forward``)."""
        return await self._decisions.forward(inner, index, answer)

    async def continue_sub_run(self, agent_id: str, run_id: str, principal: str | None) -> RunOutcome:
        """Continue a sub-run whose every call is decided."""
        return await self._continuation.retry(agent_id, run_id, principal, None)


def _at_bson_precision(clock: Callable[[], datetime]) -> datetime:
    return to_bson_precision(clock())


__all__ = ["BulkDecision", "Caller", "DecisionWait", "RunManager"]
