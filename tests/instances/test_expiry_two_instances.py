"""Deadlines on two real runsgate processes sharing one store (issue 18 part 2; docs/guarantees.md).

Both instances sweep every 0.05 s with the same rule: ``act`` is approved on expiry after 1 s.
Each expired call is decided exactly once (one ``expired`` and one ``decision`` event, by
``expiry``), whichever instance's sweeper records it first, and the tool runs exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests._servers import runsgate_processes, shared_store_env

from .._graphql import GraphQLClient
from ._runs import assert_gone_everywhere, run_events, start_run, suspended_run, token
from .agents import side_effect_lines

RUNS = 6


@pytest.fixture(scope="module")
def servers(
    request: pytest.FixtureRequest, shared_store_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    workdir = tmp_path_factory.mktemp("expiry-two-instances")
    side_effects = workdir / "side-effects.log"
    side_effects.touch()
    with runsgate_processes(
        [workdir / "a.log", workdir / "b.log"],
        **shared_store_env(request, shared_store_kind, workdir),
        RUNSGATE_AGENTS="tests.instances.agents:AGENTS",
        RUNSGATE_GRAPHIQL="false",
        RUNSGATE_TEST_SIDE_EFFECTS=str(side_effects),
        RUNSGATE_TOOL_RULES=json.dumps([{"tool": "act", "expiresAfter": 1, "onExpiry": "approve"}]),
        RUNSGATE_SWEEP_INTERVAL="0.05",
    ) as (a, b):
        yield a, b, side_effects


@pytest.fixture
async def clients(servers: tuple[str, str, Path]) -> AsyncIterator[tuple[GraphQLClient, GraphQLClient]]:
    async with GraphQLClient.at(servers[0]) as a, GraphQLClient.at(servers[1]) as b:
        yield a, b


async def test_both_sweepers_see_each_expired_call_and_only_one_applies_it(
    servers: tuple[str, str, Path], clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    # given runs waiting on both instances, each with one call due in 1 s
    tok = token()
    started = [await start_run(clients[i % 2], tok, calls=1) for i in range(RUNS)]
    run_ids = [outcome["run"]["runId"] for outcome in started]

    # when both sweepers run past the deadline, until every run finished
    async with asyncio.timeout(30):
        for run_id in run_ids:
            while await suspended_run(clients[0], run_id) is not None:  # noqa: ASYNC110
                await asyncio.sleep(0.1)

    # then each call was expired and approved once, and its tool ran once
    for run_id in run_ids:
        events = await run_events(clients[1], run_id)
        kinds = [e["type"] for e in events]
        assert kinds.count("expired") == 1, kinds
        assert kinds.count("decision") == 1, kinds
        assert kinds.count("completed") == 1, kinds
        assert kinds.index("expired") + 1 == kinds.index("decision"), kinds
        decision = events[kinds.index("decision")]
        assert (decision["by"], decision["data"]["kind"]) == ("expiry", "approved")
        await assert_gone_everywhere(clients, run_id)
    lines = side_effect_lines(servers[2], tok)
    assert sorted(line[0] for line in lines) == sorted([f"{tok}#1"] * RUNS), lines
