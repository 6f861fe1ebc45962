"""``RunManager.approve(edited_args=...)``: the tool's validator reads the edit once per decision."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import RunManager
from runtime.deciding import gate
from runtime.demo import LEDGER


async def test_an_edited_approval_runs_the_tools_validator_once(
    manager: RunManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    validate = gate.validate_edited_args

    def counting(agent: Any, tool_name: str, edited: Any) -> Any:
        seen.append(edited)
        return validate(agent, tool_name, edited)

    monkeypatch.setattr(gate, "validate_edited_args", counting)
    started = await manager.start_run("refund-agent", "Please refund order 1042")
    assert started.run is not None
    call = started.run["toolCalls"][0]["toolCallId"]

    outcome = await manager.approve(
        "refund-agent", started.run_id, call, edited_args={"order_id": 1042, "amount": 12.5}
    )

    assert outcome.status == "completed"
    assert seen == [{"order_id": 1042, "amount": 12.5}]
    assert LEDGER == [{"orderId": 1042, "amount": 12.5}]
