"""The data generator: ``seed_store``, ``runsgate seed`` and ``RUNSGATE_SEED_RUNS`` (issue 6 §3)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from pydantic_ai import models

from runtime import RunManager
from runtime.demo import AGENTS, LEDGER
from runtime.registry import AgentRegistry
from runtime.seed import SeedPlan, seed_store
from server.app import create_app
from server.cli import INVALID
from server.cli.main import main
from server.settings import DEMO_AGENTS, ConfigError, Settings, load_settings
from storage import RunFilter, SnapshotStore, SQLiteSnapshotStore

from .. import _processes
from .._servers import ROOT, mongo_store, server_env

models.ALLOW_MODEL_REQUESTS = False

LIST = """
query List($agentId: ID!) {
  suspendedRuns(agentId: $agentId, first: 5) { totalCount nodes { runId threadId toolCalls { toolName args } } }
}
"""


@pytest.fixture(autouse=True)
def _empty_ledger() -> Iterator[None]:
    LEDGER.clear()
    yield
    LEDGER.clear()


async def test_seeded_runs_are_real_suspended_runs_spread_over_agents_threads_and_dates(store: SnapshotStore) -> None:
    # given a plan of 120 runs over both seedable agents and 7 threads
    plan = SeedPlan(runs=120, agents=2, threads=7, resources=3, days=2)
    reported: list[int] = []

    # when it is seeded
    written = await seed_store(store, plan, progress=reported.append)

    # then every run is stored, listed per agent, on the plan's threads and resources
    refunds = await store.list_runs("refund-agent", RunFilter())
    weather = await store.list_runs("weather-agent", RunFilter())
    assert written == 120
    assert reported[-1] == 120
    assert len(refunds) == len(weather) == 60
    runs = refunds + weather
    assert len({r["_id"] for r in runs}) == 120
    assert {r["threadId"] for r in runs} <= {f"thread-{k}" for k in range(7)}
    assert len({r["threadId"] for r in runs}) > 1
    assert {r["resourceId"] for r in runs} <= {f"customer-{k}" for k in range(3)}
    assert len({r["createdAt"] for r in runs}) > 100
    assert max(r["createdAt"] for r in runs) - min(r["createdAt"] for r in runs) > timedelta(days=1)
    assert {c["toolName"] for r in refunds for c in r["toolCalls"]} == {"issue_refund"}
    assert {c["toolName"] for r in weather for c in r["toolCalls"]} == {"ask_city"}
    assert all(r["status"] == "suspended" and r["pendingCount"] == len(r["toolCalls"]) for r in runs)
    history = await store.load_history("refund-agent", refunds[0]["_id"])
    assert history is not None
    assert isinstance(json.loads(history), list)


async def test_a_seeded_run_can_really_be_approved(store: SnapshotStore) -> None:
    # given one seeded refund run
    await seed_store(store, SeedPlan(runs=1, agents=1, threads=1))
    [run] = await store.list_runs("refund-agent", RunFilter())
    manager = RunManager(store, AgentRegistry(AGENTS), instance_id="test")

    # when each of its tool calls is approved
    outcome = None
    for call in run["toolCalls"]:
        outcome = await manager.approve("refund-agent", run["_id"], call["toolCallId"], principal="alice")

    # then the demo agent really continues from the cloned history and the run completes
    assert outcome is not None
    assert outcome.status == "completed"
    assert len(LEDGER) == len(run["toolCalls"])
    assert await store.get("refund-agent", run["_id"]) is None


@pytest.mark.parametrize(
    ("plan", "named"),
    [({"runs": -1}, "runs"), ({"runs": 1, "agents": 3}, "agents"), ({"runs": 1, "threads": 0}, "threads")],
)
def test_a_bad_plan_is_refused_naming_the_field(plan: dict[str, int], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        SeedPlan(**plan)


@pytest.mark.mongo
@pytest.mark.process
def test_runsgate_seed_writes_into_mongodb_uri(mongodb_uri: str) -> None:
    # when the CLI seeds 30 runs into a fresh database
    result = _processes.run(
        [sys.executable, "-m", "server", "seed", "--runs", "30", "--threads", "3"],
        cwd=ROOT,
        env=server_env(MONGODB_URI=mongodb_uri),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    # then it says so and the runs are in the store
    assert result.returncode == 0, result.stderr
    assert "wrote 30 suspended runs" in result.stdout

    async def count() -> int:
        store = mongo_store(mongodb_uri)
        await store.open()
        try:
            return await store.count_runs("refund-agent", RunFilter())
        finally:
            await store.drop_all()
            await store.close()

    assert asyncio.run(count()) == 30


@pytest.mark.process
def test_runsgate_seed_writes_into_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "seeded.db"
    # when the CLI seeds 30 runs into a new SQLite file named by --store
    result = _processes.run(
        [sys.executable, "-m", "server", "seed", "--runs", "30", "--threads", "3", "--store", f"sqlite:///{path}"],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    # then it says so and the runs are in the file
    assert result.returncode == 0, result.stderr
    assert "wrote 30 suspended runs" in result.stdout

    async def count() -> int:
        store = SQLiteSnapshotStore(path)
        await store.open()
        try:
            return await store.count_runs("refund-agent", RunFilter())
        finally:
            await store.close()

    assert asyncio.run(count()) == 30


@pytest.mark.process
def test_runsgate_seed_without_mongodb_uri_explains_the_memory_store() -> None:
    result = _processes.run(
        [sys.executable, "-m", "server", "seed", "--runs", "3"],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 2
    assert "RUNSGATE_SEED_RUNS" in result.stderr


def test_seed_runs_with_mongodb_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNSGATE_SEED_RUNS", "10")
    monkeypatch.setenv("MONGODB_URI", "mongodb://127.0.0.1:1/x")

    with pytest.raises(ConfigError, match="RUNSGATE_SEED_RUNS seeds the memory store only"):
        load_settings()


async def test_the_memory_store_is_seeded_at_start() -> None:
    # given a server started with RUNSGATE_SEED_RUNS=25
    app = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, seed_runs=25, seed_threads=4, auth=False))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        # when the refund agent's runs are listed over HTTP
        response = await http.post("/graphql", json={"query": LIST, "variables": {"agentId": "refund-agent"}})

    # then the 25 generated runs are there, with their tool calls
    body = response.json()
    assert "errors" not in body
    page = body["data"]["suspendedRuns"]
    assert page["totalCount"] == 25
    assert len(page["nodes"]) == 5
    assert all(n["toolCalls"][0]["toolName"] == "issue_refund" for n in page["nodes"])


def _seed_with_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, **variables: str
) -> tuple[int, str]:
    """``runsgate seed ARGS`` in-process with exactly ``variables`` set (no other ``RUNSGATE_*``, no
    ``MONGODB_URI``, no ``.env``); its exit status and its stderr."""
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("RUNSGATE_") or k == "MONGODB_URI"]:
        monkeypatch.delenv(key)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    status = main(["seed", *args])
    return status, capsys.readouterr().err


MEMORY_ADVICE = (
    "the store is the memory store, which lives inside the server process: seed it at start instead, "
    "RUNSGATE_SEED_RUNS=N runsgate serve"
)


@pytest.mark.parametrize(
    ("args", "variables", "line"),
    [
        (["--store", "memory://"], {}, f"{INVALID}--store: {MEMORY_ADVICE} (got 'memory://')"),
        ([], {"RUNSGATE_STORE": "memory://"}, f"{INVALID}RUNSGATE_STORE: {MEMORY_ADVICE} (got 'memory://')"),
        (
            [],
            {},
            f"{INVALID}the store is the memory store (neither --store, RUNSGATE_STORE nor MONGODB_URI names another), "
            "which lives inside the server process: seed it at start instead, RUNSGATE_SEED_RUNS=N runsgate serve",
        ),
    ],
    ids=["--store", "RUNSGATE_STORE", "unset"],
)
def test_seeding_the_memory_store_is_refused_naming_where_the_store_came_from(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    variables: dict[str, str],
    line: str,
) -> None:
    status, err = _seed_with_only(monkeypatch, tmp_path, capsys, "--runs", "3", *args, **variables)

    assert status == 2
    assert err == line + "\n"
    assert list(tmp_path.iterdir()) == []
