"""The SQLite store's writer: one ``sqlite3`` connection on a thread of its own, where each write
runs whole as one function, so a transaction costs one hop from the event loop and back, not one
per statement. Writes that queue while a transaction runs share the next one: one
``BEGIN IMMEDIATE`` ... ``COMMIT`` (one fsync), each write in a ``SAVEPOINT`` of its own, so a
write that raises is rolled back alone (group commit; docs/storage.md "SQLite").

Only the standard library runs here (``concurrent.futures``, ``sqlite3``): aiosqlite, which the
reader connection uses, queues one statement per hop and has no public call for a function.
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from ..protocol import StoreUnavailableError
from .file.schema import _available

T = TypeVar("T")


@dataclass(eq=False)
class _Write(Generic[T]):
    """One write waiting for, running in, or done with a transaction."""

    body: Callable[[sqlite3.Connection], T]
    context: contextvars.Context
    """The caller's context variables, which the body sees on the writer's thread."""
    done: asyncio.Future[T]
    state: Literal["queued", "running", "withdrawn"] = "queued"
    """``queued`` until a transaction takes it (``running``), or ``withdrawn`` by a caller that
    stopped waiting first: it then never runs."""
    handed: bool = False
    """Whether a transaction on the thread has it (running it, or waiting for the file's lock)."""
    result: Any = None
    error: BaseException | None = None


class Writer:
    """The writer connection of one file (``sqlite3.connect`` with ``isolation_level=None``) on
    one thread; ``write`` runs a function there inside a transaction.

    Args:
        path: The database file.
        busy_timeout: Seconds a write waits for a transaction of its own in this process, and
            SQLite's wait for the file's write lock (``sqlite3.connect(timeout=...)``).
        before_commit: Run on the writer's thread inside each transaction that stores a write,
            just before its ``COMMIT`` (``space.give_back``).
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float,
        before_commit: Callable[[sqlite3.Connection], object] | None = None,
    ) -> None:
        self._path = path
        self._busy_timeout = busy_timeout
        self._before_commit = before_commit
        self._executor: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None
        self._queue: list[_Write[Any]] = []
        self._states = threading.Lock()
        """Guards each ``_Write.state`` between the caller (withdrawing) and the thread (taking it)."""
        self._drainer: asyncio.Task[None] | None = None

    async def open(self, pragmas: list[str]) -> None:
        """Connect on a new thread and run ``pragmas`` (whole statements).

        Raises:
            sqlite3.Error: The file cannot be opened (the thread is stopped again).
        """
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="runsgate-sqlite-writer")
        try:
            self._db = await self._on_thread(
                lambda: sqlite3.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
            )
            for pragma in pragmas:
                await self.call(partial(_run_pragma, pragma))
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Let the transaction in progress end, then close the connection and stop the thread
        (idempotent)."""
        drainer = self._drainer
        if drainer is not None:
            await asyncio.wait([drainer])
        db, self._db = self._db, None
        if db is not None and self._executor is not None:
            with suppress(sqlite3.Error):
                await self._on_thread(db.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the writer's thread, outside the queue of writes (opening, tests)."""
        db = self._db
        if db is None:
            raise RuntimeError("the SQLite writer is not open")
        return await self._on_thread(lambda: fn(db))

    async def _on_thread(self, fn: Callable[[], T]) -> T:
        if self._executor is None:
            raise RuntimeError("the SQLite writer is not open")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body(connection)`` inside a transaction on the writer's thread, durable when this
        returns: committed when it returns, rolled back alone when it raises (the error is raised
        here). A write that has waited ``busy_timeout`` seconds behind this process's other
        writes is withdrawn (it never runs); then SQLite waits as long for the file's write lock.

        A caller cancelled before a transaction took its write withdraws it; one cancelled later
        leaves it to complete or fail as a whole.

        Raises:
            StoreUnavailableError: The write waited too long, or SQLite failed (locked, full,
                I/O, corrupt); nothing of it is stored.
        """
        if self._db is None:
            raise RuntimeError("SQLiteSnapshotStore.open() was not called")
        loop = asyncio.get_running_loop()
        item: _Write[T] = _Write(body, contextvars.copy_context(), loop.create_future())
        self._queue.append(item)
        if self._drainer is None:
            self._drainer = loop.create_task(self._drain())
        try:
            async with asyncio.timeout(self._busy_timeout):
                return await asyncio.shield(item.done)
        except TimeoutError:
            if not item.handed and self._withdraw(item):
                raise StoreUnavailableError(
                    f"the SQLite database {self._path} stayed busy in this process for {self._busy_timeout} s"
                ) from None
            return await item.done  # handed to the thread: SQLite's own busy timeout bounds the rest
        except asyncio.CancelledError:
            if not self._withdraw(item):
                item.done.add_done_callback(_retrieve)
            raise

    def _withdraw(self, item: _Write[Any]) -> bool:
        """Withdraw a write no transaction took yet; ``False`` when one did."""
        with self._states:
            if item.state != "queued":
                return False
            item.state = "withdrawn"
        with suppress(ValueError):
            self._queue.remove(item)
        return True

    async def _drain(self) -> None:
        """Run the queued writes, all of them in one transaction, until none is queued. Each
        outcome is delivered when its transaction ends, even if this task was cancelled."""
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                for item in batch:
                    item.handed = True
                try:
                    ran = loop.run_in_executor(self._executor, self._run, batch)
                except BaseException as exc:  # no thread to run it (closed): every write of it fails
                    _deliver(batch, failure=exc)
                    raise
                ran.add_done_callback(partial(_deliver, batch))
                await asyncio.shield(ran)
                await asyncio.sleep(0)  # let the callers just answered queue their next writes
        finally:
            self._drainer = None

    def _take(self, item: _Write[Any]) -> bool:
        with self._states:
            if item.state != "queued":
                return False
            item.state = "running"
            return True

    def _run(self, batch: list[_Write[Any]]) -> None:
        """On the writer's thread: ``BEGIN IMMEDIATE``, each write of ``batch`` still queued in a
        savepoint of its own, then ``before_commit`` and ``COMMIT`` if any was kept. Outcomes go
        to each write's ``result`` or ``error``; a failed frame (``BEGIN``, ``COMMIT``) fails every
        write it took, none of which is then stored."""
        db = self._db
        assert db is not None
        if not any(item.state == "queued" for item in batch):
            return
        began = False
        kept: list[_Write[Any]] = []
        try:
            with _available(self._path):
                db.execute("BEGIN IMMEDIATE")  # waits for the file's write lock (busy timeout)
                began = True
                for item in batch:
                    if not self._take(item):
                        continue
                    db.execute("SAVEPOINT runsgate_write")
                    try:
                        with _available(self._path):
                            item.result = item.context.run(item.body, db)
                    except BaseException as exc:
                        item.error = exc
                        db.execute("ROLLBACK TO runsgate_write")
                    db.execute("RELEASE runsgate_write")
                    if item.error is None:
                        kept.append(item)
                if kept:
                    if self._before_commit is not None:
                        self._before_commit(db)
                    db.execute("COMMIT")
                else:
                    db.execute("ROLLBACK")
        except BaseException as exc:
            if began:
                with suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            for item in batch:  # the ones taken and kept, and the ones never taken
                if item in kept or self._take(item):
                    item.error = exc


def _run_pragma(pragma: str, db: sqlite3.Connection) -> None:
    db.execute(pragma).fetchall()


def _deliver(
    batch: list[_Write[Any]], ran: asyncio.Future[None] | None = None, *, failure: BaseException | None = None
) -> None:
    """Set each write's future from the outcome its transaction left; ``failure`` (or the error
    ``ran``, the transaction's run, raised outside any write) for every write without one."""
    if failure is None and ran is not None and not ran.cancelled():
        failure = ran.exception()
    for item in batch:
        if item.state == "withdrawn" or item.done.done():
            continue
        if failure is not None and item.error is None:
            item.done.set_exception(failure)
        elif item.error is not None:
            item.done.set_exception(item.error)
        else:
            item.done.set_result(item.result)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark the outcome of a write whose caller was cancelled as read (no warning at exit)."""
    if not future.cancelled():
        future.exception()
