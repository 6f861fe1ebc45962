"""Serving (docs/api.md "Endpoints"): GraphiQL and GET queries on ``/graphql``, ``/healthz``, ``/readyz``."""

from __future__ import annotations

import httpx

from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

from .._graphql import AGENTS, REFUND, REFUND_PROMPT, GraphQLClient

GET_START_RUN = """
mutation { startRun(input: {agentId: "refund-agent", prompt: "Please refund order 1042"}) {
  __typename ... on UserError { code message } ... on RunOutcome { runId status }
} }
"""


async def test_a_browser_get_on_graphql_gets_the_graphiql_page(http: httpx.AsyncClient) -> None:
    # given the app with GraphiQL on (the default)
    # when a browser opens /graphql
    response = await http.get("/graphql", headers={"Accept": "text/html"})

    # then it gets the GraphiQL explorer
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "graphiql" in response.text.lower()
    assert "<html" in response.text.lower()


async def test_a_get_with_a_query_answers_json(http: httpx.AsyncClient) -> None:
    # given the demo agents
    # when a query is sent with GET (GraphQL over HTTP)
    response = await http.get("/graphql", params={"query": "{agents{id}}"})

    # then the answer is the JSON result
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "data": {"agents": [{"id": "refund-agent"}, {"id": "support-supervisor"}, {"id": "weather-agent"}]},
        "extensions": {"cost": {"requestedQueryCost": 3, "maximumAvailable": 10_000}},
    }


async def test_a_mutation_sent_with_get_is_refused_and_does_nothing(
    http: httpx.AsyncClient, gql: GraphQLClient
) -> None:
    # given no suspended run
    # when startRun is sent with GET
    response = await http.get("/graphql", params={"query": GET_START_RUN})

    # then it is refused and no run was started
    assert response.status_code in {400, 405}
    assert (await gql.suspended_runs(REFUND))["totalCount"] == 0


async def test_agents_are_listed_with_their_names(gql: GraphQLClient) -> None:
    # given the demo registry
    # when the agents are read over POST
    agents = (await gql.data(AGENTS))["agents"]

    # then the three demo agents are there, by id
    assert [a["id"] for a in agents] == ["refund-agent", "support-supervisor", "weather-agent"]
    assert all(a["name"] == a["id"] for a in agents)


async def test_healthz_says_the_process_is_alive(http: httpx.AsyncClient) -> None:
    # when /healthz is asked
    response = await http.get("/healthz")

    # then it answers 200 ok
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_says_the_store_is_reachable(http: httpx.AsyncClient, gql: GraphQLClient) -> None:
    # given a store in use
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when /readyz is asked
    response = await http.get("/readyz")

    # then it answers 200 ready
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


async def test_with_graphiql_off_a_browser_get_does_not_get_the_explorer() -> None:
    # given the app started with GraphiQL off
    app = create_app(
        Settings(agents=DEMO_AGENTS, mongodb_uri=None, graphiql=False, auth=False)
    )  # loopback: auth may be off
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        # when a browser opens /graphql
        response = await http.get("/graphql", headers={"Accept": "text/html"})

    # then no explorer page is served
    assert "graphiql" not in response.text.lower()
    assert response.status_code != 200
