"""Deciding: approve, decline, resume, in bulk, and a supervisor's decision forwarded (docs/architecture.md "Decide").

Every decision goes through ``runtime.deciding.gate.DecisionGate`` and, sent with an idempotency key, through
``runtime.idempotency``. When a run's last pending call is decided, the run is continued
(``runtime.continuing.continuation``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from storage import DecisionKind, IdempotencyDocument, SnapshotDocument, SnapshotStore

from .._json import jsonable
from ..access import Principal
from ..continuing.continuation import Continuation, DecisionClaims
from ..continuing.queued import QueuedContinuations
from ..errors import RunNotFoundError, RunsgateError
from ..idempotency import HeldKey, IdempotencyGuard, NothingWritten
from ..outcome import RunOutcome
from ..registry import AgentRegistry
from ..running.deferred import question_id
from .fair_slots import FairSlots
from .gate import Allowed, Decider, DecisionGate
from .questions import DecisionRequest

Caller = Principal | str | None
"""Who asks for a start or a decision (the ``principal`` argument of ``RunManager``'s methods).

A ``Principal`` (an API caller, authenticated by ``server/``) is held to its resources and to
the per-tool scopes; its ``identity`` is recorded (``decidedBy``, the audit log) and owns the
idempotency keys it sends. A plain name is recorded without resource or scope checks: trusted
in-process code (the seed, tests). ``None``: nobody. Every other rule applies to all of them.
"""


DecisionWait = Literal["outcome", "recorded"]
"""When a decision answers (``waitFor``): ``outcome``, once the run's continuation (if the decision
triggered one) reached its outcome; ``recorded``, once the decision is recorded and the
continuation queued (``resuming``; the result follows through the run's updates, the store and the
event log). A decision that leaves calls waiting answers ``suspended`` either way."""


def split(caller: Caller) -> tuple[str | None, Principal | None]:
    """The name to record, and the principal to check (``None``: trusted in-process code)."""
    if isinstance(caller, Principal):
        return caller.identity, caller
    return caller, None


def owned(operation: str, owner: str | None) -> str:
    """``operation`` scoped to the identity ``owner``: an idempotency key belongs to one identity
    (JSON-quoted, so no identity and key can spell another's)."""
    return operation if owner is None else f"{operation}@{json.dumps(owner)}"


@dataclass(frozen=True, kw_only=True)
class BulkDecision:
    """One item of ``RunManager.decide_many``: approve, decline or resume one call.

    Attributes:
        kind: ``approved``, ``declined`` or ``resumed``.
        reason: Passed to the model (``declined`` only; ignored otherwise).
        edited_args: Arguments the tool runs with instead of the model's (``approved`` only).
        resume_data: The answer (``resumed`` only).
        question_id: The question decided (``DecisionRequest.question_id``).
    """

    run_id: str
    tool_call_id: str
    kind: DecisionKind
    reason: str | None = None
    edited_args: Any = None
    resume_data: Any = None
    question_id: str | None = None


@dataclass(kw_only=True)
class Decisions:
    """What deciding needs; one per ``RunManager``."""

    store: SnapshotStore
    agents: AgentRegistry
    gate: DecisionGate
    continuation: Continuation
    idempotency: IdempotencyGuard
    bulk_slots: FairSlots
    """Shared by every batch: runs ``decide_many`` decides (and so continues) at once, a freed slot
    going to the principal deciding that holds the fewest (``runtime.deciding.fair_slots``)."""
    queued: QueuedContinuations
    """Where the continuations of ``recorded`` decisions run."""

    async def once(
        self,
        agent_id: str,
        run_id: str,
        operation: str,
        request: DecisionRequest,
        caller: Caller,
        wait: DecisionWait = "outcome",
    ) -> RunOutcome:
        """One decision (``approveToolCall``, ``declineToolCall``, ``resumeRun``, a batch item),
        answering as ``wait`` says (``DecisionWait``).

        The run is read and checked before the idempotency key is looked at: a run the caller may
        not decide on is refused having written nothing, and the key's record (another
        principal's, or a replay) is never consulted for it. ``wait`` is not part of what the key
        fingerprints: a replay answers what the first request answered, whatever its ``wait``.
        """
        name, principal = split(caller)
        keyed = owned(operation, name)
        decider = Decider(name=name, principal=principal)
        doc = await self.store.get(agent_id, run_id)
        allowed = None
        if doc is not None:
            allowed = await self.gate.allowed(doc, request, decider)
        elif principal is not None and principal.resources is not None and request.idempotency_key is not None:
            # A replay of a finished run: re-checked against what the caller may see now (its
            # events are stored by resource), so a replay never shows a run now hidden.
            events = await self.store.list_events_of_runs(agent_id, [run_id], resource_ids=principal.resources)
            if not events:
                raise RunNotFoundError(agent_id, run_id)
        arguments = {
            "runId": run_id,
            "toolCallId": request.tool_call_id,
            **({"questionId": request.question_id} if request.question_id is not None else {}),
            "reason": request.reason,
            "resumeData": request.resume_data,
            **({"editedArgs": request.edited_args} if request.edited_args is not None else {}),
            "principal": name,
        }
        return await self.idempotency.run(
            agent_id=agent_id,
            operation=keyed,
            key=request.idempotency_key,
            arguments=arguments,
            action=functools.partial(self._decide, agent_id, run_id, request, decider, doc, allowed, wait),
            defer=True,
        )

    async def _decide(
        self,
        agent_id: str,
        run_id: str,
        request: DecisionRequest,
        decider: Decider,
        read: SnapshotDocument | None,
        allowed: Allowed | None,
        wait: DecisionWait,
        key: HeldKey | None,
    ) -> RunOutcome:
        """Record ``request`` through the gate (``read``, ``allowed``: ``DecisionGate.decide``'s), then
        answer as ``wait`` says: ``suspended`` while calls wait; else the run is queued
        (``recorded``) or continued here, its claim taken by the decision's write (``outcome``)."""
        agent = self.agents.get_agent(agent_id)
        claims = DecisionClaims(self.continuation, decider.name) if wait == "outcome" else None
        updated = await self.gate.decide(
            agent_id, run_id, request, decider, read=read, allowed=allowed, claim=claims, key=key
        )
        if updated["pendingCount"] > 0:
            return RunOutcome(run_id=updated["_id"], agent_id=updated["agentId"], status="suspended", run=updated)
        if wait == "recorded":
            self.queued.queue(updated, decider.name)
            return RunOutcome(run_id=updated["_id"], agent_id=updated["agentId"], status="resuming")
        held = None if claims is None else claims.held(updated)
        return await self.continuation.run(updated, decider.name, held=held, key=key, agent=agent)

    async def forward(self, inner: SnapshotDocument, index: int, answer: dict[str, Any]) -> RunOutcome:
        """Record a supervisor's decision ``answer`` (``runtime.running.deferred.deferred_tool_results``) on
        the sub-run call at ``index``, through the gate with the sub-agent's rules; continue the
        sub-run when no call of it waits (claimed by the decision's write, as a person's decision
        of a run's last call is). Raises the gate's errors (the supervisor's run fails)."""
        call = inner["toolCalls"][index]
        kind: DecisionKind = answer["decision"]
        request = DecisionRequest(
            kind=kind,
            tool_call_id=call["toolCallId"],
            question_id=question_id(call),
            reason=answer.get("reason") if kind == "declined" else None,
            resume_data=answer.get("resumeData") if kind == "resumed" else None,
            edited_args=answer.get("editedArgs") if kind == "approved" else None,
        )
        by = answer.get("decidedBy")
        decider = Decider(
            name=by,
            kind="supervisor",
            scopes=frozenset(answer.get("scopes") or ()),
            approvers=tuple(answer.get("approvers") or (by,)),
        )
        return await self._decide(inner["agentId"], inner["_id"], request, decider, None, None, "outcome", None)

    async def many(
        self,
        agent_id: str,
        decisions: Sequence[BulkDecision],
        caller: Caller,
        idempotency_key: str | None,
        wait: DecisionWait = "outcome",
    ) -> list[RunOutcome | RunsgateError]:
        """``RunManager.decide_many``; ``wait`` applies to each item (not fingerprinted)."""
        self.agents.get_agent(agent_id)  # an unknown agent: refused before the key is reserved
        name, _ = split(caller)
        arguments = {"decisions": [_fingerprinted(item) for item in decisions], "principal": name}
        try:
            return await self.idempotency.once(
                agent_id=agent_id,
                operation=owned("decideToolCalls", name),
                key=idempotency_key,
                arguments=arguments,
                action=lambda _held: self._decide_all(agent_id, decisions, caller, idempotency_key, wait),
                encode=_encode_answers,
                decode=_decode_answers,
            )
        except _NothingRecorded as refused:  # the key was released: a refused request writes nothing
            return refused.answers

    async def _decide_all(
        self,
        agent_id: str,
        decisions: Sequence[BulkDecision],
        caller: Caller,
        key: str | None,
        wait: DecisionWait,
    ) -> list[RunOutcome | RunsgateError]:
        answers: list[RunOutcome | RunsgateError | None] = [None] * len(decisions)
        by_run: dict[str, list[int]] = {}
        for index, item in enumerate(decisions):
            by_run.setdefault(item.run_id, []).append(index)

        name, _ = split(caller)

        async def decide_run(indexes: list[int]) -> None:
            async with self.bulk_slots.slot(name):
                for index in indexes:
                    item = decisions[index]
                    request = DecisionRequest(
                        kind=item.kind,
                        tool_call_id=item.tool_call_id,
                        question_id=item.question_id,
                        reason=item.reason if item.kind == "declined" else None,
                        resume_data=jsonable(item.resume_data) if item.kind == "resumed" else None,
                        edited_args=jsonable(item.edited_args) if item.kind == "approved" else None,
                        idempotency_key=None if key is None else f"{key}/{index}",
                    )
                    try:
                        answers[index] = await self.once(
                            agent_id, item.run_id, "decideToolCalls.item", request, caller, wait
                        )
                    except RunsgateError as error:
                        answers[index] = error

        try:
            async with asyncio.TaskGroup() as group:
                for indexes in by_run.values():
                    group.create_task(decide_run(indexes))
        except BaseExceptionGroup as failed:  # an unexpected error (a store outage): the batch fails with it
            raise failed.exceptions[0] from None
        done = [answer for answer in answers if answer is not None]
        if all(isinstance(answer, RunsgateError) for answer in done):
            raise _NothingRecorded(done)
        return done


def _fingerprinted(item: BulkDecision) -> dict[str, Any]:
    """What a batch's key fingerprints of ``item``: its fields, ``question_id`` only when given (so
    a batch keyed before decisions named questions fingerprints as it did)."""
    fields = dataclasses.asdict(item)
    if fields["question_id"] is None:
        del fields["question_id"]
    return fields


class _NothingRecorded(NothingWritten):
    """Every item of a batch was refused: nothing was recorded, so its idempotency key is released
    (as a single decision's is) and the answers are returned as they are."""

    def __init__(self, answers: list[RunOutcome | RunsgateError]) -> None:
        super().__init__("every decision of the batch was refused")
        self.answers = answers


def _encode_answers(answers: list[RunOutcome | RunsgateError]) -> dict[str, Any]:
    return {
        "answers": [
            {"error": a.to_json()} if isinstance(a, RunsgateError) else {"outcome": a.to_json()} for a in answers
        ]
    }


def _decode_answers(stored: IdempotencyDocument) -> list[RunOutcome | RunsgateError]:
    result = stored["result"]
    assert result is not None
    return [
        RunsgateError.from_json(a["error"]) if "error" in a else RunOutcome.from_json(a["outcome"])
        for a in result["answers"]
    ]


__all__ = ["BulkDecision", "Caller", "DecisionWait", "Decisions", "owned", "split"]
