"""Checks made before a decision is recorded (docs/architecture.md "Decide"; docs/api.md "Errors")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from jsonschema import Draft202012Validator

from storage import DecisionKind, SnapshotDocument, ToolCallDocument

from .errors import (
    AmbiguousToolCallError,
    InvalidResumeDataError,
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
    reason: str | None = None
    resume_data: Any = None
    principal: str | None = None
    idempotency_key: str | None = None


def select_call(doc: SnapshotDocument, request: DecisionRequest) -> tuple[int, ToolCallDocument]:
    """The index and document of the pending call ``request`` decides.

    Raises:
        ToolCallNotFoundError: No such call (or, without an id, none waits for resume data).
        AmbiguousToolCallError: Without an id, several calls wait for resume data.
        WrongToolCallKindError: The call waits for the other kind of answer.
        ToolCallAlreadyDecidedError: The call has a decision already.
    """
    run_id, calls = doc["_id"], doc["toolCalls"]
    if request.tool_call_id is None:
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
    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise InvalidResumeDataError(
            [ResumeDataProblem(path=list(error.absolute_path), message=error.message) for error in errors]
        )
