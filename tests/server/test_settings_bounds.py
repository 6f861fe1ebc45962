"""Every setting given in seconds is finite and bounded (``server/settings/bounds.py``): ``inf``,
``nan`` and a value past its bound are refused at start, and a server with the retentions and a
deadline at their bounds still sweeps. A retention of ``1e12`` seconds was once accepted, and its
date overflow then stopped every sweep pass: no deadline, takeover or retention ran again. Over
HTTP, on every store."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from server.settings import Settings, ToolRuleConfig
from server.settings.bounds import CENTURY

from .._graphql import REFUND, REFUND_PROMPT
from .._processes import scaled
from .conftest import Serve

EXPIRES = """
query($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { expiresAt } }"""

SECONDS = [name for name, field in Settings.model_fields.items() if field.annotation is float]
"""Every ``Settings`` field given in (float) seconds."""


def _upper(name: str) -> float:
    bound = next((m.le for m in Settings.model_fields[name].metadata if getattr(m, "le", None) is not None), None)
    assert bound is not None, f"{name} has no upper bound"
    return float(bound)


def test_the_settings_in_seconds_are_known() -> None:
    assert {"event_retention", "claim_ttl", "webhook_retry_for", "mongodb_timeout"} <= set(SECONDS)


@pytest.mark.parametrize("name", SECONDS)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "past the bound"])
def test_a_setting_in_seconds_refuses_what_is_not_a_finite_bounded_number(name: str, value: Any) -> None:
    given = _upper(name) * 2 + 1 if value == "past the bound" else value
    with pytest.raises(ValidationError) as refused:
        Settings(**{name: given})
    assert [error["loc"] for error in refused.value.errors()] == [(name,)]


@pytest.mark.parametrize("field", ["expiresAfter", "above", "atMost"])
@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_a_rules_numbers_are_finite(field: str, value: float) -> None:
    rule: dict[str, Any] = {"tool": "issue_refund", "name": "r", "argument": "amount", field: value}
    if field == "atMost":
        rule["autoApprove"] = True
    with pytest.raises(ValidationError, match="finite number"):
        ToolRuleConfig.model_validate(rule)


def test_a_deadline_past_its_bound_is_refused() -> None:
    with pytest.raises(ValidationError, match="less than or equal to"):
        ToolRuleConfig.model_validate({"tool": "issue_refund", "expiresAfter": CENTURY * 2})


async def test_a_server_with_its_retentions_at_their_bounds_still_sweeps(serve: Serve) -> None:
    # given a server keeping everything for a century, sweeping often, refunds expiring after 1 s
    served = await serve(
        sweep_interval=0.05,
        event_retention=CENTURY,
        idempotency_key_retention=CENTURY,
        run_updates_retention=CENTURY,
        webhook_delivery_retention=CENTURY,
        webhook_retry_for=CENTURY,
        tool_rules=[{"tool": "issue_refund", "expiresAfter": 1}],
    )
    gql = served.client()
    run = await gql.suspend(REFUND, REFUND_PROMPT)
    started = time.monotonic()

    # then its sweeper still runs past the retention passes: the deadline declines the run
    while (await gql.suspended_run(REFUND, run["runId"])) is not None:
        assert time.monotonic() - started < scaled(30), "the sweeper never applied the deadline"
        await asyncio.sleep(0.1)
    events = [e for e in await gql.run_events(REFUND, run["runId"]) if e["type"] == "decision"]
    assert [e["data"]["kind"] for e in events] == ["declined"]


async def test_a_deadline_at_its_bound_is_shown_a_century_ahead(serve: Serve) -> None:
    served = await serve(tool_rules=[{"tool": "issue_refund", "expiresAfter": CENTURY}])
    gql = served.client()
    run = await gql.suspend(REFUND, REFUND_PROMPT)

    listed = (await gql.data(EXPIRES, agentId=REFUND, runId=run["runId"]))["suspendedRun"]
    expires = datetime.fromisoformat(listed["expiresAt"])
    assert expires.year - datetime.now(UTC).year in (99, 100)
