"""The demo agents' "LLM": reading a conversation from inside a scripted ``FunctionModel``, and
``scripted_model``, which answers with a script whole or streamed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)

Script = Callable[[list[ModelMessage], AgentInfo], Awaitable[ModelResponse]]
"""A scripted model turn: the conversation so far -> the model's response."""

StreamItem = str | DeltaToolCalls | DeltaThinkingCalls
"""What a ``FunctionModel`` ``stream_function`` yields: a text delta, or deltas of tool calls or
thinking parts by part index."""

ARGS_CHUNK = 16
"""Characters of a tool call's JSON arguments per streamed delta."""

_TOKEN = re.compile(r"\s*\S+\s*|\s+")


def scripted_model(
    script: Script,
    *,
    model_name: str,
    time_to_first_token: float = 0.0,
    time_per_token: float = 0.0,
) -> FunctionModel:
    """A ``FunctionModel`` answering with ``script``, whole (``Agent.run``) or streamed (an
    ``event_stream_handler``, ``Agent.run_stream_events``, ``Agent.iter``).

    Streamed, the response is the same as whole: its text in word-sized deltas, each tool call as
    a ``DeltaToolCall`` with its name and id and then its JSON arguments in ``ARGS_CHUNK``-character
    deltas, thinking as ``DeltaThinkingPart`` deltas. ``time_to_first_token`` and
    ``time_per_token`` (seconds) pace the stream like a remote model (0: no pause, not even a yield
    to the event loop); a whole answer is not paced.

    Raises (when streamed):
        TypeError: The script answered with a part that is not text, thinking or a tool call.
    """

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[StreamItem]:
        response = await script(messages, info)
        if time_to_first_token > 0:
            await asyncio.sleep(time_to_first_token)
        first = True
        for item in stream_items(response):
            if not first and time_per_token > 0:
                await asyncio.sleep(time_per_token)
            first = False
            yield item

    stream.__name__ = f"{getattr(script, '__name__', 'script')}_stream"
    return FunctionModel(script, stream_function=stream, model_name=model_name)


def stream_items(response: ModelResponse) -> list[StreamItem]:
    """``response`` as the deltas a ``stream_function`` yields, in order (see ``scripted_model``).

    Raises:
        TypeError: A part that is not text, thinking or a tool call.
    """
    items: list[StreamItem] = []
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            items.extend(_TOKEN.findall(part.content) or [part.content])
        elif isinstance(part, ThinkingPart):
            items.extend({index: DeltaThinkingPart(content=token)} for token in _TOKEN.findall(part.content))
        elif isinstance(part, ToolCallPart):
            items.append({index: DeltaToolCall(name=part.tool_name, tool_call_id=part.tool_call_id)})
            args = part.args_as_json_str()
            items.extend(
                {index: DeltaToolCall(json_args=args[at : at + ARGS_CHUNK])} for at in range(0, len(args), ARGS_CHUNK)
            )
        else:
            raise TypeError(f"a scripted model cannot stream a {type(part).__name__}")
    return items


def latest_prompt(messages: list[ModelMessage]) -> str:
    """Text of the most recent user prompt ("" if none)."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def latest_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """Tool results the model is reading now: those of the trailing requests since its last response."""
    returns: list[ToolReturnPart] = []
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            break
        returns[:0] = [part for part in message.parts if isinstance(part, ToolReturnPart)]
    return returns


def tool_calls(messages: list[ModelMessage]) -> dict[str, ToolCallPart]:
    """Every tool call the model made, by tool call id."""
    return {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }
