"""Translation between pydantic-ai deferred tool calls and stored ``toolCalls``
(docs/architecture.md "Snapshot document")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from storage import ToolCallDocument

from . import _metadata
from ._json import jsonable


def declined_message(reason: str | None) -> str:
    """What the model reads as the result of a declined call."""
    if reason:
        return f"The user declined this tool call. Reason: {reason}"
    return "The user declined this tool call."


def tool_call_documents(requests: DeferredToolRequests, messages: Sequence[ModelMessage]) -> list[ToolCallDocument]:
    """The pending calls of a run that ended with ``requests``, in the order the model made them.

    Approvals list the model's arguments; calls deferred by ``suspend()`` list its payload and
    resume schema; calls deferred by ``delegate()`` list the sub-run's pending call
    (``delegated=True``); any other ``CallDeferred`` lists its metadata as the payload.
    """
    order: dict[str, int] = {}
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    order[part.tool_call_id] = len(order)
    docs = [_approval(part) for part in requests.approvals]
    docs += [_deferred_call(part, requests.metadata.get(part.tool_call_id)) for part in requests.calls]
    docs.sort(key=lambda doc: order.get(doc["toolCallId"], len(order)))
    return docs


def _approval(part: ToolCallPart) -> ToolCallDocument:
    return {
        "toolCallId": part.tool_call_id,
        "toolName": part.tool_name,
        "args": jsonable(part.args_as_dict()),
        "requiresApproval": True,
        "suspendPayload": None,
        "resumeSchema": None,
        "decision": None,
    }


def _deferred_call(part: ToolCallPart, metadata: dict[str, Any] | None) -> ToolCallDocument:
    ours = _metadata.section(metadata)
    if ours is not None and "delegated" in ours:
        return {
            "toolCallId": part.tool_call_id,
            "toolName": ours["toolName"],
            "args": ours.get("args"),
            "requiresApproval": bool(ours.get("requiresApproval")),
            "suspendPayload": ours.get("suspendPayload"),
            "resumeSchema": ours.get("resumeSchema"),
            "decision": None,
            "delegated": True,
        }
    if ours is not None:
        payload, schema = ours.get("suspendPayload"), ours.get("resumeSchema")
    else:
        payload, schema = jsonable(metadata) if metadata else None, None
    return {
        "toolCallId": part.tool_call_id,
        "toolName": part.tool_name,
        "args": None,
        "requiresApproval": False,
        "suspendPayload": payload,
        "resumeSchema": schema,
        "decision": None,
    }


def deferred_tool_results(calls: Sequence[ToolCallDocument]) -> DeferredToolResults:
    """The answers to pass to pydantic-ai for a run whose every call is decided.

    Approved and resumed calls are re-run (``ToolApproved``) with the decision in
    ``tool_call_metadata["runsgate"]``; declined calls are never run (``ToolDenied`` with the
    reason); delegated calls are always re-run so ``delegate()`` forwards the decision.

    Raises:
        ValueError: A call has no decision.
    """
    results = DeferredToolResults()
    for call in calls:
        decision, call_id = call["decision"], call["toolCallId"]
        if decision is None:
            raise ValueError(f"tool call {call_id!r} has no decision yet")
        answer: dict[str, Any] = {"decision": decision["kind"], "decidedBy": decision["decidedBy"]}
        if call.get("delegated"):
            answer["reason"] = decision["reason"]
            answer["resumeData"] = decision["resumeData"]
            answer["call"] = {
                "toolName": call["toolName"],
                "args": call["args"],
                "suspendPayload": call["suspendPayload"],
            }
        elif decision["kind"] == "declined":
            results.approvals[call_id] = ToolDenied(declined_message(decision["reason"]))
            continue
        elif decision["kind"] == "resumed":
            answer["resumeData"] = decision["resumeData"]
        results.approvals[call_id] = ToolApproved()
        results.metadata[call_id] = _metadata.wrap(answer)
    return results


def results_applied(messages: Sequence[ModelMessage], call_ids: Sequence[str]) -> bool:
    """Whether ``messages`` already answer every call in ``call_ids`` in a complete last request.

    True after a continuation ran the decided tools and then failed (e.g. the model raised on
    the next turn): pydantic-ai captured a final ``ModelRequest`` holding the tools' returns
    (``capture_run_messages``). Continuing from those messages without deferred results sends
    that request again instead of running the tools again. A request interrupted while tools
    ran (``state='interrupted'``, pydantic-ai would make up answers for the missing calls) or
    one missing an answer does not count: the tools then run again on retry.
    """
    if not messages or not call_ids:
        return False
    last = messages[-1]
    if not isinstance(last, ModelRequest) or last.state != "complete":
        return False
    answered = {part.tool_call_id for part in last.parts if isinstance(part, ToolReturnPart | RetryPromptPart)}
    return set(call_ids) <= answered
