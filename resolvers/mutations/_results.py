"""``RunOutcome`` and the result unions shared by the mutations."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated

import strawberry

from runtime import RunOutcome as DomainOutcome
from runtime import RunsgateError

from ..errors import (
    AgentNotFound,
    AmbiguousToolCall,
    Forbidden,
    IdempotencyKeyReused,
    InvalidResumeData,
    RunNotFound,
    RunNotReady,
    ToolCallAlreadyDecided,
    ToolCallNotFound,
    UserError,
    WrongToolCallKind,
    to_user_error,
)
from ..scalars import JSON
from ..types import RunStatus, SuspendedRun


@strawberry.type(description="What a run did after a mutation.")
class RunOutcome:
    run_id: strawberry.ID
    agent_id: strawberry.ID
    status: RunStatus = strawberry.field(
        description="SUSPENDED: waiting (for other decisions, or suspended again); COMPLETED; "
        "FAILED (the run stays stored with its decisions and can be retried); "
        "RESUMING (another instance is continuing it)."
    )
    output: JSON | None = strawberry.field(description="The agent's final output, when COMPLETED.")
    error: str | None = strawberry.field(description="`Type: message`, when FAILED.")
    run: SuspendedRun | None = strawberry.field(description="The stored run while it is SUSPENDED or FAILED.")

    @classmethod
    def from_domain(cls, outcome: DomainOutcome) -> RunOutcome:
        return cls(
            run_id=strawberry.ID(outcome.run_id),
            agent_id=strawberry.ID(outcome.agent_id),
            status=RunStatus(outcome.status),
            output=outcome.output,
            error=outcome.error,
            run=None if outcome.run is None else SuspendedRun.from_document(outcome.run),
        )


StartRunResult = Annotated[
    RunOutcome | AgentNotFound | IdempotencyKeyReused | Forbidden,
    strawberry.union("StartRunResult", description="The run's outcome, or why it was not started."),
]

DecisionResult = Annotated[
    RunOutcome
    | AgentNotFound
    | RunNotFound
    | ToolCallNotFound
    | ToolCallAlreadyDecided
    | WrongToolCallKind
    | AmbiguousToolCall
    | InvalidResumeData
    | IdempotencyKeyReused
    | Forbidden,
    strawberry.union("DecisionResult", description="The run's outcome, or why nothing was recorded."),
]

RetryRunResult = Annotated[
    RunOutcome | AgentNotFound | RunNotFound | RunNotReady | Forbidden,
    strawberry.union("RetryRunResult", description="The run's outcome, or why it was not retried."),
]


async def outcome_or_error(call: Awaitable[DomainOutcome]) -> RunOutcome | UserError:
    """Await a runtime call; a domain error becomes its ``UserError`` type (nothing was changed)."""
    try:
        return RunOutcome.from_domain(await call)
    except RunsgateError as error:
        return to_user_error(error)


async def refusal(check: Awaitable[None]) -> UserError | None:
    """Await an access check (``resolvers.access``); its domain error as a ``UserError``, or ``None``."""
    try:
        await check
    except RunsgateError as error:
        return to_user_error(error)
    return None
