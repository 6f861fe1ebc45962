"""``startRun``: run an agent; a run that suspends is stored and listed (docs/architecture.md "Start")."""

from __future__ import annotations

import strawberry

from ..access import CanStart
from ..argument_errors import QueryArgumentError
from ..context import Info
from ..inputs import StartRunInput
from ._results import StartRunResult, start_result


@strawberry.mutation(description="Start a run of an agent; it is listed if it suspends.", permission_classes=[CanStart])
async def start_run(info: Info, input: StartRunInput) -> StartRunResult:
    """Start ``input``'s run.

    Raises:
        QueryArgumentError: An empty or blank ``prompt`` (``BAD_USER_INPUT``): nothing is started.
    """
    if not input.prompt.strip():
        raise QueryArgumentError("`input.prompt` is empty: give the agent something to do", argument="input.prompt")
    context = info.context  # the input was held to its limits (resolvers.documents.limits.InputLimits)
    return await start_result(
        context.runs.start_run(
            str(input.agent_id),
            input.prompt,
            thread_id=input.thread_id,
            resource_id=input.resource_id,
            idempotency_key=input.idempotency_key,
            principal=context.principal,
        ),
        context.agents.tool_schemas(),
    )
