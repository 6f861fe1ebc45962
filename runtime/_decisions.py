"""Checks made before a decision is recorded (docs/architecture.md "Decide"; docs/api.md "Errors")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from storage import DecisionKind, SnapshotDocument, ToolCallDocument

from ._deferred import question_id
from .errors import (
    AmbiguousToolCallError,
    DecideThroughSupervisorError,
    InvalidResumeDataError,
    QuestionNotPendingError,
    ResumeDataProblem,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)


@dataclass(frozen=True, kw_only=True)
class DecisionRequest:
    """One approve / decline / resume request."""

    kind: DecisionKind
    tool_call_id: str | None
    """``None`` only for resume: the one call waiting for resume data."""
    question_id: str | None = None
    """The question the request answers (resume); ``None``: the one the call waits on now."""
    reason: str | None = None
    resume_data: Any = None
    edited_args: Any = None
    """The arguments an approval replaces the model's with (JSON object); ``None``: not edited."""
    principal: str | None = None
    idempotency_key: str | None = None
    through_supervisor: bool = False
    """Forwarded by ``delegate()`` from the supervisor's call (the only way to decide a sub-run)."""


def select_call(doc: SnapshotDocument, request: DecisionRequest) -> tuple[int, ToolCallDocument]:
    """The index and document of the pending call ``request`` decides.

    Raises:
        DecideThroughSupervisorError: ``doc`` is a sub-run (``parentRunId`` set) and the request
            does not come from its supervisor.
        QuestionNotPendingError: ``request.question_id`` names no call of the run (or not the
            call ``request.tool_call_id`` names): its question was answered and the call moved on.
        ToolCallNotFoundError: No such call (or, without an id, none waits for resume data).
        AmbiguousToolCallError: Without an id, several calls wait for resume data.
        WrongToolCallKindError: The call waits for the other kind of answer.
        ToolCallAlreadyDecidedError: The call has a decision already (also when the question
            named was answered and the run has not moved on yet).
    """
    run_id, calls = doc["_id"], doc["toolCalls"]
    parent = doc.get("parentRunId")
    if parent is not None and not request.through_supervisor:
        raise DecideThroughSupervisorError(run_id, parent)
    if request.question_id is not None:
        asked = [
            i
            for i, call in enumerate(calls)
            if question_id(call) == request.question_id and request.tool_call_id in (None, call["toolCallId"])
        ]
        if not asked:
            raise QuestionNotPendingError(run_id, request.tool_call_id, request.question_id)
        index = asked[0]
    elif request.tool_call_id is None:
        index = _only_resume_call(run_id, calls)
    else:
        found = [i for i, call in enumerate(calls) if call["toolCallId"] == request.tool_call_id]
        if not found:
            raise ToolCallNotFoundError(run_id, request.tool_call_id)
        index = found[0]
    call = calls[index]
    wants_approval = request.kind != "resumed"
    if call["requiresApproval"] != wants_approval:
        expected: Literal["approval", "resume"] = "approval" if call["requiresApproval"] else "resume"
        raise WrongToolCallKindError(run_id, call["toolCallId"], expected)
    if call["decision"] is not None:
        raise ToolCallAlreadyDecidedError(run_id, call["toolCallId"], call["decision"])
    return index, call


def _only_resume_call(run_id: str, calls: list[ToolCallDocument]) -> int:
    resumable = [i for i, call in enumerate(calls) if not call["requiresApproval"]]
    pending = [i for i in resumable if calls[i]["decision"] is None]
    if len(pending) > 1:
        raise AmbiguousToolCallError(run_id, [calls[i]["toolCallId"] for i in pending])
    if pending:
        return pending[0]
    if len(resumable) == 1:
        return resumable[0]  # decided already: select_call reports the winning decision
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
