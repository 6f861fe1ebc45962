"""``approveToolCall``: approve one pending call (Mastra's ``approveToolCall()``)."""

from __future__ import annotations

from collections.abc import Awaitable

import strawberry

from runtime import Principal, RunManager
from runtime import RunOutcome as DomainOutcome

from ..access import CanDecide
from ..context import Info
from ..inputs import ApproveToolCallInput
from ._results import DecisionMutation, DecisionResult


class ApproveToolCall(DecisionMutation[ApproveToolCallInput]):
    kind = "approve"

    @classmethod
    def perform(cls, runs: RunManager, principal: Principal, input: ApproveToolCallInput) -> Awaitable[DomainOutcome]:
        return runs.approve(
            str(input.agent_id),
            str(input.run_id),
            str(input.tool_call_id),
            principal=principal,
            idempotency_key=input.idempotency_key,
            edited_args=input.edited_args,
            question_id=None if input.question_id is None else str(input.question_id),
            wait_for=input.wait_for.wait,
        )


@strawberry.mutation(
    description="Approve a tool call waiting for approval; the run continues once every call is decided.",
    permission_classes=[CanDecide],
)
async def approve_tool_call(info: Info, input: ApproveToolCallInput) -> DecisionResult:
    return await ApproveToolCall.mutate(info, input)
