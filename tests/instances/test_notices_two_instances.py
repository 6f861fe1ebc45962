"""Reminders and escalations on two real runsgate processes sharing one store (issue 45 part 3).

Both instances look for due notices every 0.05 s with the same rule: ``act`` is reminded after
0.5 s and escalated after 1 s. Each question gets one ``reminded`` and one ``escalated`` event,
whichever instance records it first; a webhook receiver gets one ``call.reminded`` and one
``call.escalated`` per question (by event id: webhooks are sent at least once), and the rule's
recipient one email when each question starts to wait and one when it is escalated, through a
real SMTP server (``aiosmtpd``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import pytest

from tests._receiver import Receiver, new_secret, receiving
from tests._servers import runsgate_processes, shared_store_env
from tests._smtp import Inbox, smtp_server

from .._graphql import WAIT, GraphQLClient
from ._runs import run_events, start_run, token

RUNS = 4
RULE = {
    "tool": "act",
    "remindAfter": 0.5,
    "escalateAfter": 1,
    "recipients": {"waiting": ["jwt:ops"], "escalated": ["jwt:ops"]},
}
OPS = [{"principal": "jwt:ops", "email": "ops@example.com", "scopes": ["runs:decide"], "resources": "*"}]


@pytest.fixture(scope="module")
def servers(
    request: pytest.FixtureRequest, shared_store_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Receiver, Inbox]]:
    workdir = tmp_path_factory.mktemp("notices-two-instances")
    with smtp_server() as (inbox, port), receiving(new_secret()) as receiver:
        hooks = [{"url": receiver.url, "secret": receiver.secret, "events": ["call.reminded", "call.escalated"]}]
        with runsgate_processes(
            [workdir / "a.log", workdir / "b.log"],
            **shared_store_env(request, shared_store_kind, workdir),
            RUNSGATE_AGENTS="tests.instances.agents:AGENTS",
            RUNSGATE_GRAPHIQL="false",
            RUNSGATE_TEST_SIDE_EFFECTS=str(workdir / "side-effects.log"),
            RUNSGATE_TOOL_RULES=json.dumps([RULE]),
            RUNSGATE_SMTP_URL=f"smtp://127.0.0.1:{port}",
            RUNSGATE_LINK_SECRET="a-link-secret-of-at-least-32-bytes-0123456789",
            RUNSGATE_RECIPIENTS=json.dumps(OPS),
            RUNSGATE_WEBHOOKS=json.dumps(hooks),
            RUNSGATE_WEBHOOK_POLL_INTERVAL="0.05",
            RUNSGATE_SUBSCRIPTION_LOOKBACK="1",
            RUNSGATE_PUBLIC_URL="https://runs.example.com",
        ) as (a, b):
            yield a, b, receiver, inbox


@pytest.fixture
async def clients(servers: tuple[str, str, Receiver, Inbox]) -> AsyncIterator[tuple[GraphQLClient, GraphQLClient]]:
    async with GraphQLClient.at(servers[0]) as a, GraphQLClient.at(servers[1]) as b:
        yield a, b


async def test_each_question_is_reminded_and_escalated_once_across_two_instances(
    servers: tuple[str, str, Receiver, Inbox], clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    # given runs waiting on both instances, two questions each
    tok = token()
    started = [await start_run(clients[i % 2], tok, calls=2) for i in range(RUNS)]
    calls = {(o["run"]["runId"], c["toolCallId"]) for o in started for c in o["run"]["toolCalls"]}

    # when both instances run past the escalation
    async with asyncio.timeout(WAIT):
        while True:
            events = [e for o in started for e in await run_events(clients[0], o["run"]["runId"])]
            if sum(e["type"] == "escalated" for e in events) >= len(calls):
                break
            await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # time for a second recording, were there one
    events = [e for o in started for e in await run_events(clients[1], o["run"]["runId"])]

    # then each question was reminded once and escalated once
    for kind in ("reminded", "escalated"):
        noticed = [(e["runId"], e["data"]["toolCallId"]) for e in events if e["type"] == kind]
        assert sorted(noticed) == sorted(calls), kind
    # and a receiver got one event id per question and notice
    receiver = servers[2]
    await asyncio.to_thread(
        receiver.wait_for, lambda r: len({x.payload["data"]["eventId"] for x in r.received}) >= 2 * len(calls)
    )
    sent = {(x.payload["type"], x.payload["data"]["eventId"]) for x in receiver.received}
    assert len(sent) == 2 * len(calls)


async def test_each_recipient_gets_one_email_per_moment_across_two_instances(
    servers: tuple[str, str, Receiver, Inbox], clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    # given runs waiting on both instances, two questions each, their rule telling ops
    tok = token()
    started = [await start_run(clients[i % 2], tok, calls=2) for i in range(RUNS)]
    run_ids = {o["run"]["runId"] for o in started}
    inbox = servers[3]

    def about(subject: str) -> list[str]:
        return [
            m["Subject"]
            for m in inbox.to("ops@example.com")
            if subject in m["Subject"] and any(r in m["Subject"] for r in run_ids)
        ]

    # when both instances run past the escalation, and a little longer
    async with asyncio.timeout(WAIT):
        while len(about("Escalated")) < 2 * RUNS:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # time for a second email, were there one

    # then ops got one email per question and moment
    assert len(about("Waiting for you")) == 2 * RUNS
    assert len(about("Escalated")) == 2 * RUNS
