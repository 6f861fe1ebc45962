"""``refund-agent``: a tool that needs approval (docs/writing-agents.md "Demo agents").

Prompt ``Please refund order 1042`` (or ``orders 1042 and 1043``): the agent looks each order
up, then in one model turn asks to ``issue_refund`` each; every ``issue_refund`` call waits for
an approval. Under the demo's default rules (``runtime.demo.TOOL_RULES``) a refund of at most
$20 (order 1044) is approved automatically and one over $500 (order 1045) needs two approvers.
Approved calls append to ``LEDGER``; declined ones never run, and the final answer quotes the
reason the model received.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import DeferredToolRequests

from ._script import latest_prompt, latest_returns, scripted_model, tool_calls

ORDERS: dict[int, dict[str, Any]] = {
    1042: {"amount": 49.9, "currency": "USD", "item": "Espresso grinder"},
    1043: {"amount": 120.0, "currency": "USD", "item": "Pour-over kettle"},
    1044: {"amount": 15.5, "currency": "USD", "item": "Paper filters"},
    1045: {"amount": 640.0, "currency": "USD", "item": "Espresso machine"},
}
"""The fake order table ``lookup_order`` reads."""

LEDGER: list[dict[str, Any]] = []
"""Refunds issued (``{"orderId", "amount"}``), appended by ``issue_refund``: the demo's side effect."""


def order_ids(prompt: str) -> list[int]:
    """Order numbers named in ``prompt`` (numbers of 3+ digits), in order, without repeats."""
    return list(dict.fromkeys(int(n) for n in re.findall(r"\b\d{3,}\b", prompt)))


async def _refund_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = latest_returns(messages)
    results = [r for r in returns if r.tool_name == "issue_refund"]
    if results:
        calls = tool_calls(messages)
        lines = []
        for ret in results:
            if ret.outcome == "success":
                lines.append(str(ret.content))
            else:
                order = calls[ret.tool_call_id].args_as_dict().get("order_id")
                lines.append(f"The refund for order {order} was not issued: {ret.content}")
        return ModelResponse(parts=[TextPart(" ".join(lines))])
    orders_found = [r.content for r in returns if r.tool_name == "lookup_order" and isinstance(r.content, dict)]
    if orders_found:
        # One model turn asks for every refund, so they are all pending together.
        refunds = [{"order_id": order["orderId"], "amount": order["amount"]} for order in orders_found]
        return ModelResponse(parts=[ToolCallPart("issue_refund", args) for args in refunds])
    orders = order_ids(latest_prompt(messages))
    if not orders:
        return ModelResponse(parts=[TextPart("Which order should I refund? Please give me the order number.")])
    return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": order}) for order in orders])


refund_agent = Agent(
    scripted_model(_refund_script, model_name="runsgate-demo-refund"),
    name="refund-agent",
    deps_type=type(None),
    description="Refunds customer orders; a refund waits for a person's approval (under the demo's default "
    "rules: up to $20 approved automatically, over $500 by two people).",
    instructions=(
        "You refund customer orders. Look each order up with lookup_order, then call issue_refund "
        "once per order with its amount. If no order number is given, ask for one."
    ),
    output_type=[str, DeferredToolRequests],
)


@refund_agent.tool_plain
async def lookup_order(order_id: int) -> dict[str, Any]:
    """Look up an order: its amount (USD), currency and item."""
    known = ORDERS.get(order_id)
    if known is None:
        known = {"amount": float(10 + order_id % 90), "currency": "USD", "item": "Gift card"}
    return {"orderId": order_id, **known}


@refund_agent.tool_plain(requires_approval=True)
async def issue_refund(order_id: int, amount: Annotated[float, Field(gt=0)]) -> str:
    """Refund ``amount`` (USD, more than 0) for the order. Needs a person's approval."""
    LEDGER.append({"orderId": order_id, "amount": amount})
    return f"Refund of ${amount:.2f} for order {order_id} issued."
