"""Error types: ``UserError`` members of mutation unions, and query argument errors.

Expected failures of mutations are union members implementing ``UserError`` (docs/api.md "Errors"),
each mapped from a runtime domain error. Invalid query arguments are GraphQL errors with
``extensions.code`` (``BAD_USER_INPUT``, ``AGENT_NOT_FOUND``) and ``extensions.argument``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import strawberry
from graphql import GraphQLError
from strawberry.extensions import MaskErrors

from runtime import (
    AgentNotFoundError,
    AmbiguousToolCallError,
    DecideThroughSupervisorError,
    DuplicateApproverError,
    ErrorCode,
    EventFeedClosedError,
    EventFeedOverflowError,
    ForbiddenError,
    IdempotencyKeyReusedError,
    InvalidResumeDataError,
    InvalidToolArgumentsError,
    QuestionNotPendingError,
    RunNotFoundError,
    RunNotReadyError,
    RunsgateError,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from runtime.reviewing.errors import (
    ReviewAlreadyClaimedError,
    ReviewClaimNotHeldError,
    ReviewClaimRequiredError,
    SeparationOfDutiesError,
)
from storage import StoreUnavailableError

from .argument_errors import QueryArgumentError as QueryArgumentError  # re-exported: raised by the resolvers
from .documents.literals import bounded_literal_error, is_oversized_literal_error
from .types import ReviewClaim as ReviewClaimType
from .types import ToolCallDecision


class SubscriptionEndedError(GraphQLError):
    """A subscription's stream ended on the server's side; ``extensions.code`` says why. A client
    may subscribe again after the last item it received (``afterEventId``, ``after``)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message, extensions={"code": code})


_STREAM_ENDINGS: tuple[tuple[type[Exception], str, str | None], ...] = (
    (EventFeedOverflowError, "SUBSCRIPTION_OVERFLOW", None),
    (EventFeedClosedError, "SHUTTING_DOWN", "the server is shutting down"),
    (StoreUnavailableError, "STORE_UNAVAILABLE", None),
    (RunNotFoundError, "RUN_NOT_FOUND", None),
)
"""Why a subscription's stream ends: the exception, its code, its message (``None``: the exception's)."""


@contextmanager
def stream_endings() -> Iterator[None]:
    """Raise the ``SubscriptionEndedError`` of each way a subscription's stream ends (``_STREAM_ENDINGS``)."""
    try:
        yield
    except tuple(kind for kind, _, _ in _STREAM_ENDINGS) as exc:
        code, message = next((c, m) for kind, c, m in _STREAM_ENDINGS if isinstance(exc, kind))
        raise SubscriptionEndedError(message or str(exc), code=code) from exc


ErrorCodeEnum = strawberry.enum(ErrorCode, name="ErrorCode", description="Code of a `UserError`.")


@strawberry.interface(description="An expected failure of a mutation; nothing was changed.")
class UserError:
    code: ErrorCode
    message: str


@strawberry.type
class AgentNotFound(UserError):
    agent_id: strawberry.ID


@strawberry.type(description="No such run for this agent (also for another agent's run).")
class RunNotFound(UserError):
    agent_id: strawberry.ID
    run_id: strawberry.ID


@strawberry.type
class ToolCallNotFound(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID | None


@strawberry.type(
    description="The question the decision named was decided already; `decision` is the one that won. A "
    "decision naming only its call names the call's first question: once the call asks another, decide "
    "that one by its `questionId` (the message names it)."
)
class ToolCallAlreadyDecided(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    decision: ToolCallDecision
    question_id: strawberry.ID | None = strawberry.field(
        default=None, description="The question `decision` answered (null in answers stored before questions had ids)."
    )


@strawberry.type(description="Approve/decline on a call waiting for resume data, or resume on an approval.")
class WrongToolCallKind(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    expected: str = strawberry.field(description="`approval` or `resume`: what the call waits for.")


@strawberry.type(description="`toolCallId` omitted while several calls wait for resume data.")
class AmbiguousToolCall(UserError):
    run_id: strawberry.ID
    tool_call_ids: list[strawberry.ID]


@strawberry.type(description="One problem of the resume data.")
class ResumeDataProblem:
    path: list[str] = strawberry.field(description="Path inside `resumeData` (array indexes as strings).")
    message: str


@strawberry.type
class InvalidResumeData(UserError):
    problems: list[ResumeDataProblem]


@strawberry.type(description="One problem of edited tool arguments.")
class ToolArgumentProblem:
    path: list[str] = strawberry.field(description="Path inside `editedArgs` (array indexes as strings).")
    message: str


@strawberry.type(
    description="`editedArgs` fail the tool's own argument validator (the one pydantic-ai runs before "
    "calling the tool); nothing was recorded."
)
class InvalidToolArguments(UserError):
    problems: list[ToolArgumentProblem]


@strawberry.type(description="The idempotency key was used with other arguments, or its first use still runs.")
class IdempotencyKeyReused(UserError):
    idempotency_key: str


@strawberry.type(description="`retryRun` on a run that waits for decisions or is being continued.")
class RunNotReady(UserError):
    run_id: strawberry.ID


@strawberry.type(description="The caller may not do this (a per-tool approval rule, or a resource it may not use).")
class Forbidden(UserError):
    required_scope: str | None = strawberry.field(description="The scope that would allow it, if a scope would.")


@strawberry.type(
    description="A decision named a `questionId` the run no longer waits on (a late or duplicate decision, "
    "after the call moved on) or never asked; it was not applied to the question that waits now."
)
class QuestionNotPending(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID | None
    question_id: strawberry.ID | None = strawberry.field(
        description="The question named (null: the request named only its call, whose first question was answered)."
    )
    decision: ToolCallDecision | None = strawberry.field(
        default=None, description="The decision that answered the question; null when it was never asked."
    )


@strawberry.type(
    description="A decision sent to a sub-agent's inner run: decide it through the supervisor's run, "
    "whose call shows the same question."
)
class DecideThroughSupervisor(UserError):
    run_id: strawberry.ID
    supervisor_run_id: strawberry.ID = strawberry.field(description="The supervisor's run to decide instead.")


def to_user_error(error: RunsgateError) -> UserError:
    """The GraphQL error type of a domain error.

    Raises:
        TypeError: An unmapped domain error (a bug: every ``ErrorCode`` has a type).
    """
    code, message = error.code, error.message
    match error:
        case AgentNotFoundError():
            return AgentNotFound(code=code, message=message, agent_id=strawberry.ID(error.agent_id))
        case RunNotFoundError():
            return RunNotFound(
                code=code,
                message=message,
                agent_id=strawberry.ID(error.agent_id),
                run_id=strawberry.ID(error.run_id),
            )
        case ToolCallNotFoundError():
            call_id = None if error.tool_call_id is None else strawberry.ID(error.tool_call_id)
            return ToolCallNotFound(
                code=code, message=message, run_id=strawberry.ID(error.run_id), tool_call_id=call_id
            )
        case ToolCallAlreadyDecidedError():
            return ToolCallAlreadyDecided(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_id=strawberry.ID(error.tool_call_id),
                decision=ToolCallDecision.from_document(error.decision),
                question_id=None if error.question_id is None else strawberry.ID(error.question_id),
            )
        case WrongToolCallKindError():
            return WrongToolCallKind(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_id=strawberry.ID(error.tool_call_id),
                expected=error.expected,
            )
        case AmbiguousToolCallError():
            return AmbiguousToolCall(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_ids=[strawberry.ID(i) for i in error.tool_call_ids],
            )
        case InvalidResumeDataError():
            return InvalidResumeData(
                code=code,
                message=message,
                problems=[ResumeDataProblem(path=[str(p) for p in x.path], message=x.message) for x in error.problems],
            )
        case InvalidToolArgumentsError():
            return InvalidToolArguments(
                code=code,
                message=message,
                problems=[
                    ToolArgumentProblem(path=[str(p) for p in x.path], message=x.message) for x in error.problems
                ],
            )
        case IdempotencyKeyReusedError():
            return IdempotencyKeyReused(code=code, message=message, idempotency_key=error.key)
        case RunNotReadyError():
            return RunNotReady(code=code, message=message, run_id=strawberry.ID(error.run_id))
        case ForbiddenError():
            return Forbidden(code=code, message=message, required_scope=error.required_scope)
        case QuestionNotPendingError():
            return QuestionNotPending(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_id=None if error.tool_call_id is None else strawberry.ID(error.tool_call_id),
                question_id=None if error.question_id is None else strawberry.ID(error.question_id),
                decision=None if error.decision is None else ToolCallDecision.from_document(error.decision),
            )
        case DecideThroughSupervisorError():
            return DecideThroughSupervisor(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                supervisor_run_id=strawberry.ID(error.supervisor_run_id),
            )
        case DuplicateApproverError():
            return DuplicateApprover(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_id=strawberry.ID(error.tool_call_id),
                approvals_required=error.approvals_required,
            )
    return _review_error(error)


def _review_error(error: RunsgateError) -> UserError:
    """The GraphQL error types of the reviewers' queue (``runtime.reviewing.errors``)."""
    code, message = error.code, error.message
    match error:
        case SeparationOfDutiesError():
            run_id, call_id = strawberry.ID(error.run_id), strawberry.ID(error.tool_call_id)
            return SeparationOfDuties(
                code=code, message=message, run_id=run_id, tool_call_id=call_id, started_by=error.started_by
            )
        case ReviewClaimRequiredError():
            claim = None if error.claim is None else ReviewClaimType.from_document(error.claim)
            return ReviewClaimRequired(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_id=strawberry.ID(error.tool_call_id),
                review_claim=claim,
            )
        case ReviewAlreadyClaimedError():
            return ReviewAlreadyClaimed(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_id=strawberry.ID(error.tool_call_id),
                question_id=strawberry.ID(error.question_id),
                review_claim=ReviewClaimType.from_document(error.claim),
            )
        case ReviewClaimNotHeldError():
            return ReviewClaimNotHeld(
                code=code,
                message=message,
                run_id=strawberry.ID(error.run_id),
                tool_call_id=strawberry.ID(error.tool_call_id),
                question_id=strawberry.ID(error.question_id),
            )
    raise TypeError(f"no GraphQL type for {type(error).__name__}")


@strawberry.type(
    description="Separation of duties (a tool rule's `separationOfDuties`): the principal who started the run may "
    "not approve or edit this call; another principal may, and anyone may decline it. Nothing was recorded."
)
class SeparationOfDuties(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    started_by: str | None = strawberry.field(
        description="Who started the run; null when the run does not record it (stored before schema version 5: "
        "then no one may approve the call under the rule)."
    )


@strawberry.type(
    description="A tool rule (`requireReviewClaim`) lets a person decide this call only while holding its review "
    "claim (`claimReview`); nothing was recorded."
)
class ReviewClaimRequired(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    review_claim: ReviewClaimType | None = strawberry.field(description="Another principal's, when one holds it.")


@strawberry.type(
    description="Another principal is reviewing the question (`reviewClaim`: who, since when, until when); "
    "nothing was recorded. A review claim is advice: the question may still be decided."
)
class ReviewAlreadyClaimed(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    question_id: strawberry.ID
    review_claim: ReviewClaimType | None = strawberry.field(
        description="The claim held; always set here. Nullable as `ReviewClaimed.reviewClaim` is, so one "
        "selection of `reviewClaim` serves both answers without an alias."
    )


@strawberry.type(description="The caller holds no live review claim on the question; nothing was recorded.")
class ReviewClaimNotHeld(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    question_id: strawberry.ID


@strawberry.type(
    description="The caller already approved this call, which needs approvals by several distinct principals; "
    "nothing was recorded."
)
class DuplicateApprover(UserError):
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    approvals_required: int = strawberry.field(description="Distinct principals the call needs.")


USER_ERROR_TYPES = [
    AgentNotFound,
    RunNotFound,
    ToolCallNotFound,
    ToolCallAlreadyDecided,
    WrongToolCallKind,
    AmbiguousToolCall,
    InvalidResumeData,
    IdempotencyKeyReused,
    RunNotReady,
    Forbidden,
    QuestionNotPending,
    DecideThroughSupervisor,
    DuplicateApprover,
    InvalidToolArguments,
    SeparationOfDuties,
    ReviewClaimRequired,
    ReviewAlreadyClaimed,
    ReviewClaimNotHeld,
]


UNEXPECTED_ERROR = "Unexpected error."
"""What a client is told of a fault (``ErrorMasking``'s message)."""

STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
"""``extensions.code`` of the error a field gets while the store cannot be reached."""


class ErrorMasking(MaskErrors):
    """Strawberry's ``MaskErrors``, plus: a store outage is reported as such, not masked.

    A field that failed with ``storage.StoreUnavailableError`` gets the error "The run store is
    unavailable; try again shortly." with ``extensions.code = "STORE_UNAVAILABLE"`` (no internal
    detail). Nothing may be assumed written: repeat a mutation with the same ``idempotencyKey``.
    A long literal a validation error repeats is cut short, and an integer literal longer than
    Python converts is refused without Python's words (``resolvers.documents.literals``). Every
    other error goes through ``should_mask_error`` as in ``MaskErrors``. Only the public hooks
    of ``MaskErrors`` are used: both are errors to mask (``should_mask_error``, as
    ``error_masking`` composes it) whose replacement (``anonymise_error``) is the error above.
    Made by ``error_masking``'s factory.
    """

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        """The ``STORE_UNAVAILABLE`` error for a store outage (logged by ``process_errors``), the
        error with its long literal cut short, else ``MaskErrors``'s "Unexpected error."."""
        if isinstance(error.original_error, StoreUnavailableError):
            return _store_unavailable(error)
        if is_oversized_literal_error(error):
            return bounded_literal_error(error)
        return super().anonymise_error(error)

    def mask(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        """The errors of a result as this extension leaves them (each masked or kept)."""
        return [self.anonymise_error(error) if self.should_mask_error(error) else error for error in errors]


def error_masking(
    should_mask_error: Callable[[GraphQLError], bool], error_message: str = UNEXPECTED_ERROR
) -> Callable[[], ErrorMasking]:
    """The factory of a schema's ``ErrorMasking``: it masks what ``should_mask_error`` masks and
    a store outage or an error repeating a long literal, a predicate composed here once (each
    request's extension is Strawberry's ``MaskErrors`` made with it)."""

    def should_mask(error: GraphQLError) -> bool:
        return (
            isinstance(error.original_error, StoreUnavailableError)
            or is_oversized_literal_error(error)
            or should_mask_error(error)
        )

    return partial(ErrorMasking, should_mask_error=should_mask, error_message=error_message)


def escaped_fault(error: GraphQLError) -> GraphQLError:
    """What a client is told of an exception that escaped execution (``resolvers.federation``
    ``escaped``): the ``STORE_UNAVAILABLE`` error for a store outage, else "Unexpected error."."""
    if isinstance(error.original_error, StoreUnavailableError):
        return _store_unavailable(error)
    return GraphQLError(UNEXPECTED_ERROR)


def _store_unavailable(error: GraphQLError) -> GraphQLError:
    return GraphQLError(
        "The run store is unavailable; try again shortly.",
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions={"code": STORE_UNAVAILABLE},
    )
