"""``claimReview`` and ``releaseReview``: who is reviewing a pending question (a review claim,
``runtime.reviewing.claims``). Each names the question (run, call and question), never a call
by its current state; a domain error is the result union's ``UserError``, nothing changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

import strawberry

from runtime import Principal, RunsgateError
from runtime.reviewing.claims import ClaimAnswer

from ..access import CanDecide
from ..context import Info
from ..errors import (
    AgentNotFound,
    AmbiguousToolCall,
    DecideThroughSupervisor,
    DuplicateApprover,
    Forbidden,
    QuestionNotPending,
    ReviewAlreadyClaimed,
    ReviewClaimNotHeld,
    RunNotFound,
    RunNotReady,
    SeparationOfDuties,
    ToolCallAlreadyDecided,
    ToolCallNotFound,
    WrongToolCallKind,
    to_user_error,
)
from ..types import ReviewClaim


@strawberry.input(description="The question a review claim is on: its run, its call and its `questionId`.")
class ReviewClaimInput:
    agent_id: strawberry.ID
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    question_id: strawberry.ID


@strawberry.type(description="The question's review claim as written.")
class ReviewClaimed:
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    question_id: strawberry.ID
    review_claim: ReviewClaim | None = strawberry.field(description="The caller's; null once released.")


ReviewClaimError = (
    AgentNotFound
    | RunNotFound
    | ToolCallNotFound
    | ToolCallAlreadyDecided
    | QuestionNotPending
    | WrongToolCallKind
    | AmbiguousToolCall
    | DecideThroughSupervisor
    | Forbidden
    | SeparationOfDuties
    | DuplicateApprover
    | ReviewAlreadyClaimed
    | ReviewClaimNotHeld
    | RunNotReady
)
ReviewClaimResult = Annotated[
    ReviewClaimed | ReviewClaimError,
    strawberry.union("ReviewClaimResult", description="The review claim as written, or why nothing was."),
]


ReviewClaimAction = Callable[[str, str, str, str, Principal], Awaitable[ClaimAnswer]]
"""``ReviewClaims.claim`` or ``ReviewClaims.release``: ``(agentId, runId, toolCallId, questionId, principal)``."""


async def _answer(info: Info, input: ReviewClaimInput, write: ReviewClaimAction) -> ReviewClaimed | ReviewClaimError:
    """``write`` on the question ``input`` names, by the caller: the claim as written, or the
    domain error's GraphQL type (a member of ``ReviewClaimResult``; any other raises ``TypeError``)."""
    try:
        agent_id = str(input.agent_id)
        info.context.runs.check_agent(agent_id)
        named = (agent_id, str(input.run_id), str(input.tool_call_id), str(input.question_id))
        answer = await write(*named, info.context.principal)
    except RunsgateError as error:
        user_error = to_user_error(error)
        if isinstance(user_error, ReviewClaimError):
            return user_error
        raise TypeError(f"{type(error).__name__} is not a member of ReviewClaimResult") from error
    return ReviewClaimed(
        run_id=strawberry.ID(answer.run["_id"]),
        tool_call_id=strawberry.ID(answer.tool_call_id),
        question_id=strawberry.ID(answer.question_id),
        review_claim=None if answer.claim is None else ReviewClaim.from_document(answer.claim),
    )


@strawberry.mutation(
    description="Mark a pending question as being reviewed by the caller, for `RUNSGATE_REVIEW_CLAIM_TTL` seconds "
    "(claimed again: from now). Advice, not a lock: others see it in `reviewQueue` and may still decide. Only a "
    "caller who may approve (or resume) the question may claim it: else the refusal its decision would get "
    "(`Forbidden`, `SeparationOfDuties`, `RunNotFound`).",
    permission_classes=[CanDecide],
)
async def claim_review(info: Info, input: ReviewClaimInput) -> ReviewClaimResult:
    return await _answer(info, input, info.context.runs.review_claims.claim)


@strawberry.mutation(
    description="End the caller's review claim on a pending question (a decision ends it by itself).",
    permission_classes=[CanDecide],
)
async def release_review(info: Info, input: ReviewClaimInput) -> ReviewClaimResult:
    return await _answer(info, input, info.context.runs.review_claims.release)


__all__ = ["ReviewClaimInput", "claim_review", "release_review"]
