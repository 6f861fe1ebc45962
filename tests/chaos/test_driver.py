"""The chaos driver's retries (docs/chaos.md "The workload"), against a loopback HTTP server that
answers ``STORE_UNAVAILABLE`` while its store is "down": a request is sent again until answered,
through an outage longer than its minimum tries, and given up (``request never answered``) only
after those tries and ``quiet`` seconds in a row of the store up, or after ``give_up_after``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from chaos.driver import ATTEMPTS, START, Driver

UNAVAILABLE = {"data": None, "errors": [{"message": "store down", "extensions": {"code": "STORE_UNAVAILABLE"}}]}
STARTED = {"data": {"startRun": {"__typename": "RunOutcome", "runId": "r1", "status": "SUSPENDED", "error": None}}}


@dataclass
class Outage:
    """A store down until ``up_at`` (monotonic seconds), or for good with ``forever``."""

    up_at: float = 0.0
    forever: bool = False
    requests: list[float] = field(default_factory=list)

    def down(self) -> bool:
        return self.forever or time.monotonic() < self.up_at

    def calm(self) -> float:
        """Seconds the store has been up (``Driver.store_calm``)."""
        return 0.0 if self.down() else time.monotonic() - self.up_at


async def _serve(outage: Outage, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    outage.requests.append(time.monotonic())
    body = json.dumps(UNAVAILABLE if outage.down() else STARTED).encode()
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Outage]]:
    outage = Outage()
    listener = await asyncio.start_server(lambda r, w: _serve(outage, r, w), "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield f"http://127.0.0.1:{port}", outage


async def _start(driver: Driver) -> dict[str, Any] | None:
    import httpx

    variables = {"input": {"agentId": "chaos-supervisor", "prompt": "1 0", "idempotencyKey": "start-k"}}
    async with httpx.AsyncClient(timeout=driver.timeout) as driver._client:
        return await driver.request(random.Random(1), "startRun", START, variables, run_id=None)


def _driver(url: str, calm: Callable[[], float] | None, **options: Any) -> Driver:
    # pauses of 2 % of the real ones: the 12 tries take about 0.35 s
    return Driver([url], seed=1, backoff=0.02, store_calm=calm, **options)


async def test_a_request_is_sent_again_through_an_outage_longer_than_its_tries(server: tuple[str, Outage]) -> None:
    url, outage = server
    # given a store down for 2 s, far longer than the 12 tries' pauses
    outage.up_at = time.monotonic() + 2.0
    driver = _driver(url, outage.calm, quiet=0.5)

    # when a start is sent during the outage
    answer = await _start(driver)

    # then it is answered once the store is back, after more than 12 tries, and nothing gave up
    assert answer == STARTED["data"], answer
    assert len(outage.requests) > ATTEMPTS, len(outage.requests)
    assert outage.requests[-1] >= outage.up_at
    assert driver.gave_up == []


async def test_a_request_unanswered_while_the_store_is_up_is_given_up(server: tuple[str, Outage]) -> None:
    url, outage = server
    # given a server that answers STORE_UNAVAILABLE although no fault stopped the store
    outage.forever = True
    started = time.monotonic()
    driver = _driver(url, lambda: time.monotonic() - started + 100.0, quiet=0.5)

    # when a start is sent
    answer = await _start(driver)

    # then the driver gives up after its 12 tries and the quiet time, and says so
    assert answer is None
    assert len(outage.requests) >= ATTEMPTS
    assert outage.requests[-1] - started >= 0.5
    assert [(g["op"], g["attempts"]) for g in driver.gave_up] == [("startRun", len(outage.requests))]


async def test_a_request_is_given_up_after_its_time_budget_even_during_outages(server: tuple[str, Outage]) -> None:
    url, outage = server
    # given a store that never comes back
    outage.forever = True
    started = time.monotonic()
    driver = _driver(url, outage.calm, quiet=0.5, give_up_after=1.5)

    # when a start is sent
    answer = await _start(driver)

    # then the driver retries for its budget, not longer, and reports the request as never answered
    assert answer is None
    assert 1.5 <= time.monotonic() - started < 5.0
    assert len(outage.requests) > ATTEMPTS
    assert [g["op"] for g in driver.gave_up] == ["startRun"]
