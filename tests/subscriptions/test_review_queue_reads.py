"""``reviewQueueEvents`` reads an event's run once per instance, whatever its number of subscribers,
on the memory, SQLite and MongoDB stores (docs/api.md "The reviewers' queue, live").

The server is the real app over a store that records each ``get_many`` (the read of an event's run,
``tests/ecosystem/_counting_server.py``); three subscribers on one instance hear of one suspended
question, and the store was asked for its run once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import httpx
import pytest

from tests._servers import runsgate_process, store_variables

from .._auth import ADMIN, api_keys_json
from .._graphql import REFUND
from ..conftest import STORE_KINDS
from .test_review_queue_events import X, gql_of, marker, stream

COUNTING_SERVER = [sys.executable, "-m", "tests.ecosystem._counting_server"]


@pytest.fixture(scope="module", params=STORE_KINDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A secured counting runsgate process on the memory store, a SQLite file, then MongoDB."""
    folder = tmp_path_factory.mktemp(f"queue-reads-{request.param}")
    store = store_variables(request, folder)
    with runsgate_process(
        folder / "server.log",
        COUNTING_SERVER,
        RUNSGATE_AUTH="on",
        RUNSGATE_API_KEYS=api_keys_json(ADMIN, X),
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1",
        RUNSGATE_GRAPHIQL="false",
        **store,
    ) as url:
        yield url


def reads_of(server: str, run_id: str) -> int:
    """How many ``get_many`` calls the server's store answered that asked for ``run_id``."""
    calls: list[list[str]] = httpx.get(f"{server}/test/store-reads", timeout=10).json()["getMany"]
    return sum(run_id in call for call in calls)


async def test_three_subscribers_cost_one_read_of_the_event_run(server: str) -> None:
    async with gql_of(server, X) as gql:
        # given that starting a run that waits reads nothing back
        alone = await gql.suspend(REFUND, "Please refund order 1042", resourceId="customer-8")
        assert reads_of(server, alone["runId"]) == 0

        # when a refund waits while three subscribers of one instance follow the queue
        after = await marker(gql)
        async with (
            stream(server, X, afterEventId=after) as first,
            stream(server, X, afterEventId=after) as second,
            stream(server, X, afterEventId=after) as third,
        ):
            refund = await gql.suspend(REFUND, "Please refund order 1042", resourceId="customer-8")
            heard = [await subscriber.next() for subscriber in (first, second, third)]

    # then each heard of it, and its run was read once for all three
    assert [(m["runId"], m["change"]) for m in heard] == [(refund["runId"], "ENTERED")] * 3
    assert reads_of(server, refund["runId"]) == 1
