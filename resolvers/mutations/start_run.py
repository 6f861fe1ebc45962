"""``startRun``: run an agent; a run that suspends is stored and listed (docs/architecture.md "Start")."""

from __future__ import annotations

import strawberry

from runtime import START, ForbiddenError

from ..access import check_start, require_scope
from ..context import Info
from ..errors import to_user_error
from ..inputs import StartRunInput
from ._results import StartRunResult, outcome_or_error


@strawberry.mutation(description="Start a run of an agent; it is listed if it suspends.")
async def start_run(info: Info, input: StartRunInput) -> StartRunResult:
    require_scope(info, START)
    context = info.context
    try:
        check_start(info, input.resource_id)
    except ForbiddenError as error:
        return to_user_error(error)  # type: ignore[return-value]
    return await outcome_or_error(  # type: ignore[return-value]
        context.runs.start_run(
            str(input.agent_id),
            input.prompt,
            thread_id=input.thread_id,
            resource_id=input.resource_id,
            idempotency_key=input.idempotency_key,
            principal=context.principal.name,
        )
    )
