"""``resumeRun``: give resume data to a call that suspended itself (Mastra's ``resumeStream()``)."""

from __future__ import annotations

import strawberry

from runtime import DECIDE

from ..access import check_decision, require_scope
from ..context import Info
from ..inputs import ResumeRunInput
from ..limits import check_resume_data
from ..metrics import counted_decision
from ._results import DecisionResult, outcome_or_error, refusal


@strawberry.mutation(
    description="Resume a tool call that called `suspend()`, with data checked against its `resumeSchema`."
)
async def resume_run(info: Info, input: ResumeRunInput) -> DecisionResult:
    require_scope(info, DECIDE)
    check_resume_data(info, input.resume_data)
    context = info.context
    call_id = None if input.tool_call_id is None else str(input.tool_call_id)
    refused = await refusal(check_decision(info, str(input.agent_id), str(input.run_id), call_id, approving=True))
    if refused is not None:
        return refused  # type: ignore[return-value]
    return await outcome_or_error(  # type: ignore[return-value]
        counted_decision(
            "resume",
            context.runs.resume(
                str(input.agent_id),
                str(input.run_id),
                None if input.tool_call_id is None else str(input.tool_call_id),
                input.resume_data,
                principal=context.principal.name,
                idempotency_key=input.idempotency_key,
            ),
        )
    )
