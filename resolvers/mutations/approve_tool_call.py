"""``approveToolCall``: approve one pending call (Mastra's ``approveToolCall()``)."""

from __future__ import annotations

import strawberry

from runtime import DECIDE

from ..access import check_decision, require_scope
from ..context import Info
from ..inputs import ApproveToolCallInput
from ..metrics import counted_decision
from ._results import DecisionResult, outcome_or_error, refusal


@strawberry.mutation(
    description="Approve a tool call waiting for approval; the run continues once every call is decided."
)
async def approve_tool_call(info: Info, input: ApproveToolCallInput) -> DecisionResult:
    require_scope(info, DECIDE)
    context = info.context
    refused = await refusal(
        check_decision(info, str(input.agent_id), str(input.run_id), str(input.tool_call_id), approving=True)
    )
    if refused is not None:
        return refused  # type: ignore[return-value]
    return await outcome_or_error(  # type: ignore[return-value]
        counted_decision(
            "approve",
            context.runs.approve(
                str(input.agent_id),
                str(input.run_id),
                str(input.tool_call_id),
                principal=context.principal.name,
                idempotency_key=input.idempotency_key,
            ),
        )
    )
