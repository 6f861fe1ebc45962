"""GraphQL documents of the HTTP tests and a small client that POSTs them to ``/graphql``.

Mutation documents always select ``__typename`` and ``... on UserError { code message }`` so a
test sees which union member came back; each error type adds its own fields.
"""

from __future__ import annotations

from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Route

from resolvers.federation import FederationSchema
from server.graphql_view import GraphQLView

REFUND = "refund-agent"
WEATHER = "weather-agent"
SUPERVISOR = "support-supervisor"
REFUND_PROMPT = "Please refund order 1042"
TWO_REFUNDS_PROMPT = "Please refund orders 1042 and 1043"
WEATHER_PROMPT = "What's the weather like?"

RUN_FIELDS = """
fragment RunFields on SuspendedRun {
  id runId agentId status threadId resourceId parentRunId createdAt suspendedAt
  toolCalls {
    toolCallId toolName args requiresApproval suspendPayload resumeSchema
    decision { kind decidedAt decidedBy reason }
  }
}
"""

OUTCOME_FIELDS = """
fragment OutcomeFields on RunOutcome { runId agentId status output error run { ...RunFields } }
"""

ERROR_FIELDS = """
fragment ErrorFields on UserError {
  code message
  ... on AgentNotFound { agentId }
  ... on RunNotFound { agentId runId }
  ... on ToolCallNotFound { runId missingToolCallId: toolCallId }
  ... on ToolCallAlreadyDecided { runId toolCallId decision { kind decidedAt decidedBy reason } }
  ... on WrongToolCallKind { runId toolCallId expected }
  ... on AmbiguousToolCall { runId toolCallIds }
  ... on InvalidResumeData { problems { path message } }
  ... on IdempotencyKeyReused { idempotencyKey }
}
"""

_RESULT = "{ __typename ... on UserError { code message } ...OutcomeFields ...ErrorFields }"
_FRAGMENTS = RUN_FIELDS + OUTCOME_FIELDS + ERROR_FIELDS

START_RUN = "mutation StartRun($input: StartRunInput!) { startRun(input: $input) " + _RESULT + " }" + _FRAGMENTS
APPROVE = (
    "mutation Approve($input: ApproveToolCallInput!) { approveToolCall(input: $input) " + _RESULT + " }" + _FRAGMENTS
)
DECLINE = (
    "mutation Decline($input: DeclineToolCallInput!) { declineToolCall(input: $input) " + _RESULT + " }" + _FRAGMENTS
)
RESUME = "mutation Resume($input: ResumeRunInput!) { resumeRun(input: $input) " + _RESULT + " }" + _FRAGMENTS

SUSPENDED_RUNS = (
    """
query SuspendedRuns($agentId: ID!, $filter: SuspendedRunFilter, $page: PageInput,
                    $first: Int, $after: String, $last: Int, $before: String) {
  suspendedRuns(agentId: $agentId, filter: $filter, page: $page,
                first: $first, after: $after, last: $last, before: $before) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { ...RunFields } }
    nodes { runId }
  }
}
"""
    + RUN_FIELDS
)
SUSPENDED_RUN = (
    "query SuspendedRun($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) "
    "{ ...RunFields } }" + RUN_FIELDS
)
NODE = "query Node($id: ID!) { node(id: $id) { __typename id ... on SuspendedRun { ...RunFields } } }" + RUN_FIELDS
AGENTS = "query Agents { agents { id name } }"


class GraphQLClient:
    """POSTs documents to ``/graphql`` and unpacks the GraphQL response."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def execute(self, document: str, **variables: Any) -> dict[str, Any]:
        """The whole response body (``data`` and/or ``errors``)."""
        response = await self.http.post("/graphql", json={"query": document, "variables": variables})
        body: dict[str, Any] = response.json()
        assert "data" in body or "errors" in body, body
        return body

    async def data(self, document: str, **variables: Any) -> dict[str, Any]:
        """``data`` of a response that must have no ``errors``."""
        body = await self.execute(document, **variables)
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    async def errors(self, document: str, **variables: Any) -> tuple[Any, list[dict[str, Any]]]:
        """``(data, errors)`` of a response that must carry ``errors``."""
        body = await self.execute(document, **variables)
        assert body.get("errors"), body
        return body.get("data"), body["errors"]

    # -- shortcuts -------------------------------------------------------------------------------
    async def start_run(self, agent_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
        """``startRun``: the ``RunOutcome`` (any other union member fails the test)."""
        result: dict[str, Any] = (await self.data(START_RUN, input={"agentId": agent_id, "prompt": prompt, **fields}))[
            "startRun"
        ]
        assert result["__typename"] == "RunOutcome", result
        return result

    async def suspend(self, agent_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
        """Start a run that must suspend; its stored run."""
        outcome = await self.start_run(agent_id, prompt, **fields)
        assert outcome["status"] == "SUSPENDED", outcome
        run: dict[str, Any] = outcome["run"]
        return run

    async def suspended_runs(self, agent_id: str, **arguments: Any) -> dict[str, Any]:
        """``suspendedRuns`` connection (no errors allowed)."""
        connection: dict[str, Any] = (await self.data(SUSPENDED_RUNS, agentId=agent_id, **arguments))["suspendedRuns"]
        assert [edge["node"]["runId"] for edge in connection["edges"]] == [
            node["runId"] for node in connection["nodes"]
        ]
        return connection

    async def listed_ids(self, agent_id: str, **arguments: Any) -> list[str]:
        """Run ids of one ``suspendedRuns`` page, in listing order."""
        return [node["runId"] for node in (await self.suspended_runs(agent_id, **arguments))["nodes"]]

    async def suspended_run(self, agent_id: str, run_id: str) -> dict[str, Any] | None:
        run: dict[str, Any] | None = (await self.data(SUSPENDED_RUN, agentId=agent_id, runId=run_id))["suspendedRun"]
        return run

    async def approve(self, agent_id: str, run_id: str, tool_call_id: str, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = (
            await self.data(APPROVE, input={"agentId": agent_id, "runId": run_id, "toolCallId": tool_call_id, **fields})
        )["approveToolCall"]
        return result

    async def decline(self, agent_id: str, run_id: str, tool_call_id: str, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = (
            await self.data(DECLINE, input={"agentId": agent_id, "runId": run_id, "toolCallId": tool_call_id, **fields})
        )["declineToolCall"]
        return result

    async def resume(self, agent_id: str, run_id: str, resume_data: Any, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = (
            await self.data(RESUME, input={"agentId": agent_id, "runId": run_id, "resumeData": resume_data, **fields})
        )["resumeRun"]
        return result


def graphql_view(app: Starlette) -> GraphQLView:
    """The view the app's ``/graphql`` route serves."""
    view = next(route.endpoint for route in app.routes if isinstance(route, Route) and route.path == "/graphql")
    assert isinstance(view, GraphQLView)
    return view


def graphql_schema(app: Starlette) -> FederationSchema:
    """The schema the app's ``/graphql`` route serves (its extensions, prepared operations...)."""
    schema = graphql_view(app).schema
    assert isinstance(schema, FederationSchema)
    return schema
