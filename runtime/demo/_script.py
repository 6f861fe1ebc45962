"""Reading a conversation from inside a scripted ``FunctionModel`` (the demo agents' "LLM")."""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


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
