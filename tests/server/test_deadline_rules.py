"""``RUNSGATE_TOOL_RULES`` deadline fields (issue 18 part 2; docs/configuration.md "Tool rules"):
checked at start, a bad value refused with a message naming the variable."""

from __future__ import annotations

import json

import pytest

from runtime import ToolApprovalRule
from runtime.deciding.rules import covering, deadline_for
from server.settings import ConfigError, load_settings


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ({"tool": "issue_refund", "expiresAfter": 0}, "greater than 0"),
        ({"tool": "issue_refund", "expiresAfter": -5}, "greater than 0"),
        ({"tool": "issue_refund", "expiresAfter": "soon"}, "valid number"),
        ({"tool": "issue_refund", "expiresAfter": 60, "onExpiry": "ignore"}, "'decline' or 'approve'"),
        ({"tool": "issue_refund", "onExpiry": "approve"}, "onExpiry needs expiresAfter"),
        ({"tool": "issue_refund", "agentId": "", "expiresAfter": 60}, "at least 1 character"),
    ],
)
def test_a_bad_deadline_field_is_refused_at_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, rule: dict[str, object], says: str
) -> None:
    monkeypatch.setenv("RUNSGATE_TOOL_RULES", json.dumps([rule]))
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert "RUNSGATE_TOOL_RULES" in str(raised.value)
    assert says in str(raised.value)


def test_deadline_fields_are_read_with_their_json_names_and_default_to_decline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "RUNSGATE_TOOL_RULES",
        json.dumps(
            [
                {"tool": "issue_refund", "agentId": "refund-agent", "expiresAfter": 86400},
                {"tool": "issue_refund", "argument": "amount", "above": 500, "expiresAfter": 60, "onExpiry": "approve"},
            ]
        ),
    )
    rules = [ToolApprovalRule(**rule.model_dump()) for rule in load_settings().tool_rules]
    assert [(r.agent_id, r.expires_after, r.on_expiry, r.scope) for r in rules] == [
        ("refund-agent", 86400, "decline", None),
        (None, 60, "approve", None),
    ]


def test_approve_on_expiry_stands_only_where_the_condition_provably_holds() -> None:
    rules = [
        ToolApprovalRule(tool="issue_refund", argument="amount", above=500, expires_after=60, on_expiry="approve"),
    ]
    # above the limit: approve; unknown amount: the deadline applies (fail closed) but declines
    approve = deadline_for(covering(rules, "refund-agent"), "issue_refund", {"amount": 900})
    unknown = deadline_for(covering(rules, "refund-agent"), "issue_refund", {"amount": "900"})
    below = deadline_for(covering(rules, "refund-agent"), "issue_refund", {"amount": 20})
    assert approve is not None
    assert approve.on_expiry == "approve"
    assert unknown is not None
    assert unknown.on_expiry == "decline"
    assert below is None


def test_the_shortest_covering_deadline_wins_and_agent_rules_cover_only_their_agent() -> None:
    rules = [
        ToolApprovalRule(tool="issue_refund", expires_after=600, on_expiry="approve"),
        ToolApprovalRule(tool="issue_refund", agent_id="refund-agent", expires_after=60),
    ]
    mine = deadline_for(covering(rules, "refund-agent"), "issue_refund", {"amount": 1})
    other = deadline_for(covering(rules, "other-agent"), "issue_refund", {"amount": 1})
    assert mine is not None
    assert (mine.after.total_seconds(), mine.on_expiry) == (60, "decline")
    assert other is not None
    assert (other.after.total_seconds(), other.on_expiry) == (600, "approve")
    assert deadline_for(covering(rules, "refund-agent"), "lookup_order", {}) is None


def test_the_demo_rules_give_a_pending_refund_a_day() -> None:
    from runtime.demo import TOOL_RULES
    from server.settings import ToolRuleConfig

    rules = [ToolApprovalRule(**ToolRuleConfig.model_validate(rule).model_dump()) for rule in TOOL_RULES]
    deadline = deadline_for(covering(rules, "refund-agent"), "issue_refund", {"order_id": 1042, "amount": 49.9})
    assert deadline is not None
    assert (deadline.after.total_seconds(), deadline.on_expiry) == (86400, "decline")


def test_a_rule_without_any_effect_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNSGATE_TOOL_RULES", json.dumps([{"tool": "issue_refund", "agentId": "refund-agent"}]))
    with pytest.raises(ConfigError, match=r"RUNSGATE_TOOL_RULES\[0\]: .*has no effect"):
        load_settings()


def test_a_misspelt_key_of_a_rule_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # "aprovals" would otherwise be dropped, leaving a rule without its two-person approval
    rule = {"tool": "issue_refund", "expiresAfter": 60, "aprovals": 2}
    monkeypatch.setenv("RUNSGATE_TOOL_RULES", json.dumps([rule]))
    with pytest.raises(ConfigError, match=r"RUNSGATE_TOOL_RULES\[0\]\.aprovals: Extra inputs are not permitted"):
        load_settings()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("separationOfDuties", "yes", "Input should be a valid boolean"),
        ("requireReviewClaim", 1, "Input should be a valid boolean"),
        ("allowEdits", "false", "Input should be a valid boolean"),
        ("approvals", "2", "Input should be a valid integer"),
        ("expiresAfter", "60", "Input should be a valid number"),
    ],
)
def test_a_rule_value_of_the_wrong_type_is_refused_not_coerced(
    monkeypatch: pytest.MonkeyPatch, key: str, value: object, expected: str
) -> None:
    # docs/configuration.md: "a value of the wrong type ... stops the start"; "yes" read as true
    # would turn on separation of duties nobody asked for, "false" read as false would turn it off
    rule = {"tool": "issue_refund", "scope": "refunds:approve", key: value}
    monkeypatch.setenv("RUNSGATE_TOOL_RULES", json.dumps([rule]))
    with pytest.raises(ConfigError, match=rf"RUNSGATE_TOOL_RULES\[0\]\.{key}: {expected}"):
        load_settings()
