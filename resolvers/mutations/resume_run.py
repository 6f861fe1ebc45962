"""``resumeRun``: give resume data to a call that suspended itself (seed: ``resumeStream``)."""

from __future__ import annotations

import strawberry

from ..context import Info
from ..inputs import ResumeRunInput
from ..metrics import counted_decision
from ._results import DecisionResult, outcome_or_error


@strawberry.mutation(
    description="Resume a tool call that called `suspend()`, with data checked against its `resumeSchema`."
)
async def resume_run(info: Info, input: ResumeRunInput) -> DecisionResult:
    context = info.context
    return await outcome_or_error(  # type: ignore[return-value]
        counted_decision(
            "resume",
            context.runs.resume(
                str(input.agent_id),
                str(input.run_id),
                None if input.tool_call_id is None else str(input.tool_call_id),
                input.resume_data,
                principal=context.principal,
                idempotency_key=input.idempotency_key,
            ),
        )
    )
