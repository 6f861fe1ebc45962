"""``RUNSGATE_IDEMPOTENCY_KEY_RETENTION`` over HTTP (docs/guarantees.md "Idempotency keys"): the
server's sweeper deletes a key that long after its answer, and a repeat is then a new request.
On the memory, SQLite and MongoDB stores, with a short period and the sweeper running often."""

from __future__ import annotations

import asyncio
import time

from runtime.demo import LEDGER

from .._graphql import REFUND
from .._processes import scaled
from .conftest import Serve

RETENTION = 2.0
"""Seconds, short enough for a test; the default is 86400."""


async def test_a_repeat_answers_the_first_result_until_the_key_expires_then_is_a_new_request(serve: Serve) -> None:
    LEDGER.clear()
    served = await serve(sweep_interval=0.05, idempotency_key_retention=RETENTION)
    gql = served.client()
    run = await gql.suspend(REFUND, "Please refund order 1042")
    call_id = run["toolCalls"][0]["toolCallId"]
    answered = time.monotonic()  # no later than the key's answer: its period starts after this
    first = await gql.approve(REFUND, run["runId"], call_id, idempotencyKey="a-1")
    assert first["status"] == "COMPLETED", first

    # a repeat just after the answer replays it
    again = await gql.approve(REFUND, run["runId"], call_id, idempotencyKey="a-1")
    if time.monotonic() - answered < RETENTION:  # else the machine was too slow to tell
        assert again == first

    # and once the period passed and the sweeper ran, the repeat is checked again as new
    deadline = time.monotonic() + RETENTION + scaled(30)
    while True:
        await asyncio.sleep(0.1)
        repeat = await gql.approve(REFUND, run["runId"], call_id, idempotencyKey="a-1")
        if repeat != first or time.monotonic() > deadline:
            break
    assert repeat["__typename"] == "ToolCallAlreadyDecided", repeat
    assert time.monotonic() - answered >= RETENTION
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
