"""``runtime.continuing.claims.renewing``: a lease renewed while its body runs, with no task of its
own until a renewal is due."""

from __future__ import annotations

import asyncio
import logging

import pytest

from runtime.continuing.claims import renewing


async def test_a_body_shorter_than_the_period_starts_no_task() -> None:
    # given a lease renewed every minute
    renewals: list[None] = []

    async def renew() -> bool:
        renewals.append(None)
        return True

    before = asyncio.all_tasks()

    # when a body runs far shorter than the period
    async with renewing(renew, every=60.0, lease="test lease"):
        during = asyncio.all_tasks()

    # then no task was started for the lease, and it was never renewed
    assert during == before
    assert renewals == []


async def test_the_lease_is_renewed_every_period_until_the_body_ends() -> None:
    # given a lease renewed every 10 ms
    renewed = asyncio.Event()
    count = 0

    async def renew() -> bool:
        nonlocal count
        count += 1
        if count == 3:
            renewed.set()
        return True

    # when the body waits for three renewals
    async with renewing(renew, every=0.01, lease="test lease"):
        await asyncio.wait_for(renewed.wait(), timeout=60)
        seen = count

    # then none follows the body's end
    await asyncio.sleep(0.05)
    assert seen == 3
    assert count == seen


async def test_a_failed_renewal_is_retried_and_a_lost_lease_stops_them(caplog: pytest.LogCaptureFixture) -> None:
    # given a store that fails once, then answers that the lease was taken over
    answers: list[bool | Exception] = [OSError("store down"), False]
    done = asyncio.Event()
    calls = 0

    async def renew() -> bool:
        nonlocal calls
        calls += 1
        answer = answers.pop(0) if answers else True
        if not answers:
            done.set()
        if isinstance(answer, Exception):
            raise answer
        return answer

    # when the body outlives both answers
    with caplog.at_level(logging.WARNING, logger="runtime.continuing.claims"):
        async with renewing(renew, every=0.01, lease="test lease"):
            await asyncio.wait_for(done.wait(), timeout=60)
            await asyncio.sleep(0.05)

    # then the failure was logged and retried, and the lost lease stopped the renewals
    assert calls == 2
    messages = [record.getMessage() for record in caplog.records]
    assert "renewing test lease failed" in messages
    assert "test lease was taken over while held" in messages


async def test_the_body_ending_cancels_a_renewal_in_flight() -> None:
    # given a renewal that never answers
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def renew() -> bool:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return True

    # when the body ends while it is in flight
    async with renewing(renew, every=0.01, lease="test lease"):
        await asyncio.wait_for(started.wait(), timeout=60)

    # then it was cancelled and awaited before the context ended
    assert cancelled.is_set()
