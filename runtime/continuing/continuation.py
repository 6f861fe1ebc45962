"""Continuing a run whose every call is decided: after the last decision, a retry, or a takeover
(docs/architecture.md "Continue").

One instance claims the run, feeds pydantic-ai the stored history (each tool call approved with
edited arguments carrying them) plus the decisions as ``DeferredToolResults``, and renews the
claim while the agent runs. Finished: the snapshot is deleted. Suspended again: it is rewritten
with the new pending calls. Failed: the claim is released with ``lastError`` set and every
decision kept, so ``retry`` can continue it later. Suspended again on calls an approval policy
all approved (``runtime.deciding.gate``): it is stored with those decisions and continued again at once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from time import monotonic
from typing import Any

from pydantic_ai import ModelMessagesTypeAdapter, capture_run_messages
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model

from storage import (
    DecisionClaim,
    DecisionDocument,
    RunErrorDocument,
    SnapshotDocument,
    SnapshotStore,
    StoreUnavailableError,
    rules,
)
from storage.protocol import ClaimedDeletion, ClaimedReplacement, ClaimRelease, ClaimRenewal, ClaimWrite

from .._json import jsonable
from ..access import Principal
from ..deciding.gate import DecisionGate
from ..errors import RunNotFoundError, RunNotReadyError
from ..events.journal import Journal, stored_run
from ..idempotency import HeldKey
from ..outcome import RunOutcome
from ..registry import AgentRegistry, AnyAgent
from ..running.deferred import continued, results_applied, settled, tool_call_documents
from ..running.execution import Finished, run_agent
from ..running.identity import identified_legacy
from ..running.scope import RunScope, SubRuns
from ..updates.publishing import UpdateHub, UpdatePublisher
from ..updates.run_updates import RunUpdate, UpdateKind, resumed_update
from .claims import renewing, whole_milliseconds

logger = logging.getLogger(__name__)

FRESH_FOR = 1 / 3
"""A claim taken less than this fraction of its lease ago, by this instance's monotonic clock read
before the claim's write, is not renewed before the run continues: no instance can take a run over
before its lease lapses, and at least the rest of the lease is left."""

Held = tuple[RunUpdate, float]
"""A claim this instance holds: the continuation's ``resumed`` update, stored with the claim (its
``continuation_id`` is the ``resumed`` event's id), and when it was taken (``monotonic()`` read
before its write)."""


@dataclass(kw_only=True)
class Continuation:
    """What continuing a run needs; one per ``RunManager``."""

    store: SnapshotStore
    agents: AgentRegistry
    journal: Journal
    gate: DecisionGate
    """Prepares the calls of a run suspending again (``DecisionGate.suspending``)."""
    runs: SubRuns
    """What the runs' tools reach through their ``RunScope`` (``delegate()``)."""
    instance_id: str
    claim_ttl: float
    """Seconds."""
    model: Model | str | None
    now: Callable[[], datetime]
    updates: UpdateHub
    """Where each claim's run of the agent publishes its updates."""
    _lease: timedelta = field(init=False)
    """``claim_ttl`` in whole milliseconds: a claim's ``until`` stays at the clock's precision."""

    def __post_init__(self) -> None:
        self._lease = whole_milliseconds(self.claim_ttl)

    def claim_until(self, now: datetime) -> datetime:
        """When a claim taken or renewed at ``now`` (the manager's clock) lapses."""
        return now + self._lease

    def scope(self, doc: SnapshotDocument, principal: str | None) -> RunScope:
        """The scope ``doc``'s agent runs in, on behalf of ``principal``."""
        return RunScope(
            runs=self.runs,
            agent_id=doc["agentId"],
            run_id=doc["_id"],
            thread_id=doc["threadId"],
            resource_id=doc["resourceId"],
            principal=principal,
        )

    async def retry(self, agent_id: str, run_id: str, principal: str | None, caller: Principal | None) -> RunOutcome:
        """Continue a run whose every call is decided, after a failure or a crash (``RunManager.retry``).

        Raises:
            AgentNotFoundError, RunNotFoundError (also for a run outside ``caller``'s resources).
            RunNotReadyError: Calls still wait for decisions, or another instance holds an
                unexpired claim on the run.
        """
        agent = self.agents.get_agent(agent_id)
        doc = await self.store.get(agent_id, run_id)
        if doc is None or (caller is not None and not caller.may_use_resource(doc["resourceId"])):
            raise RunNotFoundError(agent_id, run_id)
        if doc["pendingCount"] > 0:
            raise RunNotReadyError(
                run_id, f"Run {run_id!r} still has {doc['pendingCount']} tool call(s) waiting for a decision."
            )
        claim = doc["claim"]
        if claim is not None and not rules.matches(rules.claimable(self.now()), doc):
            raise RunNotReadyError(
                run_id,
                f"Run {run_id!r} is being continued by another instance (claim until {claim['until']}).",
            )
        return await self.run(doc, principal, agent=agent)

    async def run(
        self,
        doc: SnapshotDocument,
        principal: str | None,
        *,
        takeover: bool = False,
        held: Held | None = None,
        key: HeldKey | None = None,
        agent: AnyAgent | None = None,
    ) -> RunOutcome:
        """Claim and continue ``doc``'s run on behalf of ``principal``; its updates are published
        (``runtime.updates.publishing``), its outcome once the store holds it.

        ``takeover``: found stalled by the sweeper (a ``takeover`` event is logged). ``held``: already
        claimed with its decision (``DecisionClaims``). ``key``: the request's idempotency key, whose
        answer a completion writes with the run's deletion. ``agent``: the run's agent, when the
        caller got it already (else read from the registry). If the decided tools ran and the agent then
        failed, the history with their results is kept, so a retry does not run them again.

        Returns:
            ``resuming`` when the claim is held elsewhere (or lost midway), else ``completed``,
            ``suspended`` or ``failed``.

        Raises:
            AgentNotFoundError: The run's agent is no longer registered.
        """
        agent = self.agents.get_agent(doc["agentId"]) if agent is None else agent
        while True:
            scope = self.scope(doc, principal)
            if held is None:
                claimed = await self._claim(doc, scope, takeover=takeover)
                if claimed is None:
                    return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="resuming")
                doc, held = claimed
            resumed, taken_at = held
            held = None
            publisher = self.updates.publisher(scope.agent_id, scope.run_id, resumed.continuation_id, resumed=resumed)
            try:
                result = await self._continue(doc, agent, scope, publisher, taken_at, key)
            except BaseException:
                publisher.abort()
                raise
            if isinstance(result, RunOutcome):
                if not publisher.closed_out:  # a completion's write ended its updates already
                    kind, fields = _outcome_update(result)
                    await publisher.finish(kind, **fields)
                return result
            await publisher.finish()  # every new call was approved by a policy: continue again at once
            doc, takeover = result, False

    async def _claim(
        self, doc: SnapshotDocument, scope: RunScope, *, takeover: bool
    ) -> tuple[SnapshotDocument, Held] | None:
        """Claim the run as read in ``doc``, with its ``takeover`` and ``resumed`` events; the
        claimed run and the claim, or ``None``."""
        me = self.instance_id
        events = []
        if doc["status"] == "resuming" or takeover:
            events.append(
                self.journal.new_event(scope, "takeover", by=me, data={"previousClaim": jsonable(doc["claim"])})
            )
        decided = [
            {"toolCallId": c["toolCallId"], "kind": c["decision"]["kind"]}
            for c in doc["toolCalls"]
            if c["decision"] is not None
        ]
        events.append(
            self.journal.new_event(scope, "resumed", by=scope.principal, data={"instanceId": me, "decisions": decided})
        )
        # Written with the claim as one unit of work (only if it succeeds): every claim is in the
        # log before anything else can happen to it, even if this instance stops right after. The
        # claim needs the run unchanged since ``doc`` was read, so the events describe what it took.
        taken_at, now = monotonic(), self.now()
        resumed, batch = resumed_update(scope.agent_id, scope.run_id, events[-1]["_id"], now)
        claimed = await self.store.claim(
            ClaimWrite(
                agent_id=scope.agent_id,
                run_id=scope.run_id,
                by=me,
                until=self.claim_until(now),
                now=now,
                events=events,
                version=doc["version"],
                updates=[batch],
            )
        )
        return None if claimed is None else (claimed, (resumed, taken_at))

    async def _continue(
        self,
        claimed: SnapshotDocument,
        agent: AnyAgent,
        scope: RunScope,
        publisher: UpdatePublisher,
        taken_at: float,
        key: HeldKey | None = None,
    ) -> RunOutcome | SnapshotDocument:
        """Run the claimed run's agent to its next state: its outcome, or the run stored again
        with every new call approved by a policy (to continue again). ``taken_at``: when the claim
        was taken (``Held``)."""
        agent_id, run_id, me = scope.agent_id, scope.run_id, self.instance_id
        calls = claimed["toolCalls"]
        # Still ours? Paused after the claim for part of its lease, this instance may have lost the
        # run to another's takeover: then it runs no tool. A fresher claim cannot have been lost.
        if monotonic() - taken_at >= self.claim_ttl * FRESH_FOR and not await self.store.renew_claim(
            ClaimRenewal(agent_id=agent_id, run_id=run_id, by=me, until=self.claim_until(self.now()))
        ):
            return _claim_lost(scope)
        captured: list[ModelMessage] = []
        try:
            async with self._renewing_claim(agent_id, run_id):
                stored = await self.store.load_history(agent_id, run_id, history_id=claimed["historyId"])
                if stored is None:
                    raise LookupError(f"the message history of run {run_id!r} is missing")
                history, calls = identified_legacy(ModelMessagesTypeAdapter.validate_json(stored), claimed)
                history, results = continued(history, calls)
                publisher.answering(calls)
                with capture_run_messages() as captured:
                    model = publisher.reading(agent.model if self.model is None else self.model)
                    ran = await run_agent(
                        agent, scope, model=model, history=history, results=results, events=publisher.read
                    )
        except Exception as exc:
            error: RunErrorDocument = {"type": type(exc).__name__, "message": str(exc), "at": self.now()}
            captured = settled(captured)
            kept = results_applied(captured, [c["toolCallId"] for c in calls])
            failure = self.journal.failed_event(scope, exc, tools_ran=kept)
            released = await self.store.release_claim(
                ClaimRelease(
                    agent_id=agent_id,
                    run_id=run_id,
                    by=me,
                    error=error,
                    now=self.now(),
                    history=ModelMessagesTypeAdapter.dump_json(captured) if kept else None,
                    history_id=uuid.uuid4().hex if kept else None,
                    event=failure,
                )
            )
            return await self.journal.failed(scope, exc, run=released, tools_ran=kept, event=failure)
        if isinstance(ran, Finished):
            # the completion's write: its event, the updates still queued and the outcome's, the key's answer
            now = self.now()
            completion = self.journal.completed_event(scope, ran.output, at=now)
            outcome = self.journal.completed_outcome(scope, ran.output)
            updates = await publisher.closing("completed", now, output=ran.output)
            answer = None if key is None else key.answer(outcome, now)
            deleted = await self.store.delete_claimed(
                ClaimedDeletion(agent_id=agent_id, run_id=run_id, by=me, event=completion, updates=updates, key=answer)
            )
            await publisher.closed(written=deleted)
            if not deleted:
                return _claim_lost(scope)
            if key is not None:
                key.answered = True
            return outcome
        calls = tool_call_documents(ran.requests, ran.messages, previous=calls)
        suspended_at = self.now()
        suspension, decisions = self.gate.suspending(
            scope, calls, parent_run_id=claimed["parentRunId"], suspended_at=suspended_at
        )
        try:
            replaced = await self.store.replace_claimed(
                ClaimedReplacement(
                    agent_id=agent_id,
                    run_id=run_id,
                    by=me,
                    tool_calls=calls,
                    history=ran.history,
                    history_id=uuid.uuid4().hex,
                    now=suspended_at,
                    event=[*([suspension] if suspension else []), *decisions],
                )
            )
        except StoreUnavailableError:
            raise
        except Exception as exc:  # the store refused the run's new state (e.g. over its document size)
            return await self._refused(scope, exc)
        if replaced is None:
            return _claim_lost(scope)
        if suspension is None:  # every new call was approved by a policy
            return replaced
        return await self.journal.suspended(scope, replaced, event=suspension)

    def _renewing_claim(self, agent_id: str, run_id: str) -> AbstractAsyncContextManager[None]:
        """Extend this instance's claim on the run every ``claim_ttl / 3`` seconds while the body
        runs (``claims.renewing``)."""

        async def renew() -> bool:
            until = self.claim_until(self.now())
            return await self.store.renew_claim(ClaimRenewal(agent_id=agent_id, run_id=run_id, by=me, until=until))

        me = self.instance_id
        return renewing(renew, every=self.claim_ttl / 3, lease=f"the claim of {me} on run {run_id}")

    async def _refused(self, scope: RunScope, exc: Exception) -> RunOutcome:
        """The store refused to hold the run as it suspended again: the run fails, keeping its
        decisions and its last stored history (its decided tools may run again on ``retry``),
        with ``lastError`` and a ``failed`` event."""
        error: RunErrorDocument = {"type": type(exc).__name__, "message": str(exc), "at": self.now()}
        failure = self.journal.failed_event(scope, exc)
        released = await self.store.release_claim(
            ClaimRelease(
                agent_id=scope.agent_id,
                run_id=scope.run_id,
                by=self.instance_id,
                error=error,
                now=self.now(),
                event=failure,
            )
        )
        return await self.journal.failed(scope, exc, run=released, event=failure)


class DecisionClaims:
    """The claim one decision takes with it when it decides its run's last pending call
    (``DecisionGate.decide``'s ``claim``): ``Continuation._claim``'s, in the decision's write."""

    def __init__(self, continuation: Continuation, principal: str | None) -> None:
        self._continuation = continuation
        self._principal = principal
        self._made: tuple[DecisionClaim, Held] | None = None

    def __call__(self, doc: SnapshotDocument, index: int, decision: DecisionDocument) -> DecisionClaim | None:
        """The claim of a decision on call ``index`` of ``doc`` (as read), with its ``resumed``
        event; ``None`` when other calls of ``doc`` still wait."""
        self._made = None
        owner = self._continuation
        now = decision["decidedAt"]  # the decision's write takes the claim
        until = owner.claim_until(now)
        decisions = [decision if i == index else c["decision"] for i, c in enumerate(doc["toolCalls"])]
        decided = [
            {"toolCallId": c["toolCallId"], "kind": d["kind"]}
            for c, d in zip(doc["toolCalls"], decisions, strict=True)
            if d is not None
        ]
        # Asked after the parts above (cheap, dropped when other calls wait): one stay in storage.rules.
        if not rules.matches(rules.last_pending(doc["version"]), doc):  # as the decision's write checks it
            return None
        run = stored_run(doc, self._principal)
        resumed = owner.journal.new_event(
            run, "resumed", by=self._principal, data={"instanceId": owner.instance_id, "decisions": decided}, at=now
        )
        update, batch = resumed_update(run.agent_id, run.run_id, resumed["_id"], now)
        taken_at = monotonic()
        claim = DecisionClaim(
            by=owner.instance_id,
            until=until,
            version=doc["version"],
            events=[resumed],
            updates=[batch],
        )
        self._made = (claim, (update, taken_at))
        return claim

    def held(self, written: SnapshotDocument) -> Held | None:
        """The claim, when the decision's write ``written`` took it (the run is ``resuming``)."""
        if self._made is None or written["status"] != "resuming":
            return None
        return self._made[1]


def _outcome_update(outcome: RunOutcome) -> tuple[UpdateKind | None, dict[str, Any]]:
    """The update ending a continuation whose outcome is ``outcome`` (none when its claim was lost)."""
    if outcome.status == "completed":
        return "completed", {"output": outcome.output}
    if outcome.status == "suspended":
        return "suspended", {"run": outcome.run}
    if outcome.status == "failed":
        return "failed", {"error": outcome.error, "run": outcome.run}
    return None, {}


def _claim_lost(scope: RunScope) -> RunOutcome:
    logger.warning("the claim on run %s was lost; another instance continues it", scope.run_id)
    return RunOutcome(run_id=scope.run_id, agent_id=scope.agent_id, status="resuming")
