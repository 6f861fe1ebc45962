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

    Every call of ``suspend()`` inside one tool call is its own question. The first time the
    tool reaches a ``suspend()`` point that has no answer yet, the run suspends, listing the
    call with this ``payload`` and ``resume_schema`` and a new ``questionId``. After a resume,
    the tool runs again from its top with the same arguments: each ``suspend()`` point already
    answered returns its answer, in order (the first point the first answer, and so on), and the
    next unanswered one suspends the run again. An answer is never reused for another point.
    So a tool must ask the same questions in the same order when it runs again, and must do
    nothing it cannot repeat before its last ``suspend()`` (docs/writing-agents.md).

    Args:
        ctx: The tool's run context.
        payload: What the client is shown as the call's ``suspendPayload`` (JSON-serialisable;
            pydantic models and dataclasses are converted).
        resume_schema: What the resume data must look like: a pydantic model class (its JSON
            Schema is published as ``resumeSchema`` and the data is returned as a model
            instance), a JSON Schema dict (data returned as plain JSON), or ``None`` (any JSON).
            runsgate validates resume data against the schema of the question it answers
            before recording it.

    Returns:
        The answer to this ``suspend()`` point, when the tool is re-run after it was given.

    Raises:
        CallDeferred: This point has no answer yet (``kind="question"``), carrying the payload
            and schema under ``metadata["runsgate"]``; the agent run ends with this call pending.
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
