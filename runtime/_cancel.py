"""Stopping a background loop whose cancellation a library swallowed.

Python 3.11's ``asyncio.wait_for`` returns the awaited result, and drops the ``CancelledError``,
when the task is cancelled in the same step of the event loop as the awaited operation completes
(CPython gh-86296, fixed in 3.12 where ``wait_for`` is built on ``asyncio.timeout``). PyMongo's
async driver awaits the opening of a connection through ``wait_for`` (``connectTimeoutMS``), so a
loop cancelled while its store call opens a connection carries on as if never cancelled, and
whoever awaits it after ``cancel()`` (a subscription feed closing, a continuation ending its claim
renewal, the server's shutdown) waits forever. The cancel request is still counted on the task
(``Task.cancelling()``); each loop checks it after every store call.
"""

from __future__ import annotations

import asyncio


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` if the current task was asked to cancel and is still running.

    Raises:
        asyncio.CancelledError: ``Task.cancelling()`` is above 0 (a cancel that was delivered
            and swallowed by a callee; a cancel handled on purpose is ``uncancel()``-ed).
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
