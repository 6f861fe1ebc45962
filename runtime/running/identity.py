"""Tool call identities of runsgate's own (docs/architecture.md "Call identity").

A model's tool call ids are data, never identities: local models restart them each turn and some
providers repeat one within a turn. ``CallIdentity``, a pydantic-ai capability on every run,
gives each ``ToolCallPart`` of a model response an id of runsgate's own before pydantic-ai reads
the response (``derived_call_id`` of the run, the call's place and the call; ``new_call_id`` when
that one is taken), keeping the model's id in ``provider_details["runsgate"]``. pydantic-ai, the
tools, the stored history and runsgate's documents see only these ids. The copy sent to the model
holds the model's own ids again (the call parts and their returns alike).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from storage import SnapshotDocument, ToolCallDocument

from .._json import canonical_json
from . import internals
from . import metadata as _metadata


def new_call_id(taken: Iterable[str] = ()) -> str:
    """A new call identity (``c_`` and 24 hex digits, 96 random bits), none of ``taken``."""
    used = set(taken)
    while True:
        candidate = f"c_{uuid.uuid4().hex[:24]}"
        if candidate not in used:
            return candidate


_CALLS = uuid.UUID("0c5e7a3d-9b41-4c8e-8f2a-6d1b7e4a9c20")


def derived_call_id(run_id: str, messages: Sequence[ModelMessage], response: ModelResponse, index: int) -> str:
    """The identity the call part ``response.parts[index]`` of run ``run_id`` derives (``c_`` and
    24 hex digits of a UUID 5), when ``messages`` is the history before ``response``: of the run,
    the response's index in ``messages``, the last call identity there, the part's index, its tool
    name and its arguments. The same history and the same answer of the model derive the same one."""
    part = response.parts[index]
    assert isinstance(part, ToolCallPart)
    at = len(messages) - 1 if messages and messages[-1] is response else len(messages)
    last = next(
        (
            p.tool_call_id
            for m in reversed(messages[:at])
            if isinstance(m, ModelResponse)
            for p in reversed(m.parts)
            if isinstance(p, ToolCallPart)
        ),
        None,
    )
    name = canonical_json([run_id, at, last, index, part.tool_name, part.args_as_dict()])
    return f"c_{uuid.uuid5(_CALLS, name).hex[:24]}"


_SUB_RUNS = uuid.UUID("6f0b2b8e-5d0c-4f57-9a53-2a1f1f3f7c11")


def sub_run_id(parent_run_id: str, tool_call_id: str) -> str:
    """The id of the sub-run that the parent run's call ``tool_call_id`` (its identity) starts
    (``delegate()``): derived, so a re-run call finds its sub-run again without extra storage."""
    return uuid.uuid5(_SUB_RUNS, f"{parent_run_id}/{tool_call_id}").hex


def model_tool_call_id(part: ToolCallPart) -> str:
    """The id the model gave ``part`` (its ``tool_call_id`` when runsgate never renamed it: a
    history stored before identities, schema version 2)."""
    ours = (part.provider_details or {}).get(_metadata.KEY)  # the note ``identified`` wrote
    if isinstance(ours, dict) and isinstance(ours.get("modelToolCallId"), str):
        return str(ours["modelToolCallId"])
    return part.tool_call_id


def identified(
    response: ModelResponse,
    messages: Sequence[ModelMessage],
    *,
    run_id: str | None = None,
    taken: Iterable[str] = (),
) -> ModelResponse:
    """``response`` with each ``ToolCallPart`` given an identity that neither ``messages`` (the
    history before it) nor ``taken`` holds, the model's id kept in its ``provider_details``:
    ``derived_call_id`` under ``run_id`` unless that one is taken, else (or without ``run_id``)
    ``new_call_id``."""
    used = call_ids(messages) | set(taken)
    parts: list[Any] = []
    for index, part in enumerate(response.parts):
        if isinstance(part, ToolCallPart):
            identity = derived_call_id(run_id, messages, response, index) if run_id is not None else None
            if identity is None or identity in used:
                identity = new_call_id(used)
            used.add(identity)
            details = {**(part.provider_details or {}), _metadata.KEY: {"modelToolCallId": part.tool_call_id}}
            part = dataclasses.replace(part, tool_call_id=identity, provider_details=details)
        parts.append(part)
    return dataclasses.replace(response, parts=parts)


def as_sent(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` as the model provider is sent them: each renamed call part and each of its
    returns under the model's own id, runsgate's note removed from ``provider_details``."""
    model_ids: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and (own := model_tool_call_id(part)) != part.tool_call_id:
                    model_ids[part.tool_call_id] = own
    if not model_ids:
        return list(messages)
    sent: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            message = dataclasses.replace(message, parts=[_call_as_sent(p, model_ids) for p in message.parts])
        elif isinstance(message, ModelRequest):
            message = dataclasses.replace(message, parts=[_return_as_sent(p, model_ids) for p in message.parts])
        sent.append(message)
    return sent


def _call_as_sent(part: Any, model_ids: dict[str, str]) -> Any:
    if not isinstance(part, ToolCallPart) or part.tool_call_id not in model_ids:
        return part
    details = {k: v for k, v in (part.provider_details or {}).items() if k != _metadata.KEY}
    return dataclasses.replace(part, tool_call_id=model_ids[part.tool_call_id], provider_details=details or None)


def _return_as_sent(part: Any, model_ids: dict[str, str]) -> Any:
    if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id in model_ids:
        return dataclasses.replace(part, tool_call_id=model_ids[part.tool_call_id])
    return part


def identified_legacy(
    messages: Sequence[ModelMessage], doc: SnapshotDocument
) -> tuple[list[ModelMessage], list[ToolCallDocument]]:
    """``messages`` (a run's stored history) and ``doc``'s calls, each call naming its own part.

    A history written before identities (schema version 2) holds the model's ids, which may
    repeat: then every part sharing an id gets an identity of its own (its returns too, matched
    by tool name in order), and each stored call the identity of its part in the last response
    (by id, then tool name). A history whose ids are unique and name every call is returned as it is.
    """
    calls = doc["toolCalls"]
    positions = [
        (m, j)
        for m, message in enumerate(messages)
        if isinstance(message, ModelResponse)
        for j, part in enumerate(message.parts)
        if isinstance(part, ToolCallPart)
    ]
    ids = [_part(messages, at).tool_call_id for at in positions]
    repeated = {i for i, n in Counter(ids).items() if n > 1}
    if not repeated and {c["toolCallId"] for c in calls} <= set(ids):
        return list(messages), list(calls)
    used, renamed = set(ids), dict[tuple[int, int], str]()
    last = [at for at in positions if at[0] == positions[-1][0]] if positions else []
    matched: list[ToolCallDocument] = []
    for call in calls:
        part_at = _match(messages, last, call, taken=renamed)
        if part_at is None:
            matched.append(call)
            continue
        part = _part(messages, part_at)
        identity = part.tool_call_id if part.tool_call_id not in repeated else new_call_id(used)
        used.add(identity)
        renamed[part_at] = identity
        matched.append({**call, "toolCallId": identity, "modelToolCallId": model_id_of(call, part)})
    for at in positions:
        if at not in renamed and _part(messages, at).tool_call_id in repeated:
            renamed[at] = new_call_id(used)
            used.add(renamed[at])
    return _renamed(messages, renamed), matched


def model_id_of(call: ToolCallDocument, part: ToolCallPart) -> str:
    return call.get("modelToolCallId") or model_tool_call_id(part)


def _part(messages: Sequence[ModelMessage], at: tuple[int, int]) -> ToolCallPart:
    part = messages[at[0]].parts[at[1]]
    assert isinstance(part, ToolCallPart)
    return part


def _match(
    messages: Sequence[ModelMessage], last: list[tuple[int, int]], call: ToolCallDocument, *, taken: dict[Any, str]
) -> tuple[int, int] | None:
    """The part of the last response ``call`` stands for: its identity, else its model's id; of several, the
    first of the call's tool name."""
    free = [at for at in last if at not in taken]
    for key in (lambda p: p.tool_call_id, model_tool_call_id):
        found = [at for at in free if key(_part(messages, at)) == call["toolCallId"]]
        if found:
            return next((at for at in found if _part(messages, at).tool_name == call["toolName"]), found[0])
    return None


def _renamed(messages: Sequence[ModelMessage], renamed: dict[tuple[int, int], str]) -> list[ModelMessage]:
    """``messages`` with the call parts at ``renamed``'s positions given their new identities (the
    model's ids kept), and each one's returns, in the requests up to the next response, renamed too."""
    out = list(messages)
    pending: list[tuple[str, str, str]] = []  # (old id, tool name, new id) awaiting their returns
    for m, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            pending = []
            parts: list[Any] = []
            for j, part in enumerate(message.parts):
                new = renamed.get((m, j))
                if isinstance(part, ToolCallPart) and new is not None and new != part.tool_call_id:
                    pending.append((part.tool_call_id, part.tool_name, new))
                    details = {
                        **(part.provider_details or {}),
                        _metadata.KEY: {"modelToolCallId": model_tool_call_id(part)},
                    }
                    part = dataclasses.replace(part, tool_call_id=new, provider_details=details)
                parts.append(part)
            out[m] = dataclasses.replace(message, parts=parts)
        elif isinstance(message, ModelRequest) and pending:
            request_parts: list[Any] = []
            for request_part in message.parts:
                if isinstance(request_part, ToolReturnPart | RetryPromptPart):
                    hit = next(
                        (
                            r
                            for r in pending
                            if r[0] == request_part.tool_call_id and request_part.tool_name in (None, r[1])
                        ),
                        None,
                    )
                    if hit is not None:
                        pending.remove(hit)
                        request_part = dataclasses.replace(request_part, tool_call_id=hit[2])
                request_parts.append(request_part)
            out[m] = dataclasses.replace(message, parts=request_parts)
    return out


def call_ids(messages: Iterable[ModelMessage]) -> set[str]:
    """Every tool call id in ``messages``."""
    return {
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }


@dataclass
class CallIdentity(AbstractCapability[Any]):
    """Gives each tool call of a model response an identity (``identified``: derived under
    ``run_id``, the run's id, none it gave before), and sends the model its own ids."""

    run_id: str | None = None
    issued: set[str] = field(default_factory=set[str], repr=False)
    """The identities given in this agent run: a history processor may drop them from view."""

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        return self.give(response, ctx.messages)

    def give(self, response: ModelResponse, messages: Sequence[ModelMessage]) -> ModelResponse:
        """``response`` with its tool calls' identities (``identified``), ``messages`` the run's
        history before it; noted as given. ``response`` itself when it calls no tool."""
        if not any(isinstance(part, ToolCallPart) for part in response.parts):
            return response
        response = identified(response, messages, run_id=self.run_id, taken=self.issued)
        self.issued |= call_ids([response])
        return response

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        sent = as_sent(request_context.messages)
        if len(sent) == len(request_context.messages) and all(
            a is b for a, b in zip(sent, request_context.messages, strict=True)
        ):
            return request_context
        return dataclasses.replace(request_context, messages=sent)


class IdentifyingModel(WrapperModel):
    """A model wrapper that does ``CallIdentity``'s work itself once ``identity`` is set (by
    ``runtime.running.execution.run_agent``, which then gives the run no capability): the wrapped
    model (``answer``) is sent its own ids (``as_sent``), and its answer's calls get identities
    (``CallIdentity.give``) against the history of the run calling it
    (``internals.current_run_context``; the request's messages outside a run)."""

    identity: CallIdentity | None = None

    async def request(
        self, messages: list[ModelMessage], settings: ModelSettings | None, parameters: ModelRequestParameters
    ) -> ModelResponse:
        context = internals.current_run_context()
        if self.identity is None:
            return await self.answer(messages, settings, parameters, context)
        response = await self.answer(as_sent(messages), settings, parameters, context)
        return self.identity.give(response, messages if context is None else context.messages)

    async def answer(
        self,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
        context: RunContext[Any] | None,
    ) -> ModelResponse:
        """The wrapped model's answer to ``messages`` (as sent), in the run of ``context``."""
        return await self.wrapped.request(messages, settings, parameters)

    def rewrapping(self, model: Model) -> IdentifyingModel:
        """``model`` wrapped as this wraps the run's model (without ``identity``), for a request
        an agent's own capability sent to it instead (``ChosenModels``)."""
        return IdentifyingModel(model)


@dataclass
class ChosenModels(AbstractCapability[Any]):
    """Wraps a model an agent's own capability chose for a request (``ModelFallback``,
    ``SelectModel``) as ``model`` wraps the run's (``IdentifyingModel.rewrapping``), so that its
    answers are read as the run's model's are. pydantic-ai runs a run's capabilities'
    ``before_model_request`` after the agent's own, so this sees the model chosen last."""

    model: IdentifyingModel

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        chosen = request_context.model
        if isinstance(chosen, IdentifyingModel):
            return request_context
        return dataclasses.replace(request_context, model=self.model.rewrapping(chosen))


__all__ = [
    "CallIdentity",
    "ChosenModels",
    "IdentifyingModel",
    "as_sent",
    "call_ids",
    "derived_call_id",
    "identified",
    "identified_legacy",
    "model_tool_call_id",
    "new_call_id",
    "sub_run_id",
]
