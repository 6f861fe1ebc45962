"""What a request read is let go of once its answer is built, without waiting for the cyclic
garbage collector: graphql-core's executor refers to itself (``async_helpers``), so it and its
context live until a collection, and a request's DataLoaders must not live with them (issue 42:
every run's ``events { data }`` grew the server by 46 MiB for one client asking again and again).
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import httpx
import pytest

from resolvers import loaders as loaders_module
from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

from .._graphql import REFUND, REFUND_PROMPT

START = "mutation S($input: StartRunInput!) { startRun(input: $input) { __typename ... on RunOutcome { status } } }"
EVENTS = '{ suspendedRuns(agentId: "refund-agent", first: 10) { nodes { events { data } } } }'


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "standard"])
async def test_a_requests_dataloaders_are_let_go_once_its_answer_is_built(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    made: list[weakref.ref[Any]] = []
    original = loaders_module.Loaders.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(loaders_module.Loaders, "__init__", recording)
    app = create_app(
        Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, sweep_interval=0, compiled_execution=compiled)
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        started = await http.post(
            "/graphql", json={"query": START, "variables": {"input": {"agentId": REFUND, "prompt": REFUND_PROMPT}}}
        )
        assert started.json()["data"]["startRun"]["status"] == "SUSPENDED", started.text
        gc.collect()
        gc.disable()  # only reference counting frees what follows
        try:
            # when a request reads every run's events through its DataLoaders
            answer = await http.post("/graphql", json={"query": EVENTS})
            [node] = answer.json()["data"]["suspendedRuns"]["nodes"]
            assert node["events"], answer.text
            # then its DataLoaders, and what they read, are gone once the answer is sent
            assert made, "the request used DataLoaders"
            assert [ref for ref in made if ref() is not None] == []
        finally:
            gc.enable()
