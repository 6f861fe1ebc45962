"""The SQLite store's writer: one ``sqlite3`` connection on a thread of its own, where each write
runs whole as one function. A write is queued for the thread, which takes every write queued
when it is free into one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (one fsync; group commit, a write
that raises rolled back alone: docs/storage.md "SQLite"), then wakes the event loop once for the
whole transaction: a transaction costs one hand-off to the thread and one back.

Only the standard library runs here (``threading``, ``sqlite3``): aiosqlite, which the reader
connection uses, queues one statement per hand-off and has no public call for a function.
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
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


@dataclass(eq=False)
class _Call(Generic[T]):
    """A function run on the writer's thread outside any transaction (``Writer.call``)."""

    fn: Callable[[], T]
    done: asyncio.Future[T]
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
        self._thread: threading.Thread | None = None
        self._db: sqlite3.Connection | None = None
        self._queue: deque[_Write[Any] | _Call[Any] | None] = deque()
        """Work for the thread, in order; ``None`` tells it to stop once what is before it ran."""
        self._lock = threading.Condition()
        """Guards ``_queue`` and each ``_Write.state`` between the callers (queueing, withdrawing)
        and the thread (taking); the thread waits on it for work."""

    async def open(self, pragmas: list[str]) -> None:
        """Connect on a new thread and run ``pragmas`` (whole statements).

        Raises:
            sqlite3.Error: The file cannot be opened (the thread is stopped again).
        """
        self._thread = threading.Thread(target=self._serve, name="runsgate-sqlite-writer", daemon=True)
        self._thread.start()
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
        """Let the writes queued run, then close the connection and stop the thread (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        db = self._db
        if db is not None:
            with suppress(sqlite3.Error):
                await self._on_thread(db.close, thread=thread)
        self._db = None
        with self._lock:
            self._queue.append(None)
            self._lock.notify()

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the writer's thread, outside any transaction (opening, tests)."""
        db = self._db
        if db is None:
            raise RuntimeError("the SQLite writer is not open")
        return await self._on_thread(lambda: fn(db))

    async def _on_thread(self, fn: Callable[[], T], *, thread: threading.Thread | None = None) -> T:
        if (thread or self._thread) is None:
            raise RuntimeError("the SQLite writer is not open")
        item: _Call[T] = _Call(fn, asyncio.get_running_loop().create_future())
        with self._lock:
            self._queue.append(item)
            self._lock.notify()
        return await item.done

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
        if self._db is None or self._thread is None:
            raise RuntimeError("SQLiteSnapshotStore.open() was not called")
        loop = asyncio.get_running_loop()
        item: _Write[T] = _Write(body, contextvars.copy_context(), loop.create_future())
        with self._lock:
            self._queue.append(item)
            self._lock.notify()
        timer = loop.call_later(self._busy_timeout, self._expire, item)
        try:
            return await item.done
        except asyncio.CancelledError:
            self._withdraw(item)  # taken already: it completes or fails whole, its outcome unread
            raise
        finally:
            timer.cancel()

    def _expire(self, item: _Write[Any]) -> None:
        """On the caller's loop, ``busy_timeout`` after ``item`` was queued: fail it if no
        transaction has it yet; one that has it is bounded by SQLite's own busy timeout."""
        if not item.handed and self._withdraw(item) and not item.done.done():
            item.done.set_exception(
                StoreUnavailableError(
                    f"the SQLite database {self._path} stayed busy in this process for {self._busy_timeout} s"
                )
            )

    def _withdraw(self, item: _Write[Any]) -> bool:
        """Withdraw a write no transaction took yet; ``False`` when one did."""
        with self._lock:
            if item.state != "queued":
                return False
            item.state = "withdrawn"
            with suppress(ValueError):
                self._queue.remove(item)
        return True

    # -- on the writer's thread --------------------------------------------------------------------
    def _serve(self) -> None:
        """The thread: run the queued work in order, each run of queued writes in one
        transaction, until told to stop; each outcome is handed back to its caller's loop once
        per transaction (``_deliver``)."""
        while True:
            with self._lock:
                while not self._queue:
                    self._lock.wait()
                first = self._queue.popleft()
                if first is None:
                    return
                if isinstance(first, _Call):
                    work: _Call[Any] | list[_Write[Any]] = first
                else:
                    batch = [first]
                    while self._queue and isinstance(self._queue[0], _Write):
                        batch.append(self._queue.popleft())  # type: ignore[arg-type]
                    for item in batch:
                        item.handed = True
                    work = batch
            if isinstance(work, _Call):
                try:
                    work.result = work.fn()
                except BaseException as exc:
                    work.error = exc
                _hand_back([work])
            else:
                try:
                    self._run(work)
                except BaseException as exc:  # outside any write: every write of it fails
                    for item in work:
                        if item.error is None:
                            item.error = exc
                _hand_back(work)

    def _take(self, item: _Write[Any]) -> bool:
        with self._lock:
            if item.state != "queued":
                return False
            item.state = "running"
            return True

    def _run(self, batch: list[_Write[Any]]) -> None:
        """``BEGIN IMMEDIATE``, each write of ``batch`` still queued (in a savepoint of its own
        when there are several), then ``before_commit`` and ``COMMIT`` if any was kept. Outcomes
        go to each write's ``result`` or ``error``; a failed frame (``BEGIN``, ``COMMIT``) fails
        every write it took, none of which is then stored."""
        db = self._db
        if db is None:
            raise RuntimeError("the SQLite writer is closed")
        if not any(item.state == "queued" for item in batch):
            return
        alone = len(batch) == 1  # its own transaction is its rollback: no savepoint needed
        began = False
        kept: list[_Write[Any]] = []
        try:
            with _available(self._path):
                db.execute("BEGIN IMMEDIATE")  # waits for the file's write lock (busy timeout)
                began = True
                for item in batch:
                    if not self._take(item):
                        continue
                    if not alone:
                        db.execute("SAVEPOINT runsgate_write")
                    try:
                        with _available(self._path):
                            item.result = item.context.run(item.body, db)
                    except BaseException as exc:
                        item.error = exc
                        if not alone:
                            db.execute("ROLLBACK TO runsgate_write")
                    if not alone:
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


def _hand_back(items: list[_Write[Any]] | list[_Call[Any]]) -> None:
    """On the writer's thread: wake each caller's loop once for all of ``items``."""
    loops: dict[asyncio.AbstractEventLoop, list[Any]] = {}
    for item in items:
        loops.setdefault(item.done.get_loop(), []).append(item)
    for loop, mine in loops.items():
        with suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_deliver, mine)


def _deliver(items: list[Any]) -> None:
    """On the caller's loop: set each future from its outcome (a withdrawn write has none)."""
    for item in items:
        if getattr(item, "state", None) == "withdrawn" or item.done.done():
            continue
        if item.error is not None:
            item.done.set_exception(item.error)
        else:
            item.done.set_result(item.result)
