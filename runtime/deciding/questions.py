"""A decision request, and the question of a run it names (docs/api.md "Errors"; docs/architecture.md
"Questions").

A decision answers one question: the one it names by ``questionId``, or, naming only a call, the
call's first question. ``find_call`` finds that question among those the run waits on now;
``decided_in_events`` finds the decision that answered one no longer asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from storage import DecisionDocument, DecisionKind, EventDocument, SnapshotDocument, SnapshotStore, ToolCallDocument

from ..access import Principal, check_resource
from ..errors import (
    AmbiguousToolCallError,
    DecideThroughSupervisorError,
    InvalidResumeDataError,
    QuestionNotPendingError,
    ResumeDataProblem,
    RunNotFoundError,
    RunsgateError,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from ..running.deferred import model_id, question_id


@dataclass(frozen=True, kw_only=True)
class DecisionRequest:
    """One approve / decline / resume request."""

    kind: DecisionKind
    tool_call_id: str | None
    """The call's ``toolCallId`` (or the model's id, when one pending call has it); ``None`` only
    for resume: the one call waiting for resume data (or the call asking ``question_id``)."""
    question_id: str | None = None
    """The question the request decides (its ``questionId``); ``None``: the call's first question."""
    reason: str | None = None
    resume_data: Any = None
    edited_args: Any = None
    """The arguments an approval replaces the model's with (JSON object); ``None``: not edited."""
    idempotency_key: str | None = None
    claiming_review: bool = False
    """Where a rule requires the question's review claim, take it for the decider as the decision
    is recorded (a link's button) instead of requiring it held already (``DecisionGate.check``)."""


class FirstQuestionAnswered(Exception):
    """``find_call``: the request names only the call at ``index``, which asks a later question
    than its first: the question the request names was answered (the gate tells by which decision)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"the call at {index} asks a later question")
        self.index = index


@dataclass(frozen=True, kw_only=True)
class Answered:
    """A decision of a run's audit trail (``decided_in_events``), as the run's document held it."""

    decision: DecisionDocument
    tool_call_id: str
    question_id: str | None
    """The question it answered (``None`` in events written before questions had ids)."""


def decided_in_events(
    events: Sequence[EventDocument], tool_call_id: str | None, question_id: str | None
) -> Answered | None:
    """The decision that ``events`` (a run's audit trail, oldest first) recorded on the question
    ``question_id``, or, when ``None``, on the first question of the call ``tool_call_id`` (its
    identity); ``None`` when they record none."""
    found = None
    for event in events:
        if event["type"] != "decision":
            continue
        data = event["data"]
        if question_id is not None and data.get("questionId") == question_id:
            found = event
        elif question_id is None and tool_call_id is not None and data.get("toolCallId") == tool_call_id:
            found = event
            break  # the call's first question
    if found is None:
        return None
    data = found["data"]
    decision: DecisionDocument = {
        "kind": data["kind"],
        "decidedAt": found["at"],
        "decidedBy": found["by"],
        "reason": data.get("reason"),
        "resumeData": None,  # not in the trail
        "idempotencyKey": None,
    }
    if data.get("editedArgs") is not None:
        decision["editedArgs"] = data["editedArgs"]
    return Answered(decision=decision, tool_call_id=data["toolCallId"], question_id=data.get("questionId"))


def find_call(doc: SnapshotDocument, request: DecisionRequest) -> int:
    """The index of the call of ``doc`` asking the question ``request`` names, decided or not: by
    ``questionId`` the call asking it now (the call named, with ``toolCallId`` too); else by
    ``toolCallId`` the call with that identity (or the one pending call with that model id) and
    its first question; a resume naming neither, the one call waiting for resume data. The call
    is checked before the question: a question that waits is never reported as not pending.

    Raises:
        ToolCallNotFoundError: No call has the identity named (or none waits for resume data); with
            ``question_id`` set, the call named does not ask the question another call asks now.
        QuestionNotPendingError: No call of the run asks ``request.question_id`` (answered, or
            never asked).
        FirstQuestionAnswered: The call named asks a later question than its first.
        AmbiguousToolCallError: Several pending calls have that identity or model id, or several
            wait for resume data.
    """
    run_id, calls, named = doc["_id"], doc["toolCalls"], request.tool_call_id
    if request.question_id is not None:
        asking = [i for i, call in enumerate(calls) if question_id(call) == request.question_id]
        asked = [i for i in asking if named in (None, calls[i]["toolCallId"], model_id(calls[i]))]
        if asked:
            return asked[0]
        if named is not None and not any(named in (call["toolCallId"], model_id(call)) for call in calls):
            raise ToolCallNotFoundError(run_id, named)  # not now: ``Questions`` looks in the trail
        if asking:
            raise ToolCallNotFoundError(run_id, named, request.question_id)
        raise QuestionNotPendingError(run_id, named, request.question_id)
    index = _only_resume_call(run_id, calls) if named is None else _named_call(run_id, calls, named)
    if calls[index].get("questionNumber", 1) > 1:  # absent before schema version 4: the gate reads the trail
        raise FirstQuestionAnswered(index)
    return index


def _named_call(run_id: str, calls: list[ToolCallDocument], named: str) -> int:
    for key in (lambda c: c["toolCallId"], model_id):
        found = [i for i, call in enumerate(calls) if key(call) == named]
        pending = [i for i in found if calls[i]["decision"] is None]
        if len(pending) > 1:
            raise AmbiguousToolCallError(run_id, [calls[i]["toolCallId"] for i in pending], named)
        if pending or found:
            return (pending or found)[0]
    raise ToolCallNotFoundError(run_id, named)


class Questions:
    """Finds the question a request names in a stored run, or says how it was answered, from the
    run's audit trail in ``store`` (read only then, or for a call stored before schema version 4
    named without a question)."""

    def __init__(self, store: SnapshotStore) -> None:
        self._store = store

    async def asked(
        self, doc: SnapshotDocument, request: DecisionRequest, principal: Principal | None, *, forwarded: bool
    ) -> int:
        """The index of the call of ``doc`` asking the question ``request`` names
        (``check_addressable``, then ``find_call``), for ``principal`` (``None``: unrestricted).

        Raises:
            DecideThroughSupervisorError: ``check_addressable``.
            ToolCallAlreadyDecidedError: The request names only a call (or, a resume, none) whose
                first question was decided: in an earlier turn, or the call asks another now.
            ToolCallNotFoundError: No call of the run has the identity named, ever; or the call
                named does not ask the question named, which another call asks now.
            QuestionNotPendingError: The request names a question no call asks now: with the
                decision that answered it, or without one when it was never asked.
            AmbiguousToolCallError: ``find_call``.
            RunNotFoundError: The run is outside the principal's resources.
        """
        check_addressable(doc, forwarded=forwarded)
        try:
            index = find_call(doc, request)
        except (FirstQuestionAnswered, QuestionNotPendingError, ToolCallNotFoundError) as missing:
            raise await self._not_asked(doc, request, principal, missing) from None
        if request.question_id is None and "questionNumber" not in doc["toolCalls"][index]:
            await self._first_of_legacy_call(doc, index, principal)
        return index

    async def gone(
        self, agent_id: str, run_id: str, request: DecisionRequest, principal: Principal | None
    ) -> RunsgateError:
        """The answer to a decision on a run no longer stored: the decision of the question it names
        if the events the principal may see record it (a late or duplicate decision on a run that
        finished; ``QuestionNotPendingError`` when it named the question, as on a stored run; a
        resume naming neither call nor question names the one call the trail records resumed),
        else ``RunNotFoundError``."""
        resources = principal.resources if principal is not None else None
        events = await self._store.list_events_of_runs(agent_id, [run_id], resource_ids=resources)
        named = request.tool_call_id
        if named is None and request.question_id is None:  # a resume of the one call that waited for data
            resumed = {
                e["data"]["toolCallId"] for e in events if e["type"] == "decision" and e["data"]["kind"] == "resumed"
            }
            named = next(iter(resumed)) if len(resumed) == 1 else None
        answered = decided_in_events(events, named, request.question_id)
        if answered is None:
            return RunNotFoundError(agent_id, run_id)
        if named is not None and not _decided_call(events, named):
            return ToolCallNotFoundError(run_id, named)  # the call first, as on a stored run
        if request.question_id is not None:
            return QuestionNotPendingError(
                run_id, answered.tool_call_id, request.question_id, answered.decision, finished=True
            )
        return ToolCallAlreadyDecidedError(
            run_id, answered.tool_call_id, answered.decision, question_id=answered.question_id
        )

    async def _not_asked(
        self, doc: SnapshotDocument, request: DecisionRequest, principal: Principal | None, missing: Exception
    ) -> Exception:
        """The answer to ``request``, which ``find_call`` found asked by no call (``missing``): the
        call named first (does the run, or its audit trail, know it?), then the question."""
        if isinstance(missing, FirstQuestionAnswered):
            call = doc["toolCalls"][missing.index]
            return await self._answered(doc, principal, call["toolCallId"], None, asking=question_id(call))
        named, question = request.tool_call_id, request.question_id
        check_resource(doc, principal)  # the run's calls and trail are shown only to who may decide it
        unasked = isinstance(missing, ToolCallNotFoundError) and missing.question_id is not None
        if (named is None and question is None) or unasked:
            return missing  # no call waits for resume data; the call named does not ask the question
        assert isinstance(missing, RunsgateError)
        events = await self._store.list_events(doc["agentId"], doc["_id"])
        if question is not None and named is not None and isinstance(missing, ToolCallNotFoundError):
            if not _decided_call(events, named):
                return missing  # never a call of the run
            if any(question_id(call) == question for call in doc["toolCalls"]):
                return ToolCallNotFoundError(doc["_id"], named, question)  # an earlier turn's call
        return await self._answered(doc, principal, named, question, unknown=missing, events=events)

    async def _first_of_legacy_call(self, doc: SnapshotDocument, index: int, principal: Principal | None) -> None:
        """Raises ``ToolCallAlreadyDecidedError`` when the run's audit trail records a decision of an
        earlier question of the call at ``index`` (stored before schema version 4: no
        ``questionNumber``), as ``find_call`` does for a numbered one."""
        check_resource(doc, principal)
        call = doc["toolCalls"][index]
        events = await self._store.list_events(doc["agentId"], doc["_id"])
        decided = [e for e in events if e["type"] == "decision" and e["data"].get("toolCallId") == call["toolCallId"]]
        first = decided_in_events(decided, call["toolCallId"], None)
        if first is not None and len(decided) > (call["decision"] is not None):  # an earlier question's
            raise ToolCallAlreadyDecidedError(
                doc["_id"], call["toolCallId"], first.decision, question_id=first.question_id, asking=question_id(call)
            )

    async def _answered(
        self,
        doc: SnapshotDocument,
        principal: Principal | None,
        tool_call_id: str | None,
        question: str | None,
        *,
        asking: str | None = None,
        unknown: RunsgateError | None = None,
        events: Sequence[EventDocument] | None = None,
    ) -> RunsgateError:
        """The answer to a request naming the question ``question`` (or, when ``None``, the first
        question of the call ``tool_call_id``) that ``doc`` no longer asks, from the run's audit
        trail (``events``, when read already); ``unknown`` when the trail records no decision on it
        (else ``QuestionNotPendingError``)."""
        check_resource(doc, principal)  # the trail is shown only to who may decide the run
        if events is None:
            events = await self._store.list_events(doc["agentId"], doc["_id"])
        answered = decided_in_events(events, tool_call_id, question)
        if answered is None:
            return unknown or QuestionNotPendingError(doc["_id"], tool_call_id, question)
        if question is not None:
            return QuestionNotPendingError(doc["_id"], answered.tool_call_id, question, answered.decision)
        return ToolCallAlreadyDecidedError(
            doc["_id"], answered.tool_call_id, answered.decision, question_id=answered.question_id, asking=asking
        )


def _decided_call(events: Sequence[EventDocument], tool_call_id: str) -> bool:
    """Whether ``events`` (a run's audit trail) record a decision of the call ``tool_call_id``: a
    call no longer in the run was decided before it moved on."""
    return any(
        e["type"] == "decision" and tool_call_id in (e["data"].get("toolCallId"), e["data"].get("modelToolCallId"))
        for e in events
    )


def check_addressable(doc: SnapshotDocument, *, forwarded: bool) -> None:
    """Whether ``doc`` takes a decision from this path at all, before any of its calls is looked
    up: a sub-run (``parentRunId`` set) takes only the decisions ``forwarded`` from its
    supervisor's run, whatever call, question or kind a direct one names.

    Raises:
        DecideThroughSupervisorError: ``doc`` is a sub-run and the decision is not forwarded.
    """
    parent = doc.get("parentRunId")
    if parent is not None and not forwarded:
        raise DecideThroughSupervisorError(doc["_id"], parent)


def check_decidable(doc: SnapshotDocument, index: int, request: DecisionRequest) -> None:
    """Raises ``undecidable``'s refusal of ``request`` on the call at ``index``, if any."""
    refused = undecidable(doc, index, request)
    if refused is not None:
        raise refused


def undecidable(doc: SnapshotDocument, index: int, request: DecisionRequest) -> RunsgateError | None:
    """Why the call at ``index`` does not take ``request``'s kind of decision now (after
    ``check_addressable``), or ``None``: ``WrongToolCallKindError`` (the call waits for the other
    kind of answer), ``ToolCallAlreadyDecidedError`` (the call has a decision already)."""
    call = doc["toolCalls"][index]
    if call["requiresApproval"] != (request.kind != "resumed"):
        expected: Literal["approval", "resume"] = "approval" if call["requiresApproval"] else "resume"
        return WrongToolCallKindError(doc["_id"], call["toolCallId"], expected)
    if call["decision"] is not None:
        return ToolCallAlreadyDecidedError(doc["_id"], call["toolCallId"], call["decision"])
    return None


def _only_resume_call(run_id: str, calls: list[ToolCallDocument]) -> int:
    resumable = [i for i, call in enumerate(calls) if not call["requiresApproval"]]
    pending = [i for i in resumable if calls[i]["decision"] is None]
    if len(pending) > 1:
        raise AmbiguousToolCallError(run_id, [calls[i]["toolCallId"] for i in pending])
    if pending:
        return pending[0]
    if len(resumable) == 1:
        return resumable[0]  # decided already: check_decidable reports the winning decision
    raise ToolCallNotFoundError(run_id, None)


def validate_resume_data(schema: dict[str, Any] | None, data: Any) -> None:
    """Check ``data`` against the call's ``resumeSchema`` (JSON Schema draft 2020-12).

    Raises:
        InvalidResumeDataError: One problem per validation error, ordered by path.
    """
    if schema is None:
        return
    from jsonschema import Draft202012Validator  # imported on the first resume, not at start

    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise InvalidResumeDataError(
            [ResumeDataProblem(path=list(error.absolute_path), message=error.message) for error in errors]
        )
