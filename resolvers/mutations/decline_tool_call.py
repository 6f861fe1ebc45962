"""``declineToolCall``: decline one pending call; it is never executed (Mastra's ``declineToolCall()``)."""

from __future__ import annotations

from collections.abc import Awaitable

import strawberry

from runtime import Principal, RunManager
from runtime import RunOutcome as DomainOutcome

from ..access import CanDecide
from ..context import Info
from ..inputs import DeclineToolCallInput
from ._results import DecisionMutation, DecisionResult


class DeclineToolCall(DecisionMutation[DeclineToolCallInput]):
    kind = "decline"

    @classmethod
    def perform(cls, runs: RunManager, principal: Principal, input: DeclineToolCallInput) -> Awaitable[DomainOutcome]:
        return runs.decline(
            str(input.agent_id),
            str(input.run_id),
            str(input.tool_call_id),
            reason=input.reason,
            principal=principal,
            idempotency_key=input.idempotency_key,
            question_id=None if input.question_id is None else str(input.question_id),
            wait_for=input.wait_for.wait,
        )


@strawberry.mutation(
    description="Decline a tool call waiting for approval; the tool never runs and the reason reaches the model.",
    permission_classes=[CanDecide],
)
async def decline_tool_call(info: Info, input: DeclineToolCallInput) -> DecisionResult:
    return await DeclineToolCall.mutate(info, input)
