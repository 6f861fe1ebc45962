"""The conversation of a stored history (``runtime.conversation``): what it shows, and its byte limit."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from runtime import RunManager
from runtime.conversation import ConversationMessage, MessageKind, messages_of, within

AT = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)


def _history(*messages: ModelMessage) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(list(messages))


def test_each_kind_of_message_is_shown_as_text_and_tool_calls_as_tool_calls() -> None:
    # given a history with prompts, the model's thinking, text and tool calls, their results and a retry
    history = _history(
        ModelRequest(
            parts=[
                SystemPromptPart("You refund orders.", timestamp=AT),
                UserPromptPart(
                    ["Refund order 1042, here is the receipt:", BinaryContent(b"%PDF", media_type="application/pdf")],
                    timestamp=AT,
                ),
            ],
            instructions="Never refund twice.",
        ),
        ModelResponse(
            parts=[
                ThinkingPart("The user wants a refund."),
                TextPart("Looking it up."),
                ToolCallPart("lookup_order", {"order_id": 1042}, tool_call_id="c1"),
            ],
            timestamp=AT,
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("lookup_order", {"amount": 49.9}, tool_call_id="c1", timestamp=AT),
                RetryFeedbackPart("Answer in English.", retry=RetryInfo(cause="model_retry"), timestamp=AT),
            ]
        ),
        ModelResponse(parts=[ToolCallPart("issue_refund", '{"order_id": 1042, "amount": 49.9}', tool_call_id="c2")]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    "issue_refund",
                    "The user declined this tool call. Reason: already refunded",
                    tool_call_id="c2",
                    outcome="denied",
                )
            ]
        ),
    )

    # when its conversation is read
    messages = messages_of(history)

    # then each part that is conversation is one message, in order; the instructions are not
    shown = [(m.index, m.kind, m.text, m.tool_name, m.tool_call_id) for m in messages]
    assert shown == [
        (0, MessageKind.SYSTEM_PROMPT, "You refund orders.", None, None),
        (
            1,
            MessageKind.USER_PROMPT,
            "Refund order 1042, here is the receipt:\n[BinaryContent: application/pdf]",
            None,
            None,
        ),
        (2, MessageKind.THINKING, "The user wants a refund.", None, None),
        (3, MessageKind.TEXT, "Looking it up.", None, None),
        (4, MessageKind.TOOL_CALL, '{"order_id":1042}', "lookup_order", "c1"),
        (5, MessageKind.TOOL_RESULT, '{"amount":49.9}', "lookup_order", "c1"),
        (6, MessageKind.RETRY, "Answer in English.", None, None),
        (7, MessageKind.TOOL_CALL, '{"order_id":1042,"amount":49.9}', "issue_refund", "c2"),
        (
            8,
            MessageKind.TOOL_RESULT,
            "The user declined this tool call. Reason: already refunded",
            "issue_refund",
            "c2",
        ),
    ]
    assert [m.size for m in messages] == [len(m.text.encode()) for m in messages]
    assert messages[0].at == AT
    assert messages[2].at == AT  # a response's parts carry the response's time
    assert all(not m.truncated for m in messages)


async def test_a_suspended_run_s_history_reads_as_its_conversation(manager: RunManager) -> None:
    # given a refund run waiting for its approval
    started = await manager.start_run("refund-agent", "Please refund order 1042")
    history = await manager.store.load_history("refund-agent", started.run_id)
    assert history is not None
    assert started.run is not None

    # when its conversation is read
    messages = messages_of(history)

    # then it is the prompt, the lookup and its result, and the call waiting, with its id
    assert [(m.kind, m.tool_name) for m in messages] == [
        (MessageKind.USER_PROMPT, None),
        (MessageKind.TOOL_CALL, "lookup_order"),
        (MessageKind.TOOL_RESULT, "lookup_order"),
        (MessageKind.TOOL_CALL, "issue_refund"),
    ]
    assert messages[0].text == "Please refund order 1042"
    assert messages[-1].tool_call_id == started.run["toolCalls"][0]["toolCallId"]


def _message(index: int, text: str) -> ConversationMessage:
    return ConversationMessage(index=index, kind=MessageKind.TEXT, text=text, size=len(text.encode()))


def test_a_conversation_within_its_limit_is_whole() -> None:
    messages = [_message(0, "a" * 10), _message(1, "b" * 10)]
    conversation = within(messages, 20)
    assert conversation.messages == messages
    assert (conversation.total_messages, conversation.total_size, conversation.cut) == (2, 20, None)
    assert conversation.truncated is False


def test_over_its_limit_the_middle_is_cut_and_the_prompt_and_the_end_kept() -> None:
    # given five messages of 10 bytes, within 35 bytes
    messages = [_message(i, str(i) * 10) for i in range(5)]

    # when it is cut
    conversation = within(messages, 35)

    # then the first (half the budget at most) and the last two are kept, and the cut says what is missing
    assert [m.index for m in conversation.messages] == [0, 3, 4]
    assert conversation.cut is not None
    assert (conversation.cut.position, conversation.cut.messages, conversation.cut.size) == (1, 2, 20)
    assert conversation.truncated is True
    assert (conversation.total_messages, conversation.total_size) == (5, 50)


def test_a_first_or_last_message_too_long_keeps_the_beginning_of_its_text_in_whole_characters() -> None:
    # given a long prompt of two-byte characters, and a long last message
    messages = [_message(0, "é" * 100), _message(1, "middle"), _message(2, "z" * 100)]

    # when they are cut to 41 bytes
    conversation = within(messages, 41)

    # then the prompt keeps 10 whole characters (20 of its 20 bytes share), the last message what is left
    first, last = conversation.messages
    assert (first.index, first.text, first.truncated, first.size) == (0, "é" * 10, True, 200)
    assert (last.index, last.text, last.truncated, last.size) == (2, "z" * 21, True, 100)
    assert conversation.cut is not None
    assert (conversation.cut.position, conversation.cut.messages, conversation.cut.size) == (1, 1, 6)

    # and a long prompt cut to half the limit gets back what the rest of the conversation leaves
    first, last = within([_message(0, "é" * 100), _message(1, "ab")], 100).messages
    assert (first.text, first.truncated, last.text) == ("é" * 49, True, "ab")

    # and a single message over the limit gets all of it
    [alone] = within([_message(0, "x" * 100)], 30).messages
    assert (alone.text, alone.truncated) == ("x" * 30, True)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=st.sampled_from("aé€😀 "), max_size=40), min_size=1, max_size=12),
    max_bytes=st.integers(min_value=1, max_value=300),
)
def test_a_cut_conversation_is_always_within_its_limit_and_keeps_its_ends(texts: list[str], max_bytes: int) -> None:
    messages = [_message(i, text) for i, text in enumerate(texts)]
    conversation = within(messages, max_bytes)
    shown = conversation.messages
    assert sum(len(m.text.encode()) for m in shown) <= max_bytes
    # the first and the last message are always shown, in order, with a beginning of their text
    assert shown[0].index == 0
    assert shown[-1].index == len(messages) - 1
    indices = [m.index for m in shown]
    assert indices == sorted(set(indices))
    for m in shown:
        original = messages[m.index]
        assert original.text.startswith(m.text)
        assert m.truncated == (m.text != original.text)
        assert m.size == original.size
    # and what was left out is one run of messages, where the cut says
    cut = conversation.cut
    if cut is None:
        assert indices == list(range(len(messages)))
    else:
        assert indices == [*range(cut.position), *range(cut.position + cut.messages, len(messages))]
        assert cut.size == sum(messages[i].size for i in range(cut.position, cut.position + cut.messages))
    assert conversation.truncated == (cut is not None or any(m.truncated for m in shown))
    if sum(m.size for m in messages) <= max_bytes:
        assert shown == messages
