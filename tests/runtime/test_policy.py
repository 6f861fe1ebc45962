"""``runtime.deciding.rules``: which calls a rule approves automatically or gives several approvers, and
the rules' check against the agents' tools (docs/configuration.md "Tool rules")."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset, WrapperToolset

from runtime import AgentRegistry, ToolApprovalRule
from runtime.deciding.rules import approvals_required, auto_approving_rule, tool_rule_problems
from runtime.demo import AGENTS

SMALL = ToolApprovalRule(tool="issue_refund", name="small", argument="amount", at_most=20, auto_approve=True)
LARGE = ToolApprovalRule(tool="issue_refund", argument="amount", above=500, approvals=2)


@pytest.mark.parametrize(
    ("args", "approved"),
    [
        ({"amount": 20}, True),
        ({"amount": 19.99}, True),
        ({"amount": 20.01}, False),
        ({"amount": float("nan")}, False),
        ({"amount": True}, False),
        ({"amount": "5"}, False),
        ({"amount": None}, False),
        ({}, False),
        (None, False),
        ([5], False),
    ],
)
def test_an_automatic_approval_applies_only_when_it_provably_holds(args: Any, approved: bool) -> None:
    assert (auto_approving_rule([SMALL, LARGE], "issue_refund", args) is SMALL) is approved


@pytest.mark.parametrize(
    ("args", "required"),
    [({"amount": 501}, 2), ({"amount": 500}, 1), ({"amount": "lots"}, 2), ({}, 2), (None, 2), ({"amount": 5}, 1)],
)
def test_several_approvals_apply_when_above_or_not_evaluable(args: Any, required: int) -> None:
    assert approvals_required([SMALL, LARGE], "issue_refund", args) == required


def test_a_restricting_effect_of_any_rule_keeps_a_call_for_a_person() -> None:
    scoped = ToolApprovalRule(tool="issue_refund", scope="refunds:approve")
    always = ToolApprovalRule(tool="issue_refund", name="all", auto_approve="always")

    assert auto_approving_rule([always], "issue_refund", {"amount": 900}) is always
    assert auto_approving_rule([always, scoped], "issue_refund", {"amount": 1}) is None
    assert auto_approving_rule([always, LARGE], "issue_refund", {"amount": 900}) is None
    assert auto_approving_rule([always], "lookup_order", {"order_id": 1}) is None


def test_rules_are_checked_against_the_agents_function_tools() -> None:
    registry = AgentRegistry(AGENTS)
    rules = [
        SMALL,
        ToolApprovalRule(tool="issue_refunds", scope="x"),
        ToolApprovalRule(tool="issue_refund", argument="order", above=1, scope="x"),
        ToolApprovalRule(tool="ask_city", argument="city", above=1, scope="x"),
    ]

    problems = tool_rule_problems(rules, registry)

    assert len(problems) == 3, problems
    assert problems[0].startswith("rule 2 ('issue_refunds') names tool 'issue_refunds', which is not a tool of")
    assert "rule 3 ('issue_refund') names argument 'order'" in problems[1]
    assert "'amount'" in problems[1]
    assert problems[2].startswith("rule 4 ('ask_city') names argument 'city'")


def test_a_rule_comparing_a_parameter_that_is_never_a_number_is_refused() -> None:
    agent = Agent(TestModel(), name="words")

    @agent.tool_plain(requires_approval=True)
    def say(text: str) -> str:
        return text

    rule = ToolApprovalRule(tool="say", argument="text", above=3, scope="x")
    (problem,) = tool_rule_problems([rule], AgentRegistry({"words": agent}))
    assert "compares argument 'text' of tool 'say' with a number" in problem


def test_a_tool_of_an_agent_whose_tools_are_known_only_while_it_runs_is_accepted_unchecked() -> None:
    wrapped = WrapperToolset(FunctionToolset())
    agent = Agent(TestModel(), name="dynamic", toolsets=[wrapped])

    rule = ToolApprovalRule(tool="anything", scope="x")
    assert tool_rule_problems([rule], AgentRegistry({"dynamic": agent})) == []
