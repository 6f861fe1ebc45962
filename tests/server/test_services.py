"""``server.services.Services``: the process's resources started and stopped together, on a real
SQLite file. Entering opens the store and starts the sweeper and the webhook dispatcher; leaving
stops every task it started and closes the store; a start refused by the rules opens nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from starlette.datastructures import State

from server.services import Services
from server.settings import DEMO_AGENTS, ConfigError, Settings, ToolRuleConfig, WebhookConfig
from storage import SQLiteSnapshotStore

from .._receiver import new_secret


class ProbedStore(SQLiteSnapshotStore):
    """The SQLite store, recording that it was closed."""

    closed = False

    async def close(self) -> None:
        await super().close()
        self.closed = True


def _tasks() -> set[str]:
    return {task.get_name() for task in asyncio.all_tasks() if task.get_name().startswith("runsgate-")}


async def test_entering_starts_everything_and_leaving_stops_it(tmp_path: Path) -> None:
    store = ProbedStore(tmp_path / "runs.db")
    settings = Settings(
        agents=DEMO_AGENTS,
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        auth=False,
        sweep_interval=30,
        webhooks=[WebhookConfig(url="http://127.0.0.1:9/hook", secret=new_secret(), events=["run.suspended"])],  # type: ignore[arg-type]
    )
    async with Services(settings, store=store) as services:
        assert _tasks() == {"runsgate-sweeper", "runsgate-webhooks"}
        await store.ping()
        state = State()
        services.expose(state)
        assert state.store is store
        assert state.runs is services.runs
        assert state.events is services.events
        assert list(state.webhook_endpoints.values()) == ["http://127.0.0.1:9/hook"]
    assert _tasks() == set()
    assert store.closed


async def test_a_start_refused_by_the_rules_opens_nothing(tmp_path: Path) -> None:
    settings = Settings(
        agents=DEMO_AGENTS,
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        auth=False,
        tool_rules=[ToolRuleConfig(tool="no_such_tool", scope="refunds:approve")],
    )
    with pytest.raises(ConfigError, match="RUNSGATE_TOOL_RULES"):
        async with Services(settings):
            pass
    assert not (tmp_path / "runs.db").exists()
    assert _tasks() == set()
