"""``declineToolCall``: decline one pending call; it is never executed (seed: ``declineToolCall``)."""

from __future__ import annotations

import strawberry

from ..context import Info
from ..inputs import DeclineToolCallInput
from ..metrics import counted_decision
from ._results import DecisionResult, outcome_or_error


@strawberry.mutation(
    description="Decline a tool call waiting for approval; the tool never runs and the reason reaches the model."
)
async def decline_tool_call(info: Info, input: DeclineToolCallInput) -> DecisionResult:
    context = info.context
    return await outcome_or_error(  # type: ignore[return-value]
        counted_decision(
            "decline",
            context.runs.decline(
                str(input.agent_id),
                str(input.run_id),
                str(input.tool_call_id),
                reason=input.reason,
                principal=context.principal,
                idempotency_key=input.idempotency_key,
            ),
        )
    )
