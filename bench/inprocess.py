"""CPU milliseconds per request, in process: ``uv run python -m bench.inprocess [runs] [requests]``.

Drives the real Starlette app through ``httpx.ASGITransport`` (no sockets, no load generator),
so the figure is the CPU time (``time.process_time``) one request costs the server process: the
GraphQL page vs ``/bench/raw-page``. CPU time, unlike wall-clock req/s under wrk, barely moves
when other processes share the machine, so it is how before/after figures of one change are
compared (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import sys
import time

import httpx

from server.app import create_app
from server.config import Settings

from .queries import PAGE_SIZE, page_body


async def cpu_ms_per_request(runs: int = 10_000, requests: int = 400) -> dict[str, float]:
    """Scenario -> CPU milliseconds per request, after 50 warm-up requests each."""
    app = create_app(Settings(mongodb_uri=None, seed_runs=runs, seed_threads=1000, bench_endpoints=True, auth=False))
    scenarios = {
        "graphql first": ("/graphql", page_body(first=PAGE_SIZE)),
        "raw first": ("/bench/raw-page", page_body(first=PAGE_SIZE)),
        "graphql thread": ("/graphql", page_body(first=PAGE_SIZE, filter={"threadId": "thread-7"})),
        "raw thread": ("/bench/raw-page", page_body(first=PAGE_SIZE, filter={"threadId": "thread-7"})),
    }
    out: dict[str, float] = {}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client,
    ):
        headers = {"content-type": "application/json"}
        for name, (path, body) in scenarios.items():
            for _ in range(50):
                (await client.post(path, content=body, headers=headers)).raise_for_status()
            began = time.process_time()
            for _ in range(requests):
                await client.post(path, content=body, headers=headers)
            out[name] = (time.process_time() - began) * 1000 / requests
    return out


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 10_000
    requests = int(argv[1]) if len(argv) > 1 else 400
    figures = asyncio.run(cpu_ms_per_request(runs, requests))
    for name, ms in figures.items():
        print(f"{name:<16} {ms:6.2f} CPU ms/request")
    print(
        f"GraphQL/raw (CPU): first {figures['raw first'] / figures['graphql first']:.2f}, "
        f"thread {figures['raw thread'] / figures['graphql thread']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
