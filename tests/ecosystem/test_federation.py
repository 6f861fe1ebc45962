"""runsgate in an Apollo Federation v2 supergraph, composed and served by Apollo's own tools.

runsgate (a real process) and a second small subgraph, ``orders-subgraph.mjs`` (Apollo Server
with ``@apollo/subgraph``, extending ``SuspendedRun`` by ``runId`` with its ``order``), are
composed with ``@apollo/composition`` from their ``_service { sdl }`` (``compose.mjs``), and the
supergraph is served by ``@apollo/gateway`` in ``@apollo/server`` (``gateway.mjs``). Queries go
through the gateway over HTTP and join both subgraphs, in both directions.

runsgate runs as ``tests/ecosystem/_counting_server.py``: the real app, on the memory store and
on MongoDB (FerretDB), with a store that records each ``get_many`` call (and, on MongoDB, each
``find`` command on ``run_snapshots``, from PyMongo's command monitoring), read over HTTP, so the
test counts the store queries behind the gateway's ``_entities`` request.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._servers import runsgate_process
from ._node import node_server, run_node_json

pytestmark = pytest.mark.usefixtures("node_tools")

ORDER_NUMBERS = (1042, 1043, 1045, 1046)
"""The demo refund agent asks to refund the order number named in the prompt (not 1044: the demo's
default rules approve its $15.50 refund automatically, so its run would never wait)."""

COUNTING_SERVER = [sys.executable, "-m", "tests.ecosystem._counting_server"]

START_RUN = """
mutation Start($prompt: String!) {
  startRun(input: {agentId: "refund-agent", prompt: $prompt}) {
    __typename
    ... on RunOutcome { runId status run { toolCalls { toolCallId args } } }
    ... on UserError { code message }
  }
}
"""

APPROVE = """
mutation Approve($runId: ID!, $toolCallId: ID!) {
  approveToolCall(input: {agentId: "refund-agent", runId: $runId, toolCallId: $toolCallId}) {
    __typename
    ... on RunOutcome { status }
    ... on UserError { code message }
  }
}
"""

RECORD_ORDER = """
mutation Record($number: Int!, $amount: Float!, $runId: ID!) {
  recordOrder(number: $number, amount: $amount, runId: $runId) { number }
}
"""

RUNS_WITH_ORDERS = """
{
  suspendedRuns(agentId: "refund-agent") {
    totalCount
    nodes { runId agentId status toolCalls { toolName args requiresApproval } order { number amount currency } }
  }
}
"""

ORDERS_WITH_RUNS = """
{
  orders { number amount run { runId agentId status toolCalls { toolName args } } }
}
"""


def _post(url: str, document: str, **variables: Any) -> dict[str, Any]:
    response = httpx.post(url, json={"query": document, "variables": variables}, timeout=60)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


@pytest.mark.parametrize("store", ["memory", pytest.param("mongo", marks=pytest.mark.mongo)])
def test_runsgate_composes_with_an_orders_subgraph_and_the_gateway_joins_them(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The stalled-run sweeper's periodic finds on run_snapshots would be counted with the
    # gateway's; it has nothing to do here, so it is off.
    settings = {"RUNSGATE_SWEEP_INTERVAL": "0"}
    if store == "mongo":
        settings["MONGODB_URI"] = request.getfixturevalue("mongodb_uri")
    with (
        runsgate_process(tmp_path / "runsgate.log", COUNTING_SERVER, **settings) as runsgate,
        node_server("orders-subgraph.mjs", log=tmp_path / "orders.log") as orders,
    ):
        # given runsgate's and the orders service's SDL, composed by Apollo's composition library
        supergraph = tmp_path / "supergraph.graphql"
        composed = run_node_json(
            "compose.mjs", str(supergraph), f"runsgate={runsgate}/graphql", f"orders={orders}/graphql"
        )
        # then composition has no errors, and the supergraph joins SuspendedRun from both subgraphs
        assert composed["errors"] == []
        assert '@key(fields: "runId")' in composed["subgraphs"]["runsgate"]
        assert 'type Agent @key(fields: "id")' in composed["subgraphs"]["runsgate"]
        sdl = supergraph.read_text()
        assert 'RUNSGATE @join__graph(name: "runsgate"' in sdl
        assert 'ORDERS @join__graph(name: "orders"' in sdl
        assert '@join__type(graph: ORDERS, key: "runId")' in sdl
        assert '@join__type(graph: RUNSGATE, key: "runId")' in sdl

        with node_server("gateway.mjs", str(supergraph), log=tmp_path / "gateway.log") as gateway:
            # given four refund runs on runsgate, each with an order recorded through the gateway,
            # and the first run approved (so it is gone from runsgate)
            runs = []
            for number in ORDER_NUMBERS:
                started = _post(f"{runsgate}/graphql", START_RUN, prompt=f"Please refund order {number}")["startRun"]
                assert started["__typename"] == "RunOutcome"
                assert started["status"] == "SUSPENDED"
                runs.append(started)
                amount = started["run"]["toolCalls"][0]["args"]["amount"]
                _post(gateway, RECORD_ORDER, number=number, amount=amount, runId=started["runId"])
            done = runs[0]
            approved = _post(
                f"{runsgate}/graphql",
                APPROVE,
                runId=done["runId"],
                toolCallId=done["run"]["toolCalls"][0]["toolCallId"],
            )["approveToolCall"]
            assert approved == {"__typename": "RunOutcome", "status": "COMPLETED"}
            order_of = {run["runId"]: number for run, number in zip(runs, ORDER_NUMBERS, strict=True)}

            # when the gateway lists the suspended runs (runsgate) with their orders (orders service)
            listed = _post(gateway, RUNS_WITH_ORDERS)["suspendedRuns"]

            # then each of the three waiting runs carries its own order
            assert listed["totalCount"] == 3
            assert {node["runId"] for node in listed["nodes"]} == {run["runId"] for run in runs[1:]}
            for node in listed["nodes"]:
                number = order_of[node["runId"]]
                assert node["agentId"] == "refund-agent"
                assert node["status"] == "SUSPENDED"
                [call] = node["toolCalls"]
                assert call["toolName"] == "issue_refund"
                assert call["requiresApproval"] is True
                assert call["args"]["order_id"] == number
                assert node["order"] == {"number": number, "amount": call["args"]["amount"], "currency": "USD"}

            # when the gateway lists the orders (orders service) with their runs (runsgate _entities)
            before = httpx.get(f"{runsgate}/test/store-reads", timeout=10).json()
            joined = _post(gateway, ORDERS_WITH_RUNS)["orders"]
            after = httpx.get(f"{runsgate}/test/store-reads", timeout=10).json()

            # then every order has its run, and the approved run's order has none
            assert [order["number"] for order in joined] == list(ORDER_NUMBERS)
            assert joined[0]["run"] is None
            for order, run in zip(joined[1:], runs[1:], strict=True):
                assert order["run"] == {
                    "runId": run["runId"],
                    "agentId": "refund-agent",
                    "status": "SUSPENDED",
                    "toolCalls": [
                        {"toolName": "issue_refund", "args": {"order_id": order["number"], "amount": order["amount"]}}
                    ],
                }
            # and runsgate resolved the four entities with one batched store query
            run_ids = sorted(run["runId"] for run in runs)
            reads = after["getMany"][len(before["getMany"]) :]
            assert len(reads) == 1, reads
            assert sorted(reads[0]) == run_ids
            if store == "mongo":
                # one find on run_snapshots for the four ids reached MongoDB, and, its reply holding
                # three (the approved run finished), the same find once more from the last: a reply
                # short of its limit is the end only once nothing follows (``mapping.read_page``)
                finds = after["snapshotFinds"][len(before["snapshotFinds"]) :]
                assert len(finds) == 2, finds
                assert finds[0] == finds[1], finds
                assert sorted(finds[0]["_id"]["$in"]) == run_ids
