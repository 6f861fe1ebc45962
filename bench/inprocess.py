"""CPU milliseconds per request, in process: ``./dev run python -m bench.inprocess [runs] [requests]``.

Calls the real Starlette app as ASGI, with no socket, no HTTP client and no load generator, so
the figure is the CPU time (``time.process_time``) that the server's own code spends on one
request: the GraphQL page with compiled completion (the default), the same page with
``RUNSGATE_COMPILED_EXECUTION=false``, and ``/bench/raw-page``. Unlike wall-clock req/s under
wrk, CPU time barely moves when other processes share the machine. Scenarios alternate in rounds
of ``requests``, and each figure is its best round, so a burst of load on the machine does not
count. This is how before/after figures of one change are compared (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from starlette.types import ASGIApp, Message

from server.settings import DEMO_AGENTS, Settings

from .queries import PAGE_SIZE, page_body
from .serve import create_bench_app as create_app

ROUNDS = 10


async def call(app: ASGIApp, path: str, body: bytes, *, accept: bytes | None = None) -> bytes:
    """POST ``body`` to ``path`` as one ASGI HTTP request, with an ``Accept`` header when given;
    the response body (status must be 200)."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            *([(b"accept", accept)] if accept is not None else []),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    sent = False
    messages: list[Message] = []

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # the client never disconnects
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    await app(scope, receive, send)
    if messages[0]["status"] != 200:
        raise RuntimeError(f"{path} answered {messages[0]['status']}")
    return b"".join(m.get("body", b"") for m in messages[1:])


Scenario = tuple[ASGIApp, str, bytes]
"""An app (its lifespan entered), a path, and the request body to POST there."""


async def best_cpu_ms(scenarios: dict[str, Scenario], requests: int) -> dict[str, float]:
    """Scenario -> CPU milliseconds per request: 50 warm-up requests each, then ``ROUNDS``
    rounds of ``requests`` requests, alternating scenarios; the best round counts."""
    best = dict.fromkeys(scenarios, float("inf"))
    for app, path, body in scenarios.values():
        for _ in range(50):
            await call(app, path, body)
    for _ in range(ROUNDS):
        for name, (app, path, body) in scenarios.items():
            began = time.process_time()
            for _ in range(requests):
                await call(app, path, body)
            best[name] = min(best[name], (time.process_time() - began) * 1000 / requests)
    return best


async def cpu_ms_per_request(runs: int = 10_000, requests: int = 200) -> dict[str, float]:
    """Scenario -> CPU milliseconds per request (``best_cpu_ms``)."""
    settings = Settings(agents=DEMO_AGENTS, mongodb_uri=None, seed_runs=runs, seed_threads=1000, auth=False)
    compiled = create_app(settings)
    standard = create_app(settings.model_copy(update={"compiled_execution": False}))
    first = page_body(first=PAGE_SIZE).encode()
    thread = page_body(first=PAGE_SIZE, filter={"threadId": "thread-7"}).encode()
    scenarios: dict[str, Scenario] = {
        "graphql first": (compiled, "/graphql", first),
        "graphql first, not compiled": (standard, "/graphql", first),
        "raw first": (compiled, "/bench/raw-page", first),
        "graphql thread": (compiled, "/graphql", thread),
        "graphql thread, not compiled": (standard, "/graphql", thread),
        "raw thread": (compiled, "/bench/raw-page", thread),
    }
    async with compiled.router.lifespan_context(compiled), standard.router.lifespan_context(standard):
        return await best_cpu_ms(scenarios, requests)


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 10_000
    requests = int(argv[1]) if len(argv) > 1 else 200
    figures = asyncio.run(cpu_ms_per_request(runs, requests))
    for name, ms in figures.items():
        print(f"{name:<30} {ms:6.3f} CPU ms/request")
    for page in ("first", "thread"):
        raw = figures[f"raw {page}"]
        print(
            f"GraphQL/raw (CPU), {page} page: {raw / figures[f'graphql {page}']:.2f} compiled, "
            f"{raw / figures[f'graphql {page}, not compiled']:.2f} not compiled"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
