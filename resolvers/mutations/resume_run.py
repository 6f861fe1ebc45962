"""``resumeRun``: give resume data to a call that suspended itself (Mastra's ``resumeStream()``)."""

from __future__ import annotations

from collections.abc import Awaitable

import strawberry

from runtime import Principal, RunManager
from runtime import RunOutcome as DomainOutcome

from ..access import CanDecide
from ..context import Info
from ..inputs import ResumeRunInput
from ._results import DecisionMutation, DecisionResult


class ResumeRun(DecisionMutation[ResumeRunInput]):
    kind = "resume"

    @classmethod
    def perform(cls, runs: RunManager, principal: Principal, input: ResumeRunInput) -> Awaitable[DomainOutcome]:
        return runs.resume(
            str(input.agent_id),
            str(input.run_id),
            None if input.tool_call_id is None else str(input.tool_call_id),
            input.resume_data,
            principal=principal,
            idempotency_key=input.idempotency_key,
            question_id=None if input.question_id is None else str(input.question_id),
            wait_for=input.wait_for.wait,
        )


@strawberry.mutation(
    description="Resume a tool call that called `suspend()`, with data checked against its `resumeSchema`.",
    permission_classes=[CanDecide],
)
async def resume_run(info: Info, input: ResumeRunInput) -> DecisionResult:
    return await ResumeRun.mutate(info, input)
