"""GraphQL input types (docs/api.md)."""

from __future__ import annotations

import enum
from datetime import datetime

import strawberry

from runtime import DecisionWait as Wait
from storage import RunFilter

from .scalars import JSON
from .types import DecisionKind


@strawberry.input(description="Which runs to list; both date bounds are inclusive and apply to `createdAt`.")
class SuspendedRunFilter:
    thread_id: str | None = None
    resource_id: str | None = None
    from_date: datetime | None = strawberry.field(default=None, description="Created on or after (RFC 3339).")
    to_date: datetime | None = strawberry.field(default=None, description="Created on or before (RFC 3339).")
    # deadlines (issue 18 part 2)
    expires_before: datetime | None = strawberry.field(
        default=None,
        description="Runs whose `expiresAt` (earliest deadline of a waiting call) is before it (RFC 3339); "
        "runs without a deadline never match.",
    )

    def to_run_filter(self) -> RunFilter:
        return RunFilter(
            thread_id=self.thread_id,
            resource_id=self.resource_id,
            from_date=self.from_date,
            to_date=self.to_date,
            expires_before=self.expires_before,
        )


@strawberry.input(description="`perPage` runs per page, `page` zero-based, as Mastra's `listSuspendedRuns()`.")
class PageInput:
    page: int = strawberry.field(description="Zero-based page number, >= 0.")
    per_page: int = strawberry.field(description="Runs per page, >= 1 and at most the page-size cap.")


@strawberry.input
class StartRunInput:
    agent_id: strawberry.ID
    prompt: str = strawberry.field(description="What the agent is asked; not empty or blank.")
    thread_id: str | None = None
    resource_id: str | None = None
    idempotency_key: str | None = strawberry.field(
        default=None, description="Repeating the request with this key returns the first result."
    )


@strawberry.enum(description='When a decision answers (docs/api.md "Decisions that do not wait").')
class DecisionWait(enum.Enum):
    OUTCOME = strawberry.enum_value(
        "outcome",
        description="Once the run's continuation (if the decision triggered one) reached its outcome: "
        "SUSPENDED again, COMPLETED or FAILED. The default.",
    )
    RECORDED = strawberry.enum_value(
        "recorded",
        description="Once the decision is stored and the run's continuation queued on this instance: "
        "RESUMING; the result follows through `runUpdates`, `suspendedRun` and `runEvents`. A decision "
        "that leaves calls waiting answers SUSPENDED either way.",
    )

    @property
    def wait(self) -> Wait:
        """The runtime's ``DecisionWait``."""
        return "recorded" if self is DecisionWait.RECORDED else "outcome"


WAIT_FOR_DESCRIPTION = (
    "When to answer (`DecisionWait`). Not part of what an `idempotencyKey` fingerprints: a replay "
    "answers what the first request answered, whatever its `waitFor`."
)


def wait_for_field() -> DecisionWait:
    """The ``waitFor`` input field of a decision input."""
    field: DecisionWait = strawberry.field(default=DecisionWait.OUTCOME, description=WAIT_FOR_DESCRIPTION)
    return field


EDITED_ARGS_DESCRIPTION = (
    "Arguments (an object) the tool runs with instead of the model's: checked by the tool's own argument "
    "validator (`InvalidToolArguments` when they fail it), the per-tool rules are evaluated on them, and the "
    "model's history shows them. Omitted or null: the model's arguments."
)


QUESTION_ID_DESCRIPTION = (
    "The question decided (the call's `questionId` as listed); when it no longer waits, the decision is "
    "refused with `QuestionNotPending`. Omitted: the call's first question (`ToolCallAlreadyDecided` once "
    "it is answered)."
)


def question_id_field() -> strawberry.ID | None:
    """The ``questionId`` field of every decision input (``QUESTION_ID_DESCRIPTION``)."""
    return strawberry.field(default=None, description=QUESTION_ID_DESCRIPTION)  # type: ignore[no-any-return]


@strawberry.input
class ApproveToolCallInput:
    agent_id: strawberry.ID
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    idempotency_key: str | None = None
    edited_args: JSON | None = strawberry.field(default=None, description=EDITED_ARGS_DESCRIPTION)
    question_id: strawberry.ID | None = question_id_field()
    wait_for: DecisionWait = wait_for_field()


@strawberry.input
class DeclineToolCallInput:
    agent_id: strawberry.ID
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    reason: str | None = strawberry.field(default=None, description="Passed to the model.")
    idempotency_key: str | None = None
    question_id: strawberry.ID | None = question_id_field()
    wait_for: DecisionWait = wait_for_field()


@strawberry.input
class ResumeRunInput:
    agent_id: strawberry.ID
    run_id: strawberry.ID
    tool_call_id: strawberry.ID | None = strawberry.field(
        default=None, description="May be omitted when exactly one call waits for resume data."
    )
    resume_data: JSON = strawberry.field(description="Validated against the call's `resumeSchema`.")
    idempotency_key: str | None = None
    question_id: strawberry.ID | None = question_id_field()
    wait_for: DecisionWait = wait_for_field()


@strawberry.input
class RetryRunInput:
    agent_id: strawberry.ID
    run_id: strawberry.ID


@strawberry.input(
    description="One decision of `decideToolCalls`: what `approveToolCall`, `declineToolCall` or "
    "`resumeRun` would record on one call."
)
class ToolCallDecisionInput:
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    kind: DecisionKind = strawberry.field(description="APPROVED, DECLINED or RESUMED.")
    reason: str | None = strawberry.field(default=None, description="DECLINED only: passed to the model.")
    edited_args: JSON | None = strawberry.field(default=None, description="APPROVED only. " + EDITED_ARGS_DESCRIPTION)
    resume_data: JSON | None = strawberry.field(
        default=None, description="RESUMED only, and required there: validated against the call's `resumeSchema`."
    )
    question_id: strawberry.ID | None = question_id_field()


@strawberry.input(description="Decisions on calls of one agent's runs, each recorded independently.")
class DecideToolCallsInput:
    agent_id: strawberry.ID
    decisions: list[ToolCallDecisionInput] = strawberry.field(
        description="At most `RUNSGATE_MAX_BULK_DECISIONS` (100 by default); the answers come in this order."
    )
    idempotency_key: str | None = strawberry.field(
        default=None,
        description="Repeating the request with this key (and the same decisions) returns the first answers.",
    )
    wait_for: DecisionWait = strawberry.field(
        default=DecisionWait.OUTCOME, description="For each decision, as `approveToolCall`'s. " + WAIT_FOR_DESCRIPTION
    )
