"""``suspend()``: how a tool waits for outside data (docs/writing-agents.md; as Mastra's
``suspend()`` / ``resumeData``).

``suspend(ctx, payload, resume_schema=...)`` raises pydantic-ai's ``CallDeferred`` the first time
(the run is stored, listing ``payload`` as the call's ``suspendPayload``); when the run is
resumed, the tool runs again with the same arguments and ``suspend`` returns the resume data.
Approvals need no helper (``requires_approval=True`` or ``ApprovalRequired``).
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from pydantic import BaseModel
from pydantic_ai import RunContext
from pydantic_ai.exceptions import CallDeferred

from .._json import jsonable
from . import metadata as _metadata

ModelT = TypeVar("ModelT", bound=BaseModel)


@overload
def suspend(ctx: RunContext[Any], payload: Any = None, *, resume_schema: type[ModelT]) -> ModelT: ...


@overload
def suspend(ctx: RunContext[Any], payload: Any = None, *, resume_schema: dict[str, Any] | None = None) -> Any: ...


def suspend(
    ctx: RunContext[Any],
    payload: Any = None,
    *,
    resume_schema: type[BaseModel] | dict[str, Any] | None = None,
) -> Any:
    """Ask a question and suspend the calling tool until it is answered, or return the answer.

    Each ``suspend()`` point of a tool call is a question of its own (docs/writing-agents.md): the
    first one without an answer suspends the run, listing ``payload`` (JSON-serialisable) as the
    call's ``suspendPayload`` with a new ``questionId``. After the answer the tool runs again from
    its top with the same arguments, and each point answered returns its answer, in order; so a
    tool asks the same questions in the same order, and does nothing it cannot repeat before them.
    ``resume_schema``: a pydantic model class (the answer is returned as an instance), a JSON
    Schema dict, or ``None`` (any JSON); the answer is validated against it before it is recorded.

    Raises:
        CallDeferred: This point has no answer yet; the agent run ends with the call pending.
        pydantic.ValidationError: The answer does not fit ``resume_schema`` (a model class).
    """
    ours = _metadata.section(ctx.tool_call_metadata)
    if ours is not None and isinstance(ours.get("answers"), list) and isinstance(ours.get("asked"), int):
        index: int = ours["asked"]
        ours["asked"] = index + 1
        if index < len(ours["answers"]):
            data = ours["answers"][index]
            if isinstance(resume_schema, type):
                return resume_schema.model_validate(data)
            return data
    schema = resume_schema.model_json_schema() if isinstance(resume_schema, type) else resume_schema
    raise CallDeferred(
        metadata=_metadata.wrap({"suspendPayload": jsonable(payload), "resumeSchema": schema}),
        kind="question",
    )


__all__ = ["suspend"]
