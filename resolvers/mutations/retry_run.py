"""``retryRun``: continue again a run whose continuation failed (its decisions are kept)."""

from __future__ import annotations

import strawberry

from runtime import DECIDE

from ..access import check_decision, require_scope
from ..context import Info
from ..inputs import RetryRunInput
from ._results import RetryRunResult, outcome_or_error, refusal


@strawberry.mutation(
    description="Continue a run whose every call is decided but whose continuation failed or was abandoned."
)
async def retry_run(info: Info, input: RetryRunInput) -> RetryRunResult:
    require_scope(info, DECIDE)
    context = info.context
    refused = await refusal(check_decision(info, str(input.agent_id), str(input.run_id), None, approving=False))
    if refused is not None:
        return refused  # type: ignore[return-value]
    return await outcome_or_error(  # type: ignore[return-value]
        context.runs.retry(str(input.agent_id), str(input.run_id), principal=context.principal.name)
    )
