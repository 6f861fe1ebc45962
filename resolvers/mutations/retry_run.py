"""``retryRun``: continue again a run whose continuation failed (its decisions are kept)."""

from __future__ import annotations

import strawberry

from ..access import CanDecide
from ..context import Info
from ..inputs import RetryRunInput
from ._results import RetryRunResult, retry_result


@strawberry.mutation(
    description="Continue a run whose every call is decided but whose continuation failed or was abandoned.",
    permission_classes=[CanDecide],
)
async def retry_run(info: Info, input: RetryRunInput) -> RetryRunResult:
    context = info.context
    return await retry_result(
        context.runs.retry(str(input.agent_id), str(input.run_id), principal=context.principal),
        context.agents.tool_schemas(),
    )
