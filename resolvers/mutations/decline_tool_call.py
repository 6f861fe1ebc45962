"""``declineToolCall``: decline one pending call; it is never executed (Mastra's ``declineToolCall()``)."""

from __future__ import annotations

import strawberry

from ..access import CanDecide
from ..context import Info
from ..inputs import DeclineToolCallInput
from ._results import DecisionResult, decision_result


@strawberry.mutation(
    description="Decline a tool call waiting for approval; the tool never runs and the reason reaches the model.",
    permission_classes=[CanDecide],
)
async def decline_tool_call(info: Info, input: DeclineToolCallInput) -> DecisionResult:
    context = info.context
    decision = context.runs.decline(
        str(input.agent_id),
        str(input.run_id),
        str(input.tool_call_id),
        reason=input.reason,
        principal=context.principal,
        idempotency_key=input.idempotency_key,
        question_id=None if input.question_id is None else str(input.question_id),
        wait_for=input.wait_for.wait,
    )
    return await decision_result("decline", decision, context.agents)
