"""The request limits keep the validation cache effective (``server/http/limits.py``).

The validation cache (Strawberry's ``ValidationCache``, ``resolvers.schema.build_schema``) keys
validated documents by the validation rules too; a limit extension that made a new rule class
per request made every request miss (validation ran for every page, 3x the CPU). Not a timing
test: it counts cache hits of the same document sent twice through the app, with every limit
on. The app runs without compiled execution, whose prepared operations skip validation
altogether for a query seen before (``resolvers.fastpath.prepared``;
``tests/server/test_prepared_operations.py``); mutations always take this path.
"""

from __future__ import annotations

import httpx
from strawberry.extensions import ValidationCache

from resolvers.schema import CACHE_SIZE
from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

QUERY = '{ suspendedRuns(agentId: "refund-agent", first: 5) { totalCount nodes { runId status } } }'


async def test_the_same_document_is_validated_once() -> None:
    # loopback: auth may be off
    app = create_app(
        Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, introspection=False, compiled_execution=False)
    )
    cache = ValidationCache(maxsize=CACHE_SIZE).cached_validate_document  # the LRU the schema's cache shares
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client,
    ):
        first = await client.post("/graphql", json={"query": QUERY})
        before = cache.cache_info()
        second = await client.post("/graphql", json={"query": QUERY})
        after = cache.cache_info()

    assert first.status_code == second.status_code == 200
    assert "errors" not in second.json(), second.json()
    assert after.hits == before.hits + 1
    assert after.misses == before.misses
