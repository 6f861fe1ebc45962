"""``RunOutcome``, the result unions, and the one template every mutation follows.

Each mutation is check (scope, input limits) -> perform (one runtime call with the caller's
``Principal``, made by the mutation's resolver) -> errors as data (a domain error becomes the
``UserError`` type of the field's result union, nothing changed). ``decision_result`` does the
last step for the decisions, counting each; ``start_result`` and ``retry_result`` for the others.
Why: docs/architecture.md "Requests and answers".
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated

import strawberry

from runtime import AgentRegistry, RunsgateError
from runtime import RunOutcome as DomainOutcome

from ..errors import (
    AgentNotFound,
    AmbiguousToolCall,
    DecideThroughSupervisor,
    DuplicateApprover,
    Forbidden,
    IdempotencyKeyReused,
    InvalidResumeData,
    InvalidToolArguments,
    QuestionNotPending,
    ReviewClaimRequired,
    RunNotFound,
    RunNotReady,
    SeparationOfDuties,
    ToolCallAlreadyDecided,
    ToolCallNotFound,
    WrongToolCallKind,
    to_user_error,
)
from ..metrics import DECISIONS, DecisionKind, decision_outcome
from ..scalars import JSON
from ..types import RunStatus, SuspendedRun, ToolSchemas


@strawberry.type(description="What a run did after a mutation.")
class RunOutcome:
    run_id: strawberry.ID
    agent_id: strawberry.ID
    status: RunStatus = strawberry.field(
        description="SUSPENDED: waiting (for other decisions, or suspended again); COMPLETED; "
        "FAILED (the run stays stored with its decisions and can be retried); "
        "RESUMING (the run is continuing: on another instance, or on this one after a `waitFor: RECORDED` "
        "decision; follow it with `runUpdates`, `suspendedRun` or `runEvents`)."
    )
    output: JSON | None = strawberry.field(description="The agent's final output, when COMPLETED.")
    error: str | None = strawberry.field(description="`Type: message`, when FAILED.")
    run: SuspendedRun | None = strawberry.field(description="The stored run while it is SUSPENDED or FAILED.")

    @classmethod
    def from_domain(cls, outcome: DomainOutcome, schemas: ToolSchemas | None = None) -> RunOutcome:
        """The outcome; ``schemas`` give its run's calls' ``argsSchema`` (absent: all null)."""
        return cls(
            run_id=strawberry.ID(outcome.run_id),
            agent_id=strawberry.ID(outcome.agent_id),
            status=RunStatus(outcome.status),
            output=outcome.output,
            error=outcome.error,
            run=None if outcome.run is None else SuspendedRun.from_document(outcome.run, schemas),
        )


StartRunError = AgentNotFound | IdempotencyKeyReused | Forbidden
DecisionError = (
    AgentNotFound
    | RunNotFound
    | ToolCallNotFound
    | ToolCallAlreadyDecided
    | WrongToolCallKind
    | AmbiguousToolCall
    | InvalidResumeData
    | IdempotencyKeyReused
    | Forbidden
    | QuestionNotPending
    | DecideThroughSupervisor
    | DuplicateApprover
    | InvalidToolArguments
    | SeparationOfDuties
    | ReviewClaimRequired
)
RetryRunError = AgentNotFound | RunNotFound | RunNotReady | Forbidden

StartRunResult = Annotated[
    RunOutcome | StartRunError,
    strawberry.union("StartRunResult", description="The run's outcome, or why it was not started."),
]

DecisionResult = Annotated[
    RunOutcome | DecisionError,
    strawberry.union("DecisionResult", description="The run's outcome, or why nothing was recorded."),
]

RetryRunResult = Annotated[
    RunOutcome | RetryRunError,
    strawberry.union("RetryRunResult", description="The run's outcome, or why it was not retried."),
]


def _unexpected(error: RunsgateError, union: str) -> TypeError:
    return TypeError(f"{type(error).__name__} is not a member of {union} (a bug: the runtime raised it)")


async def start_result(call: Awaitable[DomainOutcome], schemas: ToolSchemas) -> RunOutcome | StartRunError:
    """Await a ``startRun`` runtime call; its domain error as data.

    Raises:
        TypeError: A domain error outside ``StartRunResult`` (a bug).
    """
    try:
        return RunOutcome.from_domain(await call, schemas)
    except RunsgateError as error:
        user_error = to_user_error(error)
        if isinstance(user_error, StartRunError):
            return user_error
        raise _unexpected(error, "StartRunResult") from error


async def retry_result(call: Awaitable[DomainOutcome], schemas: ToolSchemas) -> RunOutcome | RetryRunError:
    """Await a ``retryRun`` runtime call; its domain error as data.

    Raises:
        TypeError: A domain error outside ``RetryRunResult`` (a bug).
    """
    try:
        return RunOutcome.from_domain(await call, schemas)
    except RunsgateError as error:
        user_error = to_user_error(error)
        if isinstance(user_error, RetryRunError):
            return user_error
        raise _unexpected(error, "RetryRunResult") from error


def decision_error(error: RunsgateError) -> DecisionError:
    """The ``DecisionResult`` member of a decision's domain error.

    Raises:
        TypeError: A domain error outside ``DecisionResult`` (a bug).
    """
    user_error = to_user_error(error)
    if isinstance(user_error, DecisionError):
        return user_error
    raise _unexpected(error, "DecisionResult") from error


async def decision_result(
    kind: DecisionKind, decision: Awaitable[DomainOutcome], agents: AgentRegistry
) -> RunOutcome | DecisionError:
    """Await a decision's runtime call (``approveToolCall``, ``declineToolCall``, ``resumeRun``),
    count it in ``runsgate_decisions_total`` under ``kind`` and its outcome, as ``decideToolCalls``
    counts each item, and give its domain error as data; its calls' ``argsSchema`` from ``agents``.

    Raises:
        TypeError: A domain error outside ``DecisionResult`` (a bug).
        Exception: What the call raised other than a domain error (counted ``unexpected_error``).
    """
    try:
        outcome = await decision
    except RunsgateError as error:
        DECISIONS.labels(kind, decision_outcome(error.code)).inc()
        return decision_error(error)
    except Exception:
        DECISIONS.labels(kind, "unexpected_error").inc()
        raise
    DECISIONS.labels(kind, "recorded").inc()
    return RunOutcome.from_domain(outcome, agents.tool_schemas())


__all__ = [
    "DecisionResult",
    "RetryRunResult",
    "RunOutcome",
    "StartRunResult",
    "decision_error",
    "decision_result",
    "retry_result",
    "start_result",
]
