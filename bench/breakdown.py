"""Where a page's CPU time goes: ``./dev run python -m bench.breakdown [runs]``.

Calls the app as ASGI in process (``bench.inprocess.call``) with requests that each add one part
of the benchmark's page: ``{ __typename }`` (Strawberry's per-request work alone), the page's root
field with only ``pageInfo`` selected (+ arguments, variables and the resolver: store call,
cursors, objects), the whole page (+ completing the runs), and ``/bench/raw-page``. Prints the
CPU milliseconds of each (``time.process_time``, best of 10 alternating rounds of 200 requests).
"""

from __future__ import annotations

import asyncio
import json
import sys

from server.settings import DEMO_AGENTS, Settings

from .inprocess import best_cpu_ms
from .queries import AGENT, PAGE_SIZE, page_body
from .serve import create_bench_app as create_app

PARTS = {
    "{ __typename }": ("/graphql", json.dumps({"query": "{ __typename }"})),
    "root field, pageInfo only": (
        "/graphql",
        json.dumps(
            {
                "query": "query($agentId: ID!) { suspendedRuns(agentId: $agentId, first: 20) "
                "{ pageInfo { hasNextPage endCursor } } }",
                "variables": {"agentId": AGENT},
            }
        ),
    ),
    "whole page (bench.queries.PAGE)": ("/graphql", page_body(first=PAGE_SIZE)),
    "raw page (/bench/raw-page)": ("/bench/raw-page", page_body(first=PAGE_SIZE)),
}


async def breakdown(runs: int = 10_000, requests: int = 200) -> dict[str, float]:
    """Part -> CPU milliseconds per request (``bench.inprocess.best_cpu_ms``)."""
    app = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, seed_runs=runs, seed_threads=1000, auth=False))
    async with app.router.lifespan_context(app):
        return await best_cpu_ms({name: (app, path, body.encode()) for name, (path, body) in PARTS.items()}, requests)


def main(argv: list[str]) -> int:
    for name, ms in asyncio.run(breakdown(int(argv[0]) if argv else 10_000)).items():
        print(f"{name:<34} {ms:6.3f} CPU ms/request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
