"""A call's identity derives from its run, its place and the call: the same on a repeat, none of the run's others."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from runtime.running.identity import CallIdentity, call_ids, identified


class _Recording(CallIdentity):
    """``CallIdentity`` that appends each identity it gives to ``made``."""

    def __init__(self, made: list[str], *, run_id: str) -> None:
        super().__init__(run_id=run_id)
        self.made = made

    async def after_model_request(self, ctx, *, request_context, response):  # type: ignore[no-untyped-def]
        response = await super().after_model_request(ctx, request_context=request_context, response=response)
        self.made.extend(call_ids([response]))
        return response


def _answer(value: int, model_id: str = "call_0") -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("lookup", {"value": value}, tool_call_id=model_id)])


def test_the_same_history_and_answer_derive_the_same_identity_and_another_run_or_answer_another() -> None:
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("go")])]

    first = identified(_answer(1), history, run_id="run-1")
    # the model's own id is data: a provider's fresh id on the repeat changes nothing
    repeat = identified(_answer(1, model_id="call_9f"), history, run_id="run-1")
    other_run = identified(_answer(1), history, run_id="run-2")
    other_answer = identified(_answer(2), history, run_id="run-1")

    [identity] = call_ids([first])
    assert identity.startswith("c_")
    assert len(identity) == 26
    assert call_ids([repeat]) == {identity}
    assert identity not in call_ids([other_run]) | call_ids([other_answer])


def test_a_derived_identity_already_in_the_history_is_not_given_again() -> None:
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("go")])]
    [derived] = call_ids([identified(_answer(1), history, run_id="run-1")])

    again = identified(_answer(1), history, run_id="run-1", taken={derived})

    [identity] = call_ids([again])
    assert identity != derived
    assert identity.startswith("c_")


async def test_calls_a_history_processor_dropped_from_view_keep_identities_of_their_own() -> None:
    # given a model making the same call each turn, and a history processor that keeps only the
    # last request: every request looks the same, and no earlier call is in view
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        if len(made) < 4:
            return _answer(1)
        return ModelResponse(parts=[TextPart("done")])

    seen: list[int] = []
    made: list[str] = []
    agent: Agent[None, str] = Agent(FunctionModel(respond))

    @agent.tool_plain
    def lookup(value: int) -> str:
        return f"found {value}"

    def last_request_only(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    # when the run makes its four calls
    result = await agent.run("go", capabilities=[ProcessHistory(last_request_only), _Recording(made, run_id="run-1")])

    # then each got an identity of its own
    assert result.output == "done"
    assert seen == [1, 1, 1, 1, 1]
    assert len(made) == 4
    assert len(set(made)) == 4, made


async def test_a_continuation_whose_history_a_processor_cut_gives_none_of_the_identities_dropped_before() -> None:
    # given a run whose history processor keeps the last two messages, making the same call each
    # turn and suspending on an approval at its fourth, then continued (a new agent run)
    made: list[str] = []

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(made) == 3:
            return ModelResponse(parts=[ToolCallPart("act", {}, tool_call_id="call_0")])
        if len(made) < 7:
            return _answer(1)
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(respond), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain
    def lookup(value: int) -> str:
        return f"found {value}"

    @agent.tool_plain(requires_approval=True)
    def act() -> str:
        return "acted"

    def last_two(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-2:]

    first = await agent.run("go", capabilities=[ProcessHistory(last_two), _Recording(made, run_id="run-1")])
    assert isinstance(first.output, DeferredToolRequests)
    [deferred] = first.output.approvals

    # when it is continued with the approval
    results = DeferredToolResults(approvals={deferred.tool_call_id: True})
    second = await agent.run(
        message_history=first.all_messages(),
        deferred_tool_results=results,
        capabilities=[ProcessHistory(last_two), _Recording(made, run_id="run-1")],
    )

    # then each of its calls got an identity of its own
    assert second.output == "done"
    assert len(made) == 7, made
    assert len(set(made)) == 7, made
