"""Node ``graphql-ws`` clients against real runsgate processes (docs/api.md "Subscriptions").

``events.test.mjs``: a client subscribed on instance A receives, in order, the events of a run
started and approved through instance B, both processes on one store (a SQLite file, then a
MongoDB database).
``close-codes.test.mjs``: the graphql-transport-ws close codes, with a raw ``ws`` socket.
Each Node file runs with ``node --test``; its report is shown when it fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._servers import runsgate_process, runsgate_processes, shared_store_env

from .. import _processes

HERE = Path(__file__).resolve().parent


def run_node_tests(node: str, test_file: str, **env: str) -> None:
    result = _processes.run(
        [node, "--test", "--test-reporter=spec", test_file],
        cwd=HERE,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, report
    assert "fail 0" in report, report


def test_a_subscriber_on_one_instance_receives_the_run_events_caused_on_another(
    request: pytest.FixtureRequest, node: str, shared_store_kind: str, tmp_path: Path
) -> None:
    with runsgate_processes(
        [tmp_path / "a.log", tmp_path / "b.log"],
        **shared_store_env(request, shared_store_kind, tmp_path),
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.2",
        RUNSGATE_GRAPHIQL="false",
    ) as (a, b):
        run_node_tests(node, "events.test.mjs", RUNSGATE_A=a, RUNSGATE_B=b)


def test_graphql_transport_ws_close_codes(node: str, tmp_path: Path) -> None:
    with runsgate_process(tmp_path / "server.log", RUNSGATE_WS_CONNECTION_INIT_TIMEOUT="1") as url:
        run_node_tests(node, "close-codes.test.mjs", RUNSGATE_URL=url)
