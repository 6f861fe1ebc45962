"""The README walk-through from Python, with the ``gql`` client (gql 4, httpx transport).

Starts a refund run, lists the agent's suspended runs, approves the pending tool call with an
edited amount, checks that the run finished and is no longer listed, then decides a run's two
refunds in one bulk request (approve one, decline one). Prints one line per step; a step the
server refuses (a ``UserError``, e.g. a tool rule's) prints its code and message and exits 1.

With authentication on, put an API key (``runsgate new-key``, with the scopes runs:read,
runs:decide and runs:start) in ``RUNSGATE_TOKEN``: it is sent as ``Authorization: Bearer <key>``.
Without one, a server with authentication on answers 401, and the script stops saying so.

Usage:
    pip install 'gql[httpx]'
    python examples/walkthrough_gql.py [GRAPHQL_URL]    # default http://127.0.0.1:4000/graphql
    RUNSGATE_TOKEN=rg_... python examples/walkthrough_gql.py [GRAPHQL_URL]
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from gql import Client, GraphQLRequest
from gql.transport.exceptions import TransportQueryError, TransportServerError
from gql.transport.httpx import HTTPXTransport

AGENT = "refund-agent"

START_RUN = """
mutation StartRun($input: StartRunInput!) {
  startRun(input: $input) {
    __typename
    ... on RunOutcome { runId status run { toolCalls { toolCallId questionId toolName args requiresApproval } } }
    ... on UserError { code message }
  }
}
"""

SUSPENDED_RUNS = """
query SuspendedRuns($agentId: ID!, $filter: SuspendedRunFilter) {
  suspendedRuns(agentId: $agentId, filter: $filter) {
    totalCount
    nodes { runId threadId toolCalls { toolCallId toolName args requiresApproval decision { kind } } }
  }
}
"""

APPROVE = """
mutation Approve($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) {
    __typename
    ... on RunOutcome { status output }
    ... on UserError { code message }
  }
}
"""

DECIDE = """
mutation Decide($input: DecideToolCallsInput!) {
  decideToolCalls(input: $input) {
    results { __typename ... on RunOutcome { status output } ... on UserError { code message } }
  }
}
"""


def call(session: Any, document: str, **variables: Any) -> dict[str, Any]:
    """Run one operation; gql raises ``TransportQueryError`` when the answer has top-level errors."""
    result: dict[str, Any] = session.execute(GraphQLRequest(document, variable_values=variables))
    return result


def unauthenticated(error: Exception) -> str | None:
    """Why the server refused the request as unauthenticated (HTTP 401), or None for another error."""
    if isinstance(error, TransportServerError) and error.code == 401:
        return str(error)
    if isinstance(error, TransportQueryError):
        for problem in error.errors or []:
            if (problem.get("extensions") or {}).get("code") == "UNAUTHENTICATED":
                return str(problem.get("message"))
    return None


def main(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        return walk_through(url, headers)
    except (TransportQueryError, TransportServerError) as error:
        why = unauthenticated(error)
        if why is None:
            raise
        print(
            f"walkthrough_gql.py: {url} answered 401 ({why}): set RUNSGATE_TOKEN to an API key with the scopes "
            "runs:read, runs:decide and runs:start (runsgate new-key)",
            file=sys.stderr,
        )
        return 1


def walk_through(url: str, headers: dict[str, str]) -> int:
    with Client(transport=HTTPXTransport(url=url, timeout=60, headers=headers)) as session:
        # 1. start a run that stops at a tool call needing approval
        started = call(
            session,
            START_RUN,
            input={"agentId": AGENT, "prompt": "Please refund order 1042", "threadId": "t-1"},
        )["startRun"]
        if started["__typename"] != "RunOutcome":
            print(f"startRun failed: {started}")
            return 1
        run_id = started["runId"]
        pending = started["run"]["toolCalls"][0]
        print(f"started run {run_id}: {started['status']}")
        print(f"waiting on {pending['toolName']} {json.dumps(pending['args'])}")

        # 2. list the agent's suspended runs in that thread
        listed = call(session, SUSPENDED_RUNS, agentId=AGENT, filter={"threadId": "t-1"})["suspendedRuns"]
        print(f"{AGENT} has {listed['totalCount']} suspended run(s) in thread t-1")
        print(f"listed: {run_id in [run['runId'] for run in listed['nodes']]}")

        # 3. approve the question shown with an edited amount: the tool runs with it and the run finishes
        edited = {"order_id": 1042, "amount": 25}
        shown = {"runId": run_id, "toolCallId": pending["toolCallId"], "questionId": pending["questionId"]}
        approved = call(session, APPROVE, input={"agentId": AGENT, **shown, "editedArgs": edited})["approveToolCall"]
        if approved["__typename"] != "RunOutcome":
            print(f"approveToolCall failed: {approved}")
            return 1
        print(f"approved with {json.dumps(edited)}: {approved['status']} with output {approved['output']}")

        # 4. the finished run is gone from the listing
        after = call(session, SUSPENDED_RUNS, agentId=AGENT, filter={"threadId": "t-1"})["suspendedRuns"]
        print(f"still listed: {run_id in [run['runId'] for run in after['nodes']]}")

        # 5. a run with two refunds: approve one and decline the other in one bulk request
        started = call(
            session,
            START_RUN,
            input={"agentId": AGENT, "prompt": "Please refund orders 1042 and 1043", "threadId": "t-2"},
        )["startRun"]
        if started["__typename"] != "RunOutcome":
            print(f"startRun failed: {started}")
            return 1
        run_id, calls = started["runId"], started["run"]["toolCalls"]
        print(f"started run {run_id} with {len(calls)} pending calls")
        shown = [{"runId": run_id, "toolCallId": c["toolCallId"], "questionId": c["questionId"]} for c in calls]
        decisions = [
            {**shown[0], "kind": "APPROVED"},
            {**shown[1], "kind": "DECLINED", "reason": "Refunded by phone"},
        ]
        results = call(session, DECIDE, input={"agentId": AGENT, "decisions": decisions})["decideToolCalls"]["results"]
        for number, result in enumerate(results, start=1):  # each decision answers on its own
            if result["__typename"] != "RunOutcome":
                print(f"decideToolCalls refused decision {number}: {result['code']}: {result['message']}")
                return 1
        print(f"decided in bulk: {results[0]['status']}, {results[1]['status']} with output {results[1]['output']}")
    return 0


if __name__ == "__main__":
    sys.exit(
        main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:4000/graphql", os.environ.get("RUNSGATE_TOKEN"))
    )
