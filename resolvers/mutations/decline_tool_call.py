"""``declineToolCall``: decline one pending call; it is never executed (Mastra's ``declineToolCall()``)."""

from __future__ import annotations

import strawberry

from runtime import DECIDE

from ..access import check_decision, require_scope
from ..context import Info
from ..inputs import DeclineToolCallInput
from ..metrics import counted_decision
from ._results import DecisionResult, outcome_or_error, refusal


@strawberry.mutation(
    description="Decline a tool call waiting for approval; the tool never runs and the reason reaches the model."
)
async def decline_tool_call(info: Info, input: DeclineToolCallInput) -> DecisionResult:
    require_scope(info, DECIDE)
    context = info.context
    refused = await refusal(
        check_decision(info, str(input.agent_id), str(input.run_id), str(input.tool_call_id), approving=False)
    )
    if refused is not None:
        return refused  # type: ignore[return-value]
    return await outcome_or_error(  # type: ignore[return-value]
        counted_decision(
            "decline",
            context.runs.decline(
                str(input.agent_id),
                str(input.run_id),
                str(input.tool_call_id),
                reason=input.reason,
                principal=context.principal.name,
                idempotency_key=input.idempotency_key,
            ),
        )
    )
