"""The conversation that led to a run's pending calls, read from its stored message history, as
a reviewer reads it (docs/api.md "Conversation").

``messages_of`` turns a pydantic-ai history into ``ConversationMessage``s, one per part that is
conversation: system and user prompts, the model's text and thinking, its tool calls (the text is
the arguments as JSON) and the tools' results. Instructions (not stored as messages) and the parts
that are bookkeeping (instruction, settings and tool-availability changes, compactions, files,
speech) are left out. ``within`` bounds a conversation in bytes: it keeps its beginning (the
prompt) and its end (the calls waiting) and cuts the middle, saying where and how much.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    RetryFeedbackPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)


class MessageKind(Enum):
    """What a conversation message is."""

    SYSTEM_PROMPT = "system-prompt"
    USER_PROMPT = "user-prompt"
    TEXT = "text"
    """The model's text."""
    THINKING = "thinking"
    """The model's reasoning, where the model shows it."""
    TOOL_CALL = "tool-call"
    """A tool the model called; the text is its arguments as JSON."""
    TOOL_RESULT = "tool-result"
    """What a tool returned (or its error, or a decline's reason), as the model read it."""
    RETRY = "retry"
    """pydantic-ai's feedback to the model about an answer it could not use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationMessage:
    """One message of a conversation.

    Attributes:
        index: Its position in the whole conversation (from 0).
        kind: What it is.
        text: Its text (a tool call's: the arguments as JSON); cut to a UTF-8 prefix when
            ``truncated``.
        size: UTF-8 bytes of its whole text.
        truncated: Its text was cut to fit the limit.
        tool_name: The tool of a tool call or result (else ``None``).
        tool_call_id: The call a tool call or result belongs to (else ``None``).
        at: When it was written (UTC), if the history says.
    """

    index: int
    kind: MessageKind
    text: str
    size: int
    truncated: bool = False
    tool_name: str | None = None
    tool_call_id: str | None = None
    at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationCut:
    """Messages left out of the middle of a conversation to fit its limit.

    Attributes:
        position: How many of the shown messages come before the cut.
        messages: How many messages were left out there.
        size: UTF-8 bytes of their text.
    """

    position: int
    messages: int
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """A conversation within a limit (``within``).

    Attributes:
        messages: The messages shown, in order.
        total_messages: Messages in the whole conversation.
        total_size: UTF-8 bytes of the text of the whole conversation.
        cut: Where messages were left out, or ``None``.
    """

    messages: list[ConversationMessage]
    total_messages: int
    total_size: int
    cut: ConversationCut | None

    @property
    def truncated(self) -> bool:
        """Something was left out: messages, or the end of a message's text."""
        return self.cut is not None or any(m.truncated for m in self.messages)


def messages_of(history: bytes) -> list[ConversationMessage]:
    """The conversation of a stored history (pydantic-ai JSON, as ``SnapshotStore.load_history``
    returns it), in order.

    Raises:
        pydantic.ValidationError: ``history`` is not a pydantic-ai message history.
    """
    found: list[ConversationMessage] = []
    for message in ModelMessagesTypeAdapter.validate_json(history):
        for kind, text, tool_name, tool_call_id, at in _parts(message):
            found.append(
                ConversationMessage(
                    index=len(found),
                    kind=kind,
                    text=text,
                    size=len(text.encode()),
                    tool_name=tool_name,
                    tool_call_id=tool_call_id,
                    at=at,
                )
            )
    return found


_Part = tuple[MessageKind, str, str | None, str | None, datetime | None]


def _parts(message: ModelMessage) -> list[_Part]:
    if isinstance(message, ModelRequest):
        return _request_parts(message)
    parts: list[_Part] = []
    at = message.timestamp
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append((MessageKind.TEXT, part.content, None, None, at))
        elif isinstance(part, ThinkingPart):
            parts.append((MessageKind.THINKING, part.content, None, None, at))
        elif isinstance(part, BaseToolCallPart):
            parts.append((MessageKind.TOOL_CALL, part.args_as_json_str(), part.tool_name, part.tool_call_id, at))
    return parts


def _request_parts(message: ModelRequest) -> list[_Part]:
    parts: list[_Part] = []
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            parts.append((MessageKind.SYSTEM_PROMPT, part.content, None, None, part.timestamp))
        elif isinstance(part, UserPromptPart):
            parts.append((MessageKind.USER_PROMPT, _prompt_text(part), None, None, part.timestamp))
        elif isinstance(part, BaseToolReturnPart):
            text = part.model_response_str(wrap_if_error=False)
            parts.append((MessageKind.TOOL_RESULT, text, part.tool_name, part.tool_call_id, part.timestamp))
        elif isinstance(part, RetryFeedbackPart):
            text = part.content if isinstance(part.content, str) else json.dumps(part.content, default=str)
            parts.append((MessageKind.RETRY, text, None, None, part.timestamp))
    return parts


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    pieces = []
    for item in part.content:
        if isinstance(item, str):
            pieces.append(item)
        elif isinstance(item, TextContent):
            pieces.append(item.content)
        else:  # an image, a document, audio...: named, not shown
            media = getattr(item, "media_type", None)
            pieces.append(f"[{type(item).__name__}{f': {media}' if media else ''}]")
    return "\n".join(pieces)


def within(messages: Sequence[ConversationMessage], max_bytes: int) -> Conversation:
    """``messages`` with at most ``max_bytes`` UTF-8 bytes of text (``max_bytes`` >= 1).

    All of them when they fit. Otherwise the beginning is kept (up to half of ``max_bytes``: the
    prompt), then the end (the messages just before the calls waiting) with what is left, then
    more of the beginning if room remains; the messages in between are left out (``cut``). A
    first or last message too long for its share keeps the beginning of its text (``truncated``);
    a first message cut to half of ``max_bytes`` then gets the bytes nothing else used.
    """
    sizes = [m.size for m in messages]
    total = sum(sizes)
    count = len(messages)
    if total <= max_bytes:
        return Conversation(messages=list(messages), total_messages=count, total_size=total, cut=None)
    used = 0
    head: list[ConversationMessage] = []
    tail: list[ConversationMessage] = []
    first, last = 0, count - 1  # the messages not taken yet: messages[first:last + 1]
    half = max_bytes // 2
    while first <= last and used + sizes[first] <= half:
        head.append(messages[first])
        used += sizes[first]
        first += 1
    if not head:  # the first message alone is over its share: its beginning
        shortened = _shortened(messages[0], half if count > 1 else max_bytes)
        head.append(shortened)
        used += len(shortened.text.encode())
        first = 1
    while first <= last and used + sizes[last] <= max_bytes:
        tail.append(messages[last])
        used += sizes[last]
        last -= 1
    if not tail and first <= last:  # the last message alone does not fit: its beginning
        shortened = _shortened(messages[last], max_bytes - used)
        tail.append(shortened)
        used += len(shortened.text.encode())
        last -= 1
    while first <= last and used + sizes[first] <= max_bytes:
        head.append(messages[first])
        used += sizes[first]
        first += 1
    if head[0].truncated and used < max_bytes:  # the first message's share, grown by what is left
        shown = len(head[0].text.encode())
        head[0] = _shortened(messages[0], shown + max_bytes - used)
        used += len(head[0].text.encode()) - shown
    left_out = last + 1 - first
    cut = (
        None
        if left_out == 0
        else ConversationCut(position=len(head), messages=left_out, size=sum(sizes[first : last + 1]))
    )
    return Conversation(messages=head + tail[::-1], total_messages=count, total_size=total, cut=cut)


def _shortened(message: ConversationMessage, max_bytes: int) -> ConversationMessage:
    """``message`` with the longest UTF-8 prefix of its text that fits ``max_bytes`` (whole characters);
    ``message`` itself when it fits."""
    if message.size <= max_bytes:
        return message
    text = message.text.encode()[: max(max_bytes, 0)].decode("utf-8", errors="ignore")
    return replace(message, text=text, truncated=True)


__all__ = ["Conversation", "ConversationCut", "ConversationMessage", "MessageKind", "messages_of", "within"]
