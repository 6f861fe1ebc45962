"""Following one run's updates on any instance: what ``runUpdates`` streams (docs/architecture.md
"Run updates").

A subscriber gets the updates of the run's current continuation (or after ``after``), in id order
and without repeats, up to the first outcome, from this process's ``UpdateHub``, the store's
update batches (polled every ``poll_interval`` seconds) and the event log (docs/architecture.md "Run updates"). What
a stream holds is bounded in bytes, and its principal's streams' together
(``runtime.subscription_budgets``): stored batches are read a replay page at a time, and the
updates sent at the principal's pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, cast

from storage import EventDocument, SnapshotDocument, rules

from ..access import Principal
from ..errors import RunNotFoundError
from ..events.feed import EventFeed
from ..events.journal import event_id_floor
from ..subscription_budgets import OwnerBudget
from .listener import Listener, RunUpdatesOverflowError
from .run_updates import MAX_BATCH_BYTES, RunUpdate, before_next, capped, decode, end_id, update_id

if TYPE_CHECKING:
    from ..lifecycle import RunManager

_WATCHED = frozenset({"resumed", "suspended", "completed", "failed"})
"""The event types that begin and end continuations."""


class RunUpdateFeed:
    """``runUpdates``: one run's updates, from this process, the store and the event log.

    Args:
        runs: This process's ``RunManager`` (its store, agents and ``UpdateHub``).
        events: This process's ``EventFeed`` (continuations' beginnings and outcomes).
        poll_interval: Seconds between two reads of the run's update batches while no
            continuation of it runs on this process.
        max_buffer_bytes: Bytes of live updates one stream may hold waiting to be sent. A
            subscriber that falls further behind (or past its owner's ``queued_bytes``) stops
            receiving live updates and reads the rest from the store, a page at a time, as it
            reads.

    Stored batches are read a page at a time, each page at most its owner's replay page (a
    batch at least, of at most ``MAX_BATCH_BYTES``), as the event feed's replays
    (``EventFeed.budgets``, shared with it).
    """

    def __init__(
        self,
        runs: RunManager,
        events: EventFeed,
        *,
        poll_interval: float = 0.25,
        max_buffer_bytes: int = 1024 * 1024,
    ) -> None:
        if poll_interval <= 0 or max_buffer_bytes < 1:
            raise ValueError("poll_interval must be > 0 and max_buffer_bytes >= 1")
        self._runs = runs
        self._events = events
        self._poll_interval = poll_interval
        self._max_bytes = max_buffer_bytes

    async def subscribe(
        self, agent_id: str, run_id: str, *, after: str | None = None, principal: Principal | None = None
    ) -> AsyncGenerator[RunUpdate, None]:
        """Yield the run's updates (module docstring), then end after the first outcome.

        Args:
            after: An update id (``run_updates.UPDATE_ID``): start after it.
            principal: Who subscribes: a run outside its resources is ``RunNotFoundError``, as a
                missing one (``None``: trusted in-process code).

        Raises:
            AgentNotFoundError: No agent ``agent_id``.
            RunNotFoundError: No such run of the agent (stored, or in the event log), or one the
                principal may not see.
            EventFeedClosedError: The server is shutting down.
            StoreUnavailableError: The store failed.
        """
        self._runs.agents.get_agent(agent_id)
        hub, store = self._runs.updates, self._runs.store
        owner = None if principal is None else principal.identity
        budgets = self._events.budgets
        budget = budgets.hold(owner)
        listener = hub.listen(agent_id, run_id, max_bytes=self._max_bytes, budget=budget)
        mark = event_id_floor(time.time_ns())
        watcher: asyncio.Task[None] | None = None
        try:
            doc = await store.get(agent_id, run_id)
            log = sorted(await store.list_events(agent_id, run_id), key=lambda e: e["_id"])
            if not _visible(doc, log, principal):
                raise RunNotFoundError(agent_id, run_id)
            start = after if after is not None else _start(doc, log)
            stored = doc is not None
            logged = [] if start is None else [u for u in _from_log(log, agent_id, run_id) if u.id > start]
            del doc, log  # the run's events are not held while its updates are sent
            if start is None:  # finished without ever being continued: nothing to show
                return
            follow = _Follow(agent_id=agent_id, run_id=run_id, position=start)
            replay = _merged(self._stored(agent_id, run_id, start, budget), logged)
            async for update in replay:
                await budget.pace()  # the owner's rate, and the loop's turn
                yield await self._completed(follow.take(update))
                if update.is_outcome:
                    return
            if not stored:  # the run is gone: nothing follows what the log and the store hold
                return
            watcher = asyncio.get_running_loop().create_task(
                self._watch(agent_id, run_id, mark, listener, principal), name=f"runsgate-run-updates-{run_id}"
            )
            async for update in self._live(follow, listener, budget):
                await budget.pace()
                yield await self._completed(update)
                if update.is_outcome:
                    return
        finally:
            hub.leave(agent_id, run_id, listener)
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            budgets.release(owner, budget)

    async def _live(self, follow: _Follow, listener: Listener, budget: OwnerBudget) -> AsyncIterator[RunUpdate]:
        """The updates after ``follow.position``, as they come, up to the first outcome."""
        hub = self._runs.updates
        loop = asyncio.get_running_loop()
        next_poll = loop.time()
        detached = False  # fell behind its buffer: reads the store, even while the run continues here

        def local() -> bool:
            return not detached and hub.is_local(follow.agent_id, follow.run_id)

        while True:
            wait = None if local() else max(0.0, next_poll - loop.time())
            item: Any = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    try:
                        item = await listener.get_item()
                    except RunUpdatesOverflowError:
                        detached = True
            if isinstance(item, RunUpdate):
                if follow.wants(item):
                    yield follow.take(item)
                    if item.is_outcome:
                        return
            elif isinstance(item, BaseException):
                raise item
            elif isinstance(item, dict):  # an event: a continuation began or ended
                async for update in self._from_event(follow, cast(EventDocument, item), budget):
                    yield update
                    if update.is_outcome:
                        return
            if not local() and loop.time() >= next_poll:
                async for update in self._stored(follow.agent_id, follow.run_id, follow.position, budget):
                    yield follow.take(update)
                    if update.is_outcome:
                        return
                next_poll = loop.time() + self._poll_interval

    async def _from_event(self, follow: _Follow, event: EventDocument, budget: OwnerBudget) -> AsyncIterator[RunUpdate]:
        """What ``event`` (``resumed`` or an outcome, from the event log) adds after ``follow``: an
        outcome first brings the continuation's batches still unread, so none is left behind."""
        if event["type"] == "resumed":
            update = _resumed(event, follow.agent_id, follow.run_id)
            if follow.wants(update):
                yield follow.take(update)
            return
        current = follow.continuation
        if current is None or event["_id"] < current:
            return  # the outcome of a continuation this stream does not follow
        async for update in self._stored(follow.agent_id, follow.run_id, follow.position, budget):
            yield follow.take(update)
            if update.is_outcome:
                return
        update = _outcome(event, current, follow.agent_id, follow.run_id)
        if follow.wants(update):
            yield follow.take(update)

    async def _watch(
        self, agent_id: str, run_id: str, mark: str, listener: Listener, principal: Principal | None
    ) -> None:
        """Hand the run's ``resumed`` and outcome events after ``mark`` to ``listener``."""
        stream = self._events.subscribe(
            agent_id,
            after_event_id=mark,
            accept=lambda e: e["runId"] == run_id and e["type"] in _WATCHED,
            resource_ids=None if principal is None else principal.resources,
            owner=None if principal is None else principal.identity,
        )
        try:
            async for event in stream:
                listener.signal(event)
        except Exception as exc:  # the feed closed, fell behind or the store failed: the stream ends so
            listener.signal(exc)
        finally:
            await stream.aclose()

    async def _stored(self, agent_id: str, run_id: str, after: str, budget: OwnerBudget) -> AsyncIterator[RunUpdate]:
        """The stored updates after ``after``, in id order: a page of batches at a time, of at
        most the owner's page bytes (one batch at least), each batch held until its last update
        was taken."""
        cursor: str | None = after
        while cursor is not None:
            reserved = budget.start_page()
            limit = max(1, reserved // MAX_BATCH_BYTES)
            try:
                page = await self._runs.store.list_run_updates(agent_id, run_id, after=cursor, limit=limit)
            except BaseException:
                budget.release(reserved)
                raise
            pending = deque((batch, len(batch["updates"])) for batch in page)
            budget.settle_page(reserved, sum(size for _, size in pending))
            cursor = page[-1]["_id"] if len(page) == limit else None
            del page
            try:
                while pending:
                    batch, size = pending[0]
                    for update in decode(batch["updates"], agent_id=agent_id, run_id=run_id):
                        if update.id > after:
                            yield update
                    pending.popleft()
                    budget.release(size)
            finally:
                budget.release(sum(size for _, size in pending))

    async def _completed(self, update: RunUpdate) -> RunUpdate:
        """``update`` with the stored run, for ``suspended`` and ``failed`` (read now)."""
        if update.kind in ("suspended", "failed") and update.run is None:
            run = await self._runs.store.get(update.agent_id, update.run_id)
            return dataclasses.replace(update, run=run)
        return update


@dataclasses.dataclass
class _Follow:
    """Where a stream stands: it sends only updates after ``position``, in order."""

    agent_id: str
    run_id: str
    position: str
    continuation: str | None = None
    """The continuation of the last update sent."""

    def wants(self, update: RunUpdate) -> bool:
        return update.id > self.position

    def take(self, update: RunUpdate) -> RunUpdate:
        self.position = update.id
        self.continuation = update.continuation_id
        return update


def _visible(doc: SnapshotDocument | None, log: list[EventDocument], principal: Principal | None) -> bool:
    if doc is None and not log:
        return False
    if principal is None:
        return True
    if doc is not None:
        return principal.may_use_resource(doc["resourceId"])
    return any(principal.may_use_resource(e.get("resourceId")) for e in log)


def _start(doc: SnapshotDocument | None, log: list[EventDocument]) -> str | None:
    """Where a stream without ``after`` starts (module docstring); ``None``: nothing to show."""
    last = max((e["_id"] for e in log if e["type"] == "resumed"), default=None)
    if doc is None:
        return last
    if last is None:
        return ""
    if rules.matches(rules.queued(), doc):
        return before_next(last)  # the next continuation
    return last


def _resumed(event: EventDocument, agent_id: str, run_id: str) -> RunUpdate:
    return RunUpdate(
        id=update_id(event["_id"], 0),
        agent_id=agent_id,
        run_id=run_id,
        continuation_id=event["_id"],
        kind="resumed",
        at=event["at"],
    )


def _outcome(event: EventDocument, continuation: str, agent_id: str, run_id: str) -> RunUpdate:
    data = event["data"]
    fields: dict[str, Any] = {}
    if event["type"] == "completed":
        fields["output"] = data.get("output")
    elif event["type"] == "failed":
        fields["error"] = f"{data.get('type')}: {data.get('message')}"
    return capped(
        RunUpdate(
            id=end_id(continuation),
            agent_id=agent_id,
            run_id=run_id,
            continuation_id=continuation,
            kind=event["type"],  # type: ignore[arg-type]
            at=event["at"],
            **fields,
        )
    )


def _from_log(log: list[EventDocument], agent_id: str, run_id: str) -> list[RunUpdate]:
    """The beginnings and outcomes of the run's continuations, from its events (in id order)."""
    updates: list[RunUpdate] = []
    current: str | None = None
    for event in log:
        if event["type"] == "resumed":
            current = event["_id"]
            updates.append(_resumed(event, agent_id, run_id))
        elif event["type"] in _WATCHED and current is not None:
            updates.append(_outcome(event, current, agent_id, run_id))
            current = None
    return updates


async def _merged(stored: AsyncIterator[RunUpdate], logged: Iterable[RunUpdate]) -> AsyncIterator[RunUpdate]:
    """``stored`` and ``logged`` (each in id order) in id order, the stored one of two with one id."""
    pending = list(logged)
    async for update in stored:
        while pending and pending[0].id < update.id:
            yield pending.pop(0)
        if pending and pending[0].id == update.id:
            pending.pop(0)
        yield update
    for update in pending:
        yield update


__all__ = ["RunUpdateFeed"]
