"""Translation between pydantic-ai deferred tool calls and stored ``toolCalls``
(docs/architecture.md "Snapshot document")."""

from __future__ import annotations

import dataclasses
import uuid
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

from storage import EXPIRY_DECIDER, ToolCallDocument

from .._json import jsonable
from . import metadata as _metadata
from .identity import model_tool_call_id


def declined_message(reason: str | None) -> str:
    """What the model reads as the result of a declined call."""
    if reason:
        return f"The user declined this tool call. Reason: {reason}"
    return "The user declined this tool call."


def question_id(call: ToolCallDocument) -> str:
    """The id of the question ``call`` waits on (its ``toolCallId`` in documents written before
    questions had ids of their own)."""
    return call.get("questionId") or call["toolCallId"]


def model_id(call: ToolCallDocument) -> str:
    """The id the model gave ``call`` (``toolCallId`` in documents written before identities)."""
    return call.get("modelToolCallId") or call["toolCallId"]


def question_number(call: ToolCallDocument) -> int | None:
    """The place of the question ``call`` waits on in the call's life: 1 for its first; ``None``
    in documents written before schema version 4 (unknown)."""
    return call.get("questionNumber")


def tool_call_documents(
    requests: DeferredToolRequests,
    messages: Sequence[ModelMessage],
    previous: Sequence[ToolCallDocument] = (),
) -> list[ToolCallDocument]:
    """The pending calls of a run that ended with ``requests``, in the order the model made them.

    Approvals list the model's arguments and the tool's ``ApprovalRequired`` metadata
    (``approvalMetadata``); calls deferred by ``suspend()`` list its payload and resume schema;
    calls deferred by ``delegate()`` list the sub-run's pending call (``delegated=True``); any
    other ``CallDeferred`` lists its metadata as the payload. Every call gets a new
    ``questionId`` (a delegated call the sub-run's) and its ``questionNumber``: 1, or one more
    than its last question's under the same ``toolCallId`` in ``previous``.

    Args:
        previous: The calls of the run's last snapshot. A call deferred again under the same
            ``toolCallId`` (its tool re-ran and stopped at a later decision point) keeps what was
            decided there: the answers given so far (``answers``, plus the last resume data),
            whether it was approved (``approved``) and the arguments it was approved with, when
            edited (``editedArgs``).
    """
    order: dict[str, int] = {}
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    order[part.tool_call_id] = len(order)
    docs = [_approval(part, requests.metadata.get(part.tool_call_id)) for part in requests.approvals]
    docs += [_deferred_call(part, requests.metadata.get(part.tool_call_id)) for part in requests.calls]
    docs.sort(key=lambda doc: order.get(doc["toolCallId"], len(order)))
    earlier = {call["toolCallId"]: call for call in previous}
    for doc in docs:
        doc["questionId"] = doc.get("questionId") or uuid.uuid4().hex
        before = earlier.get(doc["toolCallId"])
        doc["questionNumber"] = 1 if before is None else (question_number(before) or 1) + 1
        if before is not None and not doc.get("delegated") and not before.get("delegated"):
            answers, approved = decided_so_far(before)
            if answers:
                doc["answers"] = answers
            if approved:
                doc["approved"] = True
            edited = edited_so_far(before)
            if edited is not None:
                doc["editedArgs"] = edited
    return docs


def decided_so_far(call: ToolCallDocument) -> tuple[list[Any], bool]:
    """The answers given to ``call``'s ``suspend()`` points so far, in order, and whether it was
    approved, counting its own decision (none counted while it has none)."""
    answers = list(call.get("answers") or [])
    approved = bool(call.get("approved"))
    decision = call["decision"]
    if decision is not None and decision["kind"] == "resumed":
        answers.append(decision["resumeData"])
    if decision is not None and decision["kind"] == "approved":
        approved = True
    return answers, approved


def edited_so_far(call: ToolCallDocument) -> Any:
    """The arguments ``call`` was approved with by an edit (its own decision's ``editedArgs``, else
    those of an earlier decision point); ``None`` when never edited."""
    decision = call["decision"]
    if decision is not None and decision.get("editedArgs") is not None:
        return decision["editedArgs"]
    return call.get("editedArgs")


def _approval(part: ToolCallPart, metadata: dict[str, Any] | None) -> ToolCallDocument:
    return {
        "toolCallId": part.tool_call_id,
        "modelToolCallId": model_tool_call_id(part),
        "toolName": part.tool_name,
        "args": jsonable(part.args_as_dict()),
        "requiresApproval": True,
        "suspendPayload": None,
        "resumeSchema": None,
        "decision": None,
        "approvalMetadata": jsonable(metadata) if metadata else None,
    }


def _deferred_call(part: ToolCallPart, metadata: dict[str, Any] | None) -> ToolCallDocument:
    ours = _metadata.section(metadata)
    if ours is not None and "delegated" in ours:
        inner = ours["delegated"]
        delegated: ToolCallDocument = {
            "toolCallId": part.tool_call_id,
            "modelToolCallId": model_tool_call_id(part),
            "toolName": ours["toolName"],
            "args": ours.get("args"),
            "requiresApproval": bool(ours.get("requiresApproval")),
            "suspendPayload": ours.get("suspendPayload"),
            "resumeSchema": ours.get("resumeSchema"),
            "decision": None,
            "delegated": True,
            "delegatedTo": {"agentId": inner["agentId"], "runId": inner["runId"], "toolCallId": inner["toolCallId"]},
            "approvalMetadata": ours.get("approvalMetadata"),
        }
        inner_question = inner.get("questionId")
        if inner_question:
            delegated["questionId"] = inner_question  # the sub-run's question: one question, two places
        return delegated
    if ours is not None:
        payload, schema = ours.get("suspendPayload"), ours.get("resumeSchema")
    else:
        payload, schema = jsonable(metadata) if metadata else None, None
    return {
        "toolCallId": part.tool_call_id,
        "modelToolCallId": model_tool_call_id(part),
        "toolName": part.tool_name,
        "args": None,
        "requiresApproval": False,
        "suspendPayload": payload,
        "resumeSchema": schema,
        "decision": None,
    }


def deferred_tool_results(calls: Sequence[ToolCallDocument]) -> DeferredToolResults:
    """The answers to pass to pydantic-ai for a run whose every call is decided.

    Declined calls are never run (``ToolDenied`` with the reason). Approved and resumed calls
    are re-run: pydantic-ai re-runs a deferred call only as ``ToolApproved``, so what was really
    decided goes in ``tool_call_metadata["runsgate"]``: ``approved`` (whether the call was ever
    approved), ``answers`` (every resume data given to it, in order; ``suspend()`` returns them
    one per ``suspend()`` point), ``resumeData`` (the last one), ``decision`` and ``decidedBy``.
    runsgate's toolset wrapper (``runtime.running.decision_toolset``) then shows the tool
    ``tool_call_approved`` = ``approved``, never the ``ToolApproved`` itself. A call approved
    with edited arguments (now or at an earlier decision point, ``edited_so_far``) re-runs with
    them: ``ToolApproved(override_args=...)``, which pydantic-ai validates again. Delegated calls
    are always re-run so ``delegate()`` forwards the decision (with the question it answers).

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
            answer["questionId"] = question_id(call)
            answer["approved"] = False
            answer["answers"] = []
            answer["call"] = {
                "toolName": call["toolName"],
                "args": call["args"],
                "suspendPayload": call["suspendPayload"],
            }
            # what the supervisor's gate checked, for the sub-run's gate to check again (runtime.deciding.gate)
            answer["scopes"] = decision.get("scopes") or []
            answer["approvers"] = [a["decidedBy"] for a in call.get("approvals") or []] or [decision["decidedBy"]]
            if decision.get("editedArgs") is not None:
                answer["editedArgs"] = decision["editedArgs"]
        elif decision["kind"] == "declined":
            reason = decision["reason"]
            expired = decision["decidedBy"] == EXPIRY_DECIDER and reason is not None  # the reason says why
            results.approvals[call_id] = ToolDenied(reason if expired and reason else declined_message(reason))
            continue
        else:
            answers, approved = decided_so_far(call)
            answer["approved"] = approved
            answer["answers"] = answers
            if decision["kind"] == "resumed":
                answer["resumeData"] = decision["resumeData"]
            edited = edited_so_far(call)
            if edited is not None:
                results.approvals[call_id] = ToolApproved(override_args=edited)
                results.metadata[call_id] = _metadata.wrap(answer)
                continue
        results.approvals[call_id] = ToolApproved()
        results.metadata[call_id] = _metadata.wrap(answer)
    return results


def with_edited_args(messages: Sequence[ModelMessage], calls: Sequence[ToolCallDocument]) -> list[ModelMessage]:
    """``messages`` with the ``ToolCallPart`` of each call approved with edited arguments
    (``edited_so_far``) carrying them, so the model reads the arguments the tool ran with
    (``ToolApproved.override_args`` changes only what runs). Other messages are kept as they are."""
    edits = {
        call["toolCallId"]: edited
        for call in calls
        if not call.get("delegated") and (edited := edited_so_far(call)) is not None
    }
    if not edits:
        return list(messages)
    edited_messages: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse) and any(
            isinstance(part, ToolCallPart) and part.tool_call_id in edits for part in message.parts
        ):
            parts = [
                dataclasses.replace(part, args=edits[part.tool_call_id])
                if isinstance(part, ToolCallPart) and part.tool_call_id in edits
                else part
                for part in message.parts
            ]
            message = dataclasses.replace(message, parts=parts)
        edited_messages.append(message)
    return edited_messages


def continued(
    messages: Sequence[ModelMessage], calls: Sequence[ToolCallDocument]
) -> tuple[list[ModelMessage], DeferredToolResults | None]:
    """What a continuation gives pydantic-ai for a run stored with ``messages`` whose ``calls`` are
    all decided: the history with edited arguments applied (``with_edited_args``), and the calls'
    results (``deferred_tool_results``), or ``None`` when the history already answers every call
    (``results_applied``: the tools ran before a failure, so they are not run again).

    Raises:
        ValueError: A call has no decision.
    """
    history = with_edited_args(messages, calls)
    if results_applied(history, [call["toolCallId"] for call in calls]):
        return history, None
    return history, deferred_tool_results(calls)


def settled(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` (captured from a run that failed) without the trailing responses the model
    never finished: a streamed request that failed leaves its partial response, ``state``
    ``interrupted`` (empty when the stream failed before its first part). A retry asks the model
    again from the last request instead."""
    kept = list(messages)
    while kept and isinstance(kept[-1], ModelResponse) and kept[-1].state == "interrupted":
        kept.pop()
    return kept


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
