"""``suspendedRunEvents`` over a real WebSocket to a runsgate process: filters, ``afterEventId``,
starting now, and rejected arguments (docs/api.md "Subscriptions").

The module's runs are started over HTTP before the tests, in this order: a marker run, then
``Y`` (resource r2, thread t1), ``Z`` (r1, t2) and ``X`` (r1, t1); each suspends with a
``started`` and a ``suspended`` event. A stream resumed after the marker's last event is
therefore known in full, and ends with one of ``X``'s events: reading up to it shows every event
a filter let through, and that it let nothing else through.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests._servers import runsgate_process

from .._graphql import EVENTS, run_event_ids, start_refund_run, ws_connect

AGENT = "refund-agent"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One runsgate process (memory store) polling its event log every 0.1 s."""
    log = tmp_path_factory.mktemp("subscriptions") / "server.log"
    with runsgate_process(log, RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1", RUNSGATE_GRAPHIQL="false") as url:
        yield url


@dataclass
class Runs:
    tag: str
    """Prefix of this module's resource and thread ids."""
    after_marker: str
    """Id of the marker run's last event."""
    x: str
    y: str
    z: str

    def r(self, name: str) -> str:
        return f"{self.tag}-{name}"


@pytest.fixture(scope="module")
async def runs(server: str) -> Runs:
    tag = uuid.uuid4().hex[:8]
    marker = await start_refund_run(server, resource_id=f"{tag}-marker", thread_id=None)
    y = await start_refund_run(server, resource_id=f"{tag}-r2", thread_id=f"{tag}-t1")
    z = await start_refund_run(server, resource_id=f"{tag}-r1", thread_id=f"{tag}-t2")
    x = await start_refund_run(server, resource_id=f"{tag}-r1", thread_id=f"{tag}-t1")
    return Runs(tag=tag, after_marker=(await run_event_ids(server, marker))[-1], x=x, y=y, z=z)


async def stream(server: str, variables: dict[str, Any], last: tuple[str, str]) -> list[dict[str, Any]]:
    async with ws_connect(server) as ws:
        operation = await ws.subscribe(EVENTS, {"agentId": AGENT, **variables})
        return await ws.events_until(operation, last)


async def test_resuming_after_an_event_streams_every_later_event_in_creation_order(server: str, runs: Runs) -> None:
    events = await stream(server, {"afterEventId": runs.after_marker}, last=(runs.x, "suspended"))

    assert [(e["runId"], e["type"]) for e in events] == [
        (runs.y, "started"),
        (runs.y, "suspended"),
        (runs.z, "started"),
        (runs.z, "suspended"),
        (runs.x, "started"),
        (runs.x, "suspended"),
    ]
    ids = [e["id"] for e in events]
    assert ids == sorted(ids)
    assert ids[:2] == await run_event_ids(server, runs.y)
    assert events[4]["resourceId"] == runs.r("r1")
    assert events[4]["threadId"] == runs.r("t1")


async def test_the_after_event_id_bound_is_exclusive(server: str, runs: Runs) -> None:
    z_suspended = (await run_event_ids(server, runs.z))[-1]

    events = await stream(server, {"afterEventId": z_suspended}, last=(runs.x, "suspended"))

    assert [(e["runId"], e["type"]) for e in events] == [(runs.x, "started"), (runs.x, "suspended")]


@pytest.mark.parametrize(
    ("run_filter", "expected", "last"),
    [
        pytest.param({"resourceId": "r1"}, ["z:started", "z:suspended", "x:started", "x:suspended"], "x:suspended"),
        pytest.param({"threadId": "t1"}, ["y:started", "y:suspended", "x:started", "x:suspended"], "x:suspended"),
        pytest.param({"runId": "x"}, ["x:started", "x:suspended"], "x:suspended"),
        pytest.param({"kinds": ["SUSPENDED"]}, ["y:suspended", "z:suspended", "x:suspended"], "x:suspended"),
        pytest.param(
            {"resourceId": "r1", "threadId": "t1", "kinds": ["STARTED", "COMPLETED"]}, ["x:started"], "x:started"
        ),
    ],
)
async def test_the_filter_lets_through_only_matching_events(
    server: str, runs: Runs, run_filter: dict[str, Any], expected: list[str], last: str
) -> None:
    names = {"x": runs.x, "y": runs.y, "z": runs.z}
    concrete = {
        key: value if key == "kinds" else names[value] if key == "runId" else runs.r(value)
        for key, value in run_filter.items()
    }
    run, kind = last.split(":")

    events = await stream(server, {"afterEventId": runs.after_marker, "filter": concrete}, last=(names[run], kind))

    by_name = {v: k for k, v in names.items()}
    assert [f"{by_name[e['runId']]}:{e['type']}" for e in events] == expected


async def test_a_subscription_without_after_event_id_starts_now(server: str, runs: Runs) -> None:
    resource = runs.r("now")
    before = [await start_refund_run(server, resource_id=resource, thread_id=None) for _ in range(2)]
    async with ws_connect(server) as ws:
        operation = await ws.subscribe(EVENTS, {"agentId": AGENT, "filter": {"resourceId": resource}})
        # the server registers the subscription a moment after `subscribe` is sent (the protocol does
        # not acknowledge it): start runs until one of their events arrives
        probes: list[str] = []
        first: dict[str, Any] | None = None
        while first is None and len(probes) < 20:
            probes.append(await start_refund_run(server, resource_id=resource, thread_id=None))
            first = await _next_event(ws, operation, wait=2.0)

    assert first is not None, "no event of the runs started after subscribing"
    assert first["runId"] in probes
    assert first["runId"] not in before


async def _next_event(ws: Any, operation: str, *, wait: float) -> dict[str, Any] | None:
    try:
        message = await asyncio.wait_for(ws.receive(), wait)
    except TimeoutError:
        return None
    assert message["id"] == operation, message
    assert message["type"] == "next", message
    event: dict[str, Any] = message["payload"]["data"]["suspendedRunEvents"]
    return event


@pytest.mark.parametrize(
    ("variables", "code", "argument", "says"),
    [
        pytest.param({"agentId": "no-such-agent"}, "AGENT_NOT_FOUND", "agentId", "no-such-agent", id="unknown-agent"),
        pytest.param(
            {"afterEventId": "not-an-event-id"}, "BAD_USER_INPUT", "afterEventId", "afterEventId", id="bad-after"
        ),
        pytest.param({"filter": {"kinds": []}}, "BAD_USER_INPUT", "filter.kinds", "filter.kinds", id="empty-kinds"),
    ],
)
async def test_bad_arguments_get_a_typed_error_and_end_the_operation(
    server: str, variables: dict[str, Any], code: str, argument: str, says: str
) -> None:
    async with ws_connect(server) as ws:
        operation = await ws.subscribe(EVENTS, {"agentId": AGENT, **variables})
        error = await ws.receive()
        complete = await ws.receive()

    assert error["id"] == operation
    assert error["type"] == "next"
    assert error["payload"]["data"] is None
    [problem] = error["payload"]["errors"]
    assert problem["extensions"] == {"code": code, "argument": argument}
    assert says in problem["message"]
    assert complete == {"id": operation, "type": "complete"}
