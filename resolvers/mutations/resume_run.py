"""``resumeRun``: give resume data to a call that suspended itself (Mastra's ``resumeStream()``)."""

from __future__ import annotations

import strawberry

from ..access import CanDecide
from ..context import Info
from ..inputs import ResumeRunInput
from ._results import DecisionResult, decision_result


@strawberry.mutation(
    description="Resume a tool call that called `suspend()`, with data checked against its `resumeSchema`.",
    permission_classes=[CanDecide],
)
async def resume_run(info: Info, input: ResumeRunInput) -> DecisionResult:
    context = info.context
    decision = context.runs.resume(
        str(input.agent_id),
        str(input.run_id),
        None if input.tool_call_id is None else str(input.tool_call_id),
        input.resume_data,
        principal=context.principal,
        idempotency_key=input.idempotency_key,
        question_id=None if input.question_id is None else str(input.question_id),
        wait_for=input.wait_for.wait,
    )
    return await decision_result("resume", decision, context.agents)
