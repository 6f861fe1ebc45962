"""``runUpdates``: one run's progress as it continues (docs/api.md "Run updates").

Served over WebSocket (``graphql-transport-ws``) as ``suspendedRunEvents`` is, with the same
authorization (``runs:read``; a run outside the principal's resources is ``RUN_NOT_FOUND``, as a
missing one). The updates come from the process's ``runtime.RunUpdateFeed``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import AsyncGenerator
from datetime import datetime

import strawberry

from runtime import UPDATE_ID
from runtime import RunUpdate as DomainUpdate

from ..agents import require_agent
from ..context import Info, fresh_loaders
from ..errors import QueryArgumentError, SubscriptionEndedError, stream_endings
from ..scalars import JSON
from ..types import SuspendedRun


@strawberry.enum(description="What a `RunUpdate` says.")
class RunUpdateKind(enum.Enum):
    RESUMED = strawberry.enum_value("resumed", description="A continuation began (its `resumed` event).")
    TEXT = strawberry.enum_value("text", description="A delta of the model's text (`text`).")
    TOOL_CALL_STARTED = strawberry.enum_value(
        "tool_call_started", description="A tool call starts (`toolCallId`, `toolName`, `args`)."
    )
    TOOL_CALL_ENDED = strawberry.enum_value(
        "tool_call_ended", description="A tool call ended (`result`, or `error`: what the model is told)."
    )
    TOOL_CALL_DECLINED = strawberry.enum_value(
        "tool_call_declined",
        description="A declined call, whose tool never ran (`toolCallId`, `toolName`, `reason`, `decidedBy`): "
        "sent in place of its start and end.",
    )
    SUSPENDED = strawberry.enum_value("suspended", description="The run suspended again (`run`, with its calls).")
    COMPLETED = strawberry.enum_value("completed", description="The run completed (`output`).")
    FAILED = strawberry.enum_value("failed", description="The run failed (`error`; `run`, kept for a retry).")


@strawberry.type(description='One update of a continuing run (docs/api.md "Run updates").')
class RunUpdate:
    id: strawberry.ID = strawberry.field(
        description="Ordered within the run; pass it as `after` to resume the stream after this update."
    )
    kind: RunUpdateKind
    at: datetime = strawberry.field(description="UTC.")
    continuation_id: strawberry.ID = strawberry.field(
        description="The continuation it belongs to: the id of its `resumed` run event."
    )
    text: str | None = strawberry.field(default=None, description="TEXT: the delta.")
    tool_call_id: strawberry.ID | None = strawberry.field(
        default=None, description="TOOL_CALL_*: runsgate's call identity (as in `toolCalls` and `runEvents`)."
    )
    tool_name: str | None = strawberry.field(default=None, description="TOOL_CALL_*.")
    args: JSON | None = strawberry.field(default=None, description="TOOL_CALL_STARTED: the call's arguments.")
    result: JSON | None = strawberry.field(default=None, description="TOOL_CALL_ENDED: what the tool returned.")
    error: str | None = strawberry.field(
        default=None, description="TOOL_CALL_ENDED: what the model was told instead; FAILED: `Type: message`."
    )
    reason: str | None = strawberry.field(
        default=None,
        description="TOOL_CALL_DECLINED: the decision's reason: a person's (null when they gave none), or, for an "
        "expiry, what the model was told.",
    )
    decided_by: str | None = strawberry.field(
        default=None,
        description='TOOL_CALL_DECLINED: who declined it: a principal, `"expiry"` or `"policy:<name>"` '
        "(as the call's `decision.decidedBy`).",
    )
    output: JSON | None = strawberry.field(default=None, description="COMPLETED: the agent's final output.")
    truncated: bool = strawberry.field(
        default=False,
        description="`args`, `result` or `output` were left out: the update was over 64 KiB "
        "(the values are in `runEvents` and the run).",
    )
    run: SuspendedRun | None = strawberry.field(
        default=None, description="SUSPENDED and FAILED: the stored run, as it is when the update is sent."
    )

    @classmethod
    def from_domain(cls, update: DomainUpdate, info: Info) -> RunUpdate:
        run = None
        if update.run is not None:
            run = SuspendedRun.from_document(update.run, info.context.agents.tool_schemas())
        # each field is the update's of the same name (ids are strings), but its kind and run
        shown = {field.name: getattr(update, field.name) for field in dataclasses.fields(cls) if field.name != "run"}
        return cls(**{**shown, "kind": RunUpdateKind(update.kind), "run": run})


RUN_UPDATES_DESCRIPTION = (
    "The progress of one run as it continues, on any instance: the current continuation from its beginning "
    "(RESUMED, TEXT deltas, TOOL_CALL_STARTED / TOOL_CALL_ENDED, TOOL_CALL_DECLINED for a declined call), up to its "
    "outcome (SUSPENDED, COMPLETED or "
    "FAILED); then the stream completes. A run waiting for decisions streams its next continuation; `after` "
    "(an update's `id`) resumes after that update."
)


async def run_updates(
    info: Info, agent_id: strawberry.ID, run_id: strawberry.ID, after: strawberry.ID | None = None
) -> AsyncGenerator[RunUpdate, None]:
    """``Subscription.runUpdates`` (module docstring).

    Raises:
        QueryArgumentError: ``after`` is not an update id.
        SubscriptionEndedError: ``RUN_NOT_FOUND``, ``SHUTTING_DOWN``, ``STORE_UNAVAILABLE``,
            ``SUBSCRIPTIONS_UNAVAILABLE``.
    """
    require_agent(info, str(agent_id))
    if after is not None and not UPDATE_ID.match(str(after)):
        raise QueryArgumentError("`after` is not the id of a run update", argument="after")
    feed = info.context.run_updates
    if feed is None:
        raise SubscriptionEndedError("subscriptions are not served here", code="SUBSCRIPTIONS_UNAVAILABLE")
    stream = feed.subscribe(
        str(agent_id),
        str(run_id),
        after=None if after is None else str(after),
        principal=info.context.principal,
    )
    try:
        with stream_endings():
            async for update in stream:
                fresh_loaders()
                yield RunUpdate.from_domain(update, info)
    finally:
        await stream.aclose()


__all__ = ["RUN_UPDATES_DESCRIPTION", "RunUpdate", "RunUpdateKind", "run_updates"]
