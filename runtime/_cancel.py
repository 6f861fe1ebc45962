"""The background loops' rounds (``in_rounds``), and stopping a loop whose cancellation a library swallowed.

Python 3.11's ``asyncio.wait_for`` drops the ``CancelledError`` when the task is cancelled in the
same step of the event loop as the awaited operation completes (CPython gh-86296, fixed in 3.12).
PyMongo's async driver opens connections through ``wait_for``, so a loop cancelled while its store
call opens one carries on as if never cancelled, and whoever awaits it after ``cancel()`` (a feed
closing, a claim renewal ending, the server's shutdown) waits forever. The cancel request is still
counted on the task (``Task.cancelling()``): each loop checks it after every store call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from storage import StoreUnavailableError


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` if the current task was asked to cancel and is still running.

    Raises:
        asyncio.CancelledError: ``Task.cancelling()`` is above 0 (a cancel that was delivered
            and swallowed by a callee; a cancel handled on purpose is ``uncancel()``-ed).
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def in_rounds(
    steps: Sequence[Callable[[], Awaitable[object]]], *, every: float, name: str, logger: logging.Logger
) -> None:
    """Run ``steps`` in order, then sleep ``every`` seconds, until cancelled. A step that raises
    does not stop the next: ``StoreUnavailableError`` is logged as a warning, any other exception
    with its traceback, each on ``logger`` and starting with ``name``; after each step the loop
    stops if its task was asked to cancel (``stop_if_cancelled``)."""
    while True:
        for step in steps:
            try:
                await step()
            except StoreUnavailableError as exc:
                logger.warning("%s: the store did not answer: %s", name, exc)
            except Exception:
                logger.exception("%s: a round failed", name)
            stop_if_cancelled()
        await asyncio.sleep(every)
