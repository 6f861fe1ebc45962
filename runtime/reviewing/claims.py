"""Review claims (``claimReview``, ``releaseReview``): who is reviewing a pending question, for
``RUNSGATE_REVIEW_CLAIM_TTL`` seconds. Advice, not a lock: the gate lets anyone decide (unless a
rule requires the claim), and the decision's own write ends it. Only a principal the gate would
let decide the question may claim it (``DecisionGate.refusal_of``). Each is one conditional
write on the question and the run's version, with its ``reviewClaimed`` or ``reviewReleased`` event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from storage import DecisionKind, EventType, ReviewClaimDocument, SnapshotDocument, SnapshotStore
from storage.protocol import ReviewClaimWrite

from ..access import Principal, check_resource
from ..deciding.gate import DecisionGate
from ..deciding.questions import DecisionRequest, Questions, check_decidable
from ..deciding.refusals import active_review_claim
from ..errors import RunNotReadyError
from ..events.journal import Journal, stored_run
from .errors import ReviewAlreadyClaimedError, ReviewClaimNotHeldError

_ATTEMPTS = 3
"""Conditional writes tried when the run changes between reading it and writing the claim."""


@dataclass(frozen=True, kw_only=True)
class ClaimAnswer:
    """A question's review claim as written: the run, the call and its claim (``None``: released)."""

    run: SnapshotDocument
    tool_call_id: str
    question_id: str
    claim: ReviewClaimDocument | None


class ReviewClaims:
    """Claims and releases review claims (module docstring).

    Args:
        store: Where runs and events live.
        gate: Tells who may decide a question, and so claim it.
        journal: Builds the events.
        ttl: Seconds a review claim lasts from its last ``claim``.
        now: Aware UTC now at millisecond precision.
    """

    def __init__(
        self, store: SnapshotStore, gate: DecisionGate, journal: Journal, ttl: float, now: Callable[[], datetime]
    ) -> None:
        self._store = store
        self._gate = gate
        self._questions = Questions(store)
        self._journal = journal
        self._ttl = timedelta(seconds=ttl)
        self._now = now

    async def claim(
        self, agent_id: str, run_id: str, tool_call_id: str, question_id: str, principal: Principal
    ) -> ClaimAnswer:
        """Claim the question for ``principal`` (again: its claim lasts ``ttl`` from now, since its
        first claim).

        Raises:
            RunNotFoundError, ToolCallNotFoundError, QuestionNotPendingError,
                ToolCallAlreadyDecidedError, DecideThroughSupervisorError: as a decision naming the
                question would get.
            ForbiddenError, SeparationOfDutiesError: The gate would refuse ``principal``'s approval
                (or resume) of the question (``DecisionGate.refusal_of``).
            ReviewAlreadyClaimedError: Another principal's review claim holds it.
            RunNotReadyError: The run kept changing.
        """
        return await self._write(agent_id, run_id, tool_call_id, question_id, principal, claiming=True)

    async def release(
        self, agent_id: str, run_id: str, tool_call_id: str, question_id: str, principal: Principal
    ) -> ClaimAnswer:
        """End ``principal``'s review claim on the question.

        Raises:
            The errors of ``claim`` but ``ReviewAlreadyClaimedError``, and
            ReviewClaimNotHeldError: ``principal`` holds no live review claim on it.
        """
        return await self._write(agent_id, run_id, tool_call_id, question_id, principal, claiming=False)

    async def _write(
        self, agent_id: str, run_id: str, tool_call_id: str, question_id: str, principal: Principal, *, claiming: bool
    ) -> ClaimAnswer:
        me = principal.identity
        request = DecisionRequest(kind="approved", tool_call_id=tool_call_id, question_id=question_id)
        for _ in range(_ATTEMPTS):
            doc = await self._store.get(agent_id, run_id)
            if doc is None:
                raise await self._questions.gone(agent_id, run_id, request, principal)
            check_resource(doc, principal)
            index = await self._questions.asked(doc, request, principal, forwarded=False)
            call = doc["toolCalls"][index]
            asks: DecisionKind = "approved" if call["requiresApproval"] else "resumed"
            check_decidable(doc, index, DecisionRequest(kind=asks, tool_call_id=tool_call_id))
            now = self._now()
            held = active_review_claim(call, now)
            claim: ReviewClaimDocument | None = None
            event_type: EventType = "reviewClaimed"
            if claiming:
                refused = await self._gate.refusal_of(doc, index, principal)
                if refused is not None:
                    raise refused
                if held is not None and held["by"] != me:
                    raise ReviewAlreadyClaimedError(run_id, call["toolCallId"], question_id, held)
                since = held["at"] if held is not None else now
                claim = {"by": me, "at": since, "until": now + self._ttl}
            else:
                if held is None or held["by"] != me:
                    raise ReviewClaimNotHeldError(run_id, call["toolCallId"], question_id)
                event_type = "reviewReleased"
            data: dict[str, object] = {
                "toolCallId": call["toolCallId"],
                "questionId": question_id,
                "toolName": call["toolName"],
            }
            if claim is not None:
                data["until"] = claim["until"]
            event = self._journal.new_event(stored_run(doc, me), event_type, by=me, data=data, at=now)
            written = await self._store.record_review_claim(
                ReviewClaimWrite(
                    agent_id=agent_id,
                    run_id=run_id,
                    index=index,
                    tool_call_id=call["toolCallId"],
                    question_id=call.get("questionId"),
                    version=doc["version"],
                    claim=claim,
                    now=now,
                    event=event,
                )
            )
            if written is not None:
                return ClaimAnswer(run=written, tool_call_id=call["toolCallId"], question_id=question_id, claim=claim)
        raise RunNotReadyError(run_id, f"Run {run_id!r} kept changing while recording the review claim; try again.")


__all__ = ["ClaimAnswer", "ReviewClaims"]
