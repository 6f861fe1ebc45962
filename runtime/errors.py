"""Domain errors of the run lifecycle (docs/api.md "Errors").

Every expected failure of a runtime call is a ``RunsgateError`` subclass carrying a plain
``ErrorCode`` and a human-readable ``message``; ``resolvers/`` maps each one to a GraphQL
error type implementing ``UserError``. Their attributes are public for that mapping.

Errors round-trip through JSON (``to_json`` / ``RunsgateError.from_json``) so that a
request repeated with the same idempotency key gets the same error again.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from storage import DecisionDocument

from ._json import decision_from_json, decision_to_json


class ErrorCode(enum.Enum):
    """Machine-readable code of a domain error (wrapped as a GraphQL enum at the edge)."""

    AGENT_NOT_FOUND = "AGENT_NOT_FOUND"
    RUN_NOT_FOUND = "RUN_NOT_FOUND"
    TOOL_CALL_NOT_FOUND = "TOOL_CALL_NOT_FOUND"
    TOOL_CALL_ALREADY_DECIDED = "TOOL_CALL_ALREADY_DECIDED"
    WRONG_TOOL_CALL_KIND = "WRONG_TOOL_CALL_KIND"
    AMBIGUOUS_TOOL_CALL = "AMBIGUOUS_TOOL_CALL"
    INVALID_RESUME_DATA = "INVALID_RESUME_DATA"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    RUN_NOT_READY = "RUN_NOT_READY"
    """``retry`` on a run that still has pending calls or is being continued."""
    FORBIDDEN = "FORBIDDEN"
    """The caller lacks a scope the action needs (a per-tool approval rule, or a resource)."""
    QUESTION_NOT_PENDING = "QUESTION_NOT_PENDING"
    """A resume names a question the run no longer waits on (a late or duplicate answer)."""
    DECIDE_THROUGH_SUPERVISOR = "DECIDE_THROUGH_SUPERVISOR"
    """A decision sent to a sub-agent's inner run, which is decided through its supervisor's run."""
    # policy (issue 18 part 4): two-person approval
    DUPLICATE_APPROVER = "DUPLICATE_APPROVER"
    """The principal already approved a call that needs several distinct approvers."""
    INVALID_TOOL_ARGUMENTS = "INVALID_TOOL_ARGUMENTS"
    """An approval's ``editedArgs`` fail the tool's own argument validator."""
    SEPARATION_OF_DUTIES = "SEPARATION_OF_DUTIES"  # the reviewers' queue: runtime.reviewing.errors
    REVIEW_CLAIM_REQUIRED = "REVIEW_CLAIM_REQUIRED"
    REVIEW_ALREADY_CLAIMED = "REVIEW_ALREADY_CLAIMED"
    REVIEW_CLAIM_NOT_HELD = "REVIEW_CLAIM_NOT_HELD"


class RunsgateError(Exception):
    """Base of every domain error.

    Attributes:
        code: The error's code.
        message: A sentence for people; never reveals whether another agent's run exists.
    """

    code: ClassVar[ErrorCode]
    _by_code: ClassVar[dict[ErrorCode, type[RunsgateError]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            RunsgateError._by_code[cls.code] = cls

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, Any]:
        """The constructor arguments as a JSON-safe dict (see ``from_json``)."""
        return {}

    @classmethod
    def _from_details(cls, details: dict[str, Any]) -> RunsgateError:
        return cls(**details)

    def to_json(self) -> dict[str, Any]:
        """``{"code", "message", "details"}``, JSON-safe, for idempotency storage."""
        return {"code": self.code.value, "message": self.message, "details": self.details()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> RunsgateError:
        """Rebuild the error ``to_json`` described, as its own subclass.

        Raises:
            ValueError: The code is unknown.
        """
        cls = RunsgateError._by_code[ErrorCode(data["code"])]
        return cls._from_details(dict(data.get("details") or {}))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, RunsgateError) and other.to_json() == self.to_json()

    def __hash__(self) -> int:
        return hash((self.code, self.message))


class AgentNotFoundError(RunsgateError):
    """No agent is registered under ``agent_id``; the message lists the ``known`` agent ids."""

    code = ErrorCode.AGENT_NOT_FOUND

    def __init__(self, agent_id: str, known: Sequence[str] = ()) -> None:
        listed = f"; known agents: {', '.join(known)}" if known else ""
        super().__init__(f"No agent is registered with id {agent_id!r}{listed}.")
        self.agent_id = agent_id
        self.known = list(known)

    def details(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "known": self.known}


class RunNotFoundError(RunsgateError):
    """The run does not exist, is no longer suspended, or belongs to another agent.

    The message is identical in every case, so a run's existence never leaks across agents.
    """

    code = ErrorCode.RUN_NOT_FOUND

    def __init__(self, agent_id: str, run_id: str) -> None:
        super().__init__(f"Agent {agent_id!r} has no suspended run {run_id!r}.")
        self.agent_id = agent_id
        self.run_id = run_id

    def details(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "run_id": self.run_id}


class ToolCallNotFoundError(RunsgateError):
    """The run has no such pending tool call (``tool_call_id`` ``None``: none waiting for resume data;
    with ``question_id``, no call with that id asks that question: another call of the run does)."""

    code = ErrorCode.TOOL_CALL_NOT_FOUND

    def __init__(self, run_id: str, tool_call_id: str | None, question_id: str | None = None) -> None:
        asking = "" if question_id is None else f" asking question {question_id!r}"
        named = "tool call waiting for resume data" if tool_call_id is None else f"pending tool call {tool_call_id!r}"
        super().__init__(f"Run {run_id!r} has no {named}{asking}.")
        self.run_id, self.tool_call_id, self.question_id = run_id, tool_call_id, question_id

    def details(self) -> dict[str, Any]:
        asked = {} if self.question_id is None else {"question_id": self.question_id}  # absent in older answers
        return {"run_id": self.run_id, "tool_call_id": self.tool_call_id, **asked}


class ToolCallAlreadyDecidedError(RunsgateError):
    """The question the request named was decided already; ``decision`` is the one that won.

    Attributes:
        question_id: The question ``decision`` answered (``None`` in answers stored before
            questions were named).
        asking: The question the call waits on now, when it moved on to another (the request
            named only the call, whose first question ``decision`` answered).
    """

    code = ErrorCode.TOOL_CALL_ALREADY_DECIDED

    def __init__(
        self,
        run_id: str,
        tool_call_id: str,
        decision: DecisionDocument,
        *,
        question_id: str | None = None,
        asking: str | None = None,
    ) -> None:
        by = f" by {decision['decidedBy']}" if decision["decidedBy"] else ""
        message = (
            f"Tool call {tool_call_id!r} of run {run_id!r} was already {decision['kind']}{by} "
            f"at {_iso(decision['decidedAt'])}."
        )
        if asking is not None:
            message += f" It now asks another question ({asking!r}): name its questionId to decide it."
        super().__init__(message)
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.decision = decision
        self.question_id = question_id
        self.asking = asking

    def details(self) -> dict[str, Any]:
        details = {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "decision": decision_to_json(self.decision),
        }
        if self.question_id is not None:
            details["question_id"] = self.question_id
        if self.asking is not None:
            details["asking"] = self.asking
        return details

    @classmethod
    def _from_details(cls, details: dict[str, Any]) -> RunsgateError:
        return cls(
            details["run_id"],
            details["tool_call_id"],
            decision_from_json(details["decision"]),
            question_id=details.get("question_id"),
            asking=details.get("asking"),
        )


_MUTATION_FOR: dict[str, str] = {"approval": "approveToolCall or declineToolCall", "resume": "resumeRun"}


class WrongToolCallKindError(RunsgateError):
    """The call waits for the other kind of answer.

    Attributes:
        expected: What the call waits for: ``approval`` (use approve / decline) or ``resume``
            (use resume with resume data).
    """

    code = ErrorCode.WRONG_TOOL_CALL_KIND

    def __init__(self, run_id: str, tool_call_id: str, expected: Literal["approval", "resume"]) -> None:
        what = "an approval" if expected == "approval" else "resume data"
        super().__init__(
            f"Tool call {tool_call_id!r} of run {run_id!r} waits for {what}; use {_MUTATION_FOR[expected]}."
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.expected: Literal["approval", "resume"] = expected

    def details(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "tool_call_id": self.tool_call_id, "expected": self.expected}


class AmbiguousToolCallError(RunsgateError):
    """The request names several pending calls: a resume without a ``toolCallId`` while several
    calls wait for resume data, or a ``toolCallId`` that is the model's id of several pending
    calls (models repeat ids). ``tool_call_ids`` are their own ids; nothing was recorded."""

    code = ErrorCode.AMBIGUOUS_TOOL_CALL

    def __init__(self, run_id: str, tool_call_ids: list[str], named: str | None = None) -> None:
        if named is None:
            message = (
                f"Run {run_id!r} has {len(tool_call_ids)} tool calls waiting for resume data "
                f"({', '.join(tool_call_ids)}); give a toolCallId."
            )
        else:
            message = (
                f"{named!r} is the model's id of {len(tool_call_ids)} pending tool calls of run {run_id!r}; "
                f"name one by its toolCallId: {', '.join(tool_call_ids)}."
            )
        super().__init__(message)
        self.run_id = run_id
        self.tool_call_ids = list(tool_call_ids)
        self.named = named

    def details(self) -> dict[str, Any]:
        named = {} if self.named is None else {"named": self.named}
        return {"run_id": self.run_id, "tool_call_ids": self.tool_call_ids, **named}


@dataclass(frozen=True, kw_only=True)
class ResumeDataProblem:
    """One way the resume data fails the call's ``resumeSchema``."""

    path: list[str | int]
    """Location in the resume data (object keys and array indexes); empty for the top level."""
    message: str


class InvalidResumeDataError(RunsgateError):
    """The resume data does not satisfy the tool call's ``resumeSchema``; nothing was recorded."""

    code = ErrorCode.INVALID_RESUME_DATA

    def __init__(self, problems: list[ResumeDataProblem]) -> None:
        listed = "; ".join(f"{_path(p.path)}: {p.message}" for p in problems)
        super().__init__(f"The resume data does not match the tool's resume schema: {listed}")
        self.problems = list(problems)

    def details(self) -> dict[str, Any]:
        return {"problems": [{"path": p.path, "message": p.message} for p in self.problems]}

    @classmethod
    def _from_details(cls, details: dict[str, Any]) -> RunsgateError:
        return cls([ResumeDataProblem(path=list(p["path"]), message=p["message"]) for p in details["problems"]])


@dataclass(frozen=True, kw_only=True)
class ToolArgumentProblem:
    """One way edited arguments fail the tool's argument validator."""

    path: list[str | int]
    """Location in the arguments (object keys and array indexes); empty for the top level."""
    message: str


class InvalidToolArgumentsError(RunsgateError):
    """An approval's edited arguments fail the tool's own argument validator (pydantic, as
    pydantic-ai validates a call's arguments before running the tool); nothing was recorded."""

    code = ErrorCode.INVALID_TOOL_ARGUMENTS

    def __init__(self, tool_name: str, problems: list[ToolArgumentProblem]) -> None:
        listed = "; ".join(f"{_path(p.path)}: {p.message}" for p in problems)
        super().__init__(f"The edited arguments are not valid for tool {tool_name!r}: {listed}")
        self.tool_name = tool_name
        self.problems = list(problems)

    def details(self) -> dict[str, Any]:
        problems = [{"path": p.path, "message": p.message} for p in self.problems]
        return {"tool_name": self.tool_name, "problems": problems}

    @classmethod
    def _from_details(cls, details: dict[str, Any]) -> RunsgateError:
        problems = [ToolArgumentProblem(path=list(p["path"]), message=p["message"]) for p in details["problems"]]
        return cls(details["tool_name"], problems)


class IdempotencyKeyReusedError(RunsgateError):
    """The idempotency key was used for another request, or its first request is still running."""

    code = ErrorCode.IDEMPOTENCY_KEY_REUSED

    def __init__(self, key: str, *, in_flight: bool = False) -> None:
        if in_flight:
            message = f"The first request with idempotency key {key!r} is still running; try again later."
        else:
            message = f"Idempotency key {key!r} was already used with different arguments."
        super().__init__(message)
        self.key = key
        self.in_flight = in_flight

    def details(self) -> dict[str, Any]:
        return {"key": self.key, "in_flight": self.in_flight}


class RunNotReadyError(RunsgateError):
    """``retry`` on a run that still waits for decisions or that another instance is continuing."""

    code = ErrorCode.RUN_NOT_READY

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id

    def details(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "message": self.message}


class ForbiddenError(RunsgateError):
    """The caller may not do this: ``required_scope`` is missing, or the resource is not its own."""

    code = ErrorCode.FORBIDDEN

    def __init__(self, message: str, required_scope: str | None = None) -> None:
        super().__init__(message)
        self.required_scope = required_scope

    def details(self) -> dict[str, Any]:
        return {"message": self.message, "required_scope": self.required_scope}


class QuestionNotPendingError(RunsgateError):
    """A decision names a question the run does not wait on: it was answered and the call moved on
    (a late or duplicate decision), or it was never asked. Nothing was recorded; the decision is
    never applied to the question that waits now.

    Attributes:
        question_id: The question named; ``None`` when the request named only its call, whose
            first question was answered though its decision is no longer in the audit trail.
        decision: The decision that answered it, from the run's audit trail (``None``: never asked).
        ``finished``: the run is no longer stored (its message says so rather than to list it).
    """

    code = ErrorCode.QUESTION_NOT_PENDING

    def __init__(
        self,
        run_id: str,
        tool_call_id: str | None,
        question_id: str | None,
        decision: DecisionDocument | None = None,
        *,
        finished: bool = False,
    ) -> None:
        if decision is not None:
            by = f" by {decision['decidedBy']}" if decision["decidedBy"] else ""
            why = f"it was {decision['kind']}{by} at {_iso(decision['decidedAt'])}"
        else:
            why = "it was answered already or never asked"
        named = f"question {question_id!r}" if question_id is not None else f"the first question of {tool_call_id!r}"
        then = (
            "The run has finished: it waits on nothing."
            if finished
            else "List the run to see the question that waits now."
        )
        super().__init__(f"Run {run_id!r} does not wait on {named}; {why}. {then}")
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.question_id = question_id
        self.decision = decision

    def details(self) -> dict[str, Any]:
        details: dict[str, Any] = {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "question_id": self.question_id,
        }
        if self.decision is not None:
            details["decision"] = decision_to_json(self.decision)
        return details

    @classmethod
    def _from_details(cls, details: dict[str, Any]) -> RunsgateError:
        decision = details.get("decision")
        return cls(
            details["run_id"],
            details["tool_call_id"],
            details["question_id"],
            None if decision is None else decision_from_json(decision),
        )


class DecideThroughSupervisorError(RunsgateError):
    """A decision sent directly to a sub-agent's inner run: its calls are decided only through
    the supervisor's run ``supervisor_run_id`` (whose call shows the same question), so the two
    can never disagree. Nothing was recorded."""

    code = ErrorCode.DECIDE_THROUGH_SUPERVISOR

    def __init__(self, run_id: str, supervisor_run_id: str) -> None:
        super().__init__(
            f"Run {run_id!r} is a sub-run of supervisor run {supervisor_run_id!r}; decide its calls "
            "through the supervisor's run."
        )
        self.run_id = run_id
        self.supervisor_run_id = supervisor_run_id

    def details(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "supervisor_run_id": self.supervisor_run_id}


class DuplicateApproverError(RunsgateError):
    """The principal ``decided_by`` already approved this call, which needs ``approvals_required``
    distinct principals (two-person approval); nothing was recorded."""

    code = ErrorCode.DUPLICATE_APPROVER

    def __init__(self, run_id: str, tool_call_id: str, decided_by: str | None, approvals_required: int) -> None:
        super().__init__(
            f"{decided_by or 'This caller'} already approved tool call {tool_call_id!r} of run {run_id!r}; it "
            f"needs {approvals_required} approvals by distinct principals."
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.decided_by = decided_by
        self.approvals_required = approvals_required

    def details(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "decided_by": self.decided_by,
            "approvals_required": self.approvals_required,
        }


def _iso(value: datetime) -> str:
    """UTC ISO 8601 with milliseconds and ``Z``, as the ``DateTime`` scalar prints it."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _path(path: list[str | int]) -> str:
    return "/" + "/".join(str(p) for p in path)


__all__ = [
    "AgentNotFoundError",
    "AmbiguousToolCallError",
    "DecideThroughSupervisorError",
    "DuplicateApproverError",
    "ErrorCode",
    "ForbiddenError",
    "IdempotencyKeyReusedError",
    "InvalidResumeDataError",
    "InvalidToolArgumentsError",
    "QuestionNotPendingError",
    "ResumeDataProblem",
    "RunNotFoundError",
    "RunNotReadyError",
    "RunsgateError",
    "ToolArgumentProblem",
    "ToolCallAlreadyDecidedError",
    "ToolCallNotFoundError",
    "WrongToolCallKindError",
]
