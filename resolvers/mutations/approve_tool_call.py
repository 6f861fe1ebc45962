"""``approveToolCall``: approve one pending call (Mastra's ``approveToolCall()``)."""

from __future__ import annotations

import strawberry

from ..access import CanDecide
from ..context import Info
from ..inputs import ApproveToolCallInput
from ._results import DecisionResult, decision_result


@strawberry.mutation(
    description="Approve a tool call waiting for approval; the run continues once every call is decided.",
    permission_classes=[CanDecide],
)
async def approve_tool_call(info: Info, input: ApproveToolCallInput) -> DecisionResult:
    context = info.context
    decision = context.runs.approve(
        str(input.agent_id),
        str(input.run_id),
        str(input.tool_call_id),
        principal=context.principal,
        idempotency_key=input.idempotency_key,
        edited_args=input.edited_args,
        question_id=None if input.question_id is None else str(input.question_id),
        wait_for=input.wait_for.wait,
    )
    return await decision_result("approve", decision, context.agents)
