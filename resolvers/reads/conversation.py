"""``SuspendedRun.conversation``: the conversation that led to a run's pending calls (docs/api.md
"Conversation"), read from the stored history only when the field is selected.

The history is read through the request's ``Loaders.conversations`` (``resolvers/loaders.py``):
one ``load_history`` per run of the request, whatever the number of fields and limits asking for it.
"""

from __future__ import annotations

import enum
from datetime import datetime

import strawberry

from runtime import can_see_run
from runtime import conversation as domain

from ..argument_errors import QueryArgumentError
from ..context import Info
from ..documents.weights import MAX_CONVERSATION_BYTES

DEFAULT_MAX_BYTES = 64 * 1024
"""``maxBytes`` when the query gives none."""

MAX_BYTES_CAP = MAX_CONVERSATION_BYTES
"""The largest ``maxBytes`` accepted (a request asking more is refused before it runs:
``resolvers.documents.cost``)."""


@strawberry.enum(description="What a conversation message is.")
class ConversationMessageKind(enum.Enum):
    SYSTEM_PROMPT = strawberry.enum_value("system-prompt", description="A system prompt.")
    USER_PROMPT = strawberry.enum_value("user-prompt", description="What the user asked.")
    TEXT = strawberry.enum_value("text", description="The model's text.")
    THINKING = strawberry.enum_value("thinking", description="The model's reasoning, where the model shows it.")
    TOOL_CALL = strawberry.enum_value(
        "tool-call", description="A tool the model called: `toolName`, `toolCallId`; `text` is its arguments as JSON."
    )
    TOOL_RESULT = strawberry.enum_value(
        "tool-result", description="What a tool returned (or its error, or a decline's reason), as the model read it."
    )
    RETRY = strawberry.enum_value("retry", description="Feedback to the model about an answer that could not be used.")


@strawberry.type(description="One message of a run's conversation.")
class ConversationMessage:
    index: int = strawberry.field(description="Its position in the whole conversation, from 0.")
    kind: ConversationMessageKind
    text: str = strawberry.field(
        description="Its text (a tool call's: its arguments as JSON); when `truncated`, the beginning of it."
    )
    text_bytes: int = strawberry.field(description="UTF-8 bytes of its whole text.")
    truncated: bool = strawberry.field(description="True when `text` was cut to fit `maxBytes`.")
    tool_name: str | None = strawberry.field(description="The tool of a tool call or tool result.")
    tool_call_id: strawberry.ID | None = strawberry.field(
        description="The call a tool call or result belongs to (a pending call's `toolCallId`)."
    )
    at: datetime | None = strawberry.field(description="UTC, when the history records it.")


@strawberry.type(description="Messages left out of the middle of a conversation to fit `maxBytes`.")
class ConversationCut:
    position: int = strawberry.field(
        description="How many of the messages shown come before the cut: it lies between "
        "`messages[position - 1]` and `messages[position]`."
    )
    messages: int = strawberry.field(description="Messages left out there.")
    bytes: int = strawberry.field(description="UTF-8 bytes of their text.")


@strawberry.type(
    description="The conversation that led to a run's pending calls, from its stored message history: the "
    "prompts, the model's text and tool calls, and the tools' results, oldest first."
)
class Conversation:
    messages: list[ConversationMessage] = strawberry.field(description="The messages shown, in order.")
    total_messages: int = strawberry.field(description="Messages in the whole conversation.")
    total_bytes: int = strawberry.field(description="UTF-8 bytes of the text of the whole conversation.")
    truncated: bool = strawberry.field(
        description="True when something is not shown: messages (`cut`) or the end of a message's text."
    )
    cut: ConversationCut | None = strawberry.field(description="Where messages were left out; null if none.")

    @classmethod
    def from_domain(cls, found: domain.Conversation) -> Conversation:
        cut = found.cut
        return cls(
            messages=[
                ConversationMessage(
                    index=m.index,
                    kind=ConversationMessageKind[m.kind.name],
                    text=m.text,
                    text_bytes=m.size,
                    truncated=m.truncated,
                    tool_name=m.tool_name,
                    tool_call_id=None if m.tool_call_id is None else strawberry.ID(m.tool_call_id),
                    at=m.at,
                )
                for m in found.messages
            ],
            total_messages=found.total_messages,
            total_bytes=found.total_size,
            truncated=found.truncated,
            cut=None if cut is None else ConversationCut(position=cut.position, messages=cut.messages, bytes=cut.size),
        )


async def run_conversation(
    info: Info, *, agent_id: str, run_id: str, resource_id: str | None, max_bytes: int
) -> Conversation | None:
    """The conversation of a run the caller was given (``SuspendedRun.conversation``).

    The field's permission class (``CanRead``) has checked ``runs:read`` already: a run in a
    decision's outcome is shown to ``runs:decide`` alone, its conversation is not. A run of a
    resource the caller may not use has none (``None``).

    Raises:
        QueryArgumentError: ``maxBytes`` outside 1 to ``MAX_BYTES_CAP``.
    """
    principal = info.context.principal
    if not 1 <= max_bytes <= MAX_BYTES_CAP:
        raise QueryArgumentError(f"`maxBytes` must be between 1 and {MAX_BYTES_CAP}", argument="maxBytes")
    if not can_see_run(principal, resource_id):
        return None
    found = await info.context.loaders.conversations.load((agent_id, run_id, max_bytes))
    return None if found is None else Conversation.from_domain(found)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_BYTES_CAP",
    "Conversation",
    "ConversationCut",
    "ConversationMessage",
    "ConversationMessageKind",
    "run_conversation",
]
