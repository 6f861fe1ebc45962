"""``approveToolCall``: approve one pending call (seed: ``approveToolCall``)."""

from __future__ import annotations

import strawberry

from ..context import Info
from ..inputs import ApproveToolCallInput
from ..metrics import counted_decision
from ._results import DecisionResult, outcome_or_error


@strawberry.mutation(
    description="Approve a tool call waiting for approval; the run continues once every call is decided."
)
async def approve_tool_call(info: Info, input: ApproveToolCallInput) -> DecisionResult:
    context = info.context
    return await outcome_or_error(  # type: ignore[return-value]
        counted_decision(
            "approve",
            context.runs.approve(
                str(input.agent_id),
                str(input.run_id),
                str(input.tool_call_id),
                principal=context.principal,
                idempotency_key=input.idempotency_key,
            ),
        )
    )
