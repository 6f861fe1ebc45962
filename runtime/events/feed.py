"""The live feed of the event log: what subscriptions stream (docs/architecture.md "Events").

``EventFeed`` polls ``EventLog.list_events_after`` every ``poll_interval`` seconds, one poller per
agent (and one for every agent's events) in this process shared by its subscribers, and re-reads
the last ``lookback`` seconds of ids on each poll, skipping those already delivered; delivery is at least once across
reconnections (``after_event_id``). What a subscriber holds is bounded in bytes: its replay's
pages and its live queue, and its owner's together (``runtime.subscription_budgets``). Why:
docs/architecture.md "Events".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import cast

from storage import EventDocument, EventLog, StoreUnavailableError, event_size
from storage.protocol import EventsAfter

from .._cancel import stop_if_cancelled
from ..subscription_budgets import REPLAY_PAGE_BYTES, OwnerBudget, SubscriptionBudgets
from .journal import event_id_floor

logger = logging.getLogger(__name__)

EventPredicate = Callable[[EventDocument], bool]
"""Which events a subscriber wants (its filter and what it may see)."""

MAX_QUEUED_BYTES = 8 << 20
"""Bytes of events one subscriber may have waiting (8 MiB): with ``max_queued``, what a client that
stops reading can make the server hold for it."""


class EventFeedOverflowError(Exception):
    """A subscriber fell more than ``max_queued`` events, or ``max_queued_bytes`` of them, behind
    and was dropped; resume it with ``after_event_id`` set to the last event it received."""


class EventFeedClosedError(Exception):
    """The feed was closed (the server is shutting down)."""


_CLOSED = object()
_OVERFLOW = object()


@dataclass(eq=False)
class _Subscriber:
    start: str
    """Only events whose id sorts after this."""
    accept: EventPredicate
    max_queued: int
    max_queued_bytes: int
    budget: OwnerBudget
    """Its owner's (``runtime.subscription_budgets``): the owner's queues share its ``queued_bytes``."""
    queue: asyncio.Queue[tuple[EventDocument, int] | object] = field(default_factory=asyncio.Queue)
    queued_bytes: int = 0
    """``event_size`` of the events waiting in ``queue``."""
    dropped: bool = False

    def offer(self, event: EventDocument, size: int) -> bool:
        """Queue the event if wanted; ``False`` when the subscriber is too far behind (dropped):
        ``max_queued`` events wait already, or this one would make more than ``max_queued_bytes``
        wait (a single event is queued whatever its size), or more than its owner's
        ``queued_bytes`` wait for all the owner's subscribers."""
        if event["_id"] <= self.start or not self.accept(event):
            return True
        waiting = self.queue.qsize()
        if (
            waiting >= self.max_queued
            or (waiting and self.queued_bytes + size > self.max_queued_bytes)
            or not self.budget.try_queue(size)
        ):
            self.dropped = True
            self.queue.put_nowait(_OVERFLOW)
            return False
        self.queued_bytes += size
        self.queue.put_nowait((event, size))
        return True

    def take(self, size: int) -> None:
        """An event of ``size`` bytes left the queue."""
        self.queued_bytes -= size
        self.budget.dequeue(size)


@dataclass(eq=False)
class _Poller:
    agent_id: str | None
    """``None``: every agent's events (``reviewQueueEvents``)."""
    cursor: str
    """Every event with an id up to here was read (or is older than the lookback when it appears)."""
    subscribers: set[_Subscriber] = field(default_factory=set)
    recent: set[str] = field(default_factory=set)
    """Ids after ``cursor`` already delivered (re-read by the lookback, not delivered twice)."""
    task: asyncio.Task[None] | None = None


class EventFeed:
    """Per-process fan-out of each agent's event log to its subscribers.

    Args:
        store: The event log (the store's ``EventLog`` part).
        poll_interval: Seconds between two reads of an agent's log while it has subscribers.
        lookback: Seconds of ids each read goes back to catch events that became visible late.
        page_size: Events per store query (a poll reads pages until a short one).
        max_queued: Events a subscriber may have waiting before it is dropped
            (``EventFeedOverflowError``).
        max_queued_bytes: Bytes of events (``event_size``) a subscriber may have waiting before
            it is dropped: a subscriber that does not read (its client does not) holds at most
            this much of the server's memory, however large the events.
        budgets: The owners' budgets (``runtime.subscription_budgets``): what one owner's
            replays and live queues hold together; default: no bound per owner (each replay
            page is at most ``REPLAY_PAGE_BYTES`` still).
        clock_ns: UTC nanoseconds since the epoch (the clock event ids are made from).
    """

    def __init__(
        self,
        store: EventLog,
        *,
        poll_interval: float = 1.0,
        lookback: float = 5.0,
        page_size: int = 500,
        max_queued: int = 10_000,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        budgets: SubscriptionBudgets | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if poll_interval <= 0 or lookback < 0 or page_size < 1 or max_queued < 1 or max_queued_bytes < 1:
            raise ValueError(
                "poll_interval must be > 0, lookback >= 0, page_size, max_queued and max_queued_bytes >= 1"
            )
        self._store = store
        self._poll_interval = poll_interval
        self._lookback_ns = int(lookback * 1e9)
        self._page_size = page_size
        self._max_queued = max_queued
        self._max_queued_bytes = max_queued_bytes
        self.budgets = budgets or SubscriptionBudgets()
        self._clock_ns = clock_ns
        self._pollers: dict[str | None, _Poller] = {}
        self._closed = False

    @property
    def polled_agents(self) -> dict[str | None, int]:
        """Agent id -> number of subscribers, for each agent whose log is being polled now
        (``None``: every agent's events, polled together)."""
        return {agent_id: len(p.subscribers) for agent_id, p in self._pollers.items()}

    async def subscribe(
        self,
        agent_id: str | None,
        *,
        after_event_id: str | None = None,
        accept: EventPredicate = lambda _: True,
        resource_ids: frozenset[str] | None = None,
        owner: str | None = None,
    ) -> AsyncGenerator[EventDocument, None]:
        """Yield ``agent_id``'s events (every agent's when ``None``) as they are appended, on any
        instance, forever.

        ``after_event_id`` (exclusive): the events after it are replayed from the store first, in
        ``_id`` order, in pages of at most ``REPLAY_PAGE_BYTES`` (less near ``owner``'s
        ``replay_bytes``), then the live ones follow without a gap; without it, only events whose id
        is made after this call. ``accept`` filters; ``resource_ids`` (``Principal.resources``)
        bounds the replay's read; ``owner`` (``Principal.identity``, ``None``: its own) names the
        budget held (docs/architecture.md "Events").

        Raises:
            EventFeedOverflowError: The subscriber fell ``max_queued`` events behind.
            EventFeedClosedError: The feed was closed.
            StoreUnavailableError: The store failed during the replay.
        """
        if self._closed:
            raise EventFeedClosedError("the event feed is closed")
        start = after_event_id if after_event_id is not None else event_id_floor(self._clock_ns())
        budget = self.budgets.hold(owner)
        subscriber = _Subscriber(
            start=start,
            accept=accept,
            max_queued=self._max_queued,
            max_queued_bytes=self._max_queued_bytes,
            budget=budget,
        )
        poller = self._poller(agent_id)
        poller.subscribers.add(subscriber)
        read_before = poller.cursor
        try:
            seen: set[str] = set()
            after = after_event_id
            while after is not None:
                reserved = budget.start_page()
                try:
                    page = await self._store.list_events_after(
                        EventsAfter(
                            agent_id=agent_id,
                            after_event_id=after,
                            limit=self._page_size,
                            resource_ids=resource_ids,
                            max_bytes=reserved,
                        )
                    )
                except BaseException:
                    budget.release(reserved)
                    raise
                pending = deque((event, event_size(event)) for event in page)
                budget.settle_page(reserved, sum(size for _, size in pending))
                after = page[-1]["_id"] if page else None  # a page stops at its bytes: read until one is empty
                del page  # an event is held by ``pending`` until it is taken, no longer
                try:
                    while pending:
                        event, size = pending[0]
                        if event["_id"] > read_before:
                            seen.add(event["_id"])  # the poller may deliver it too
                        if accept(event):
                            await budget.pace()  # the owner's rate, and the loop's turn: never a page at once
                            yield event
                        pending.popleft()
                        budget.release(size)
                finally:
                    budget.release(sum(size for _, size in pending))
            while True:
                item = await subscriber.queue.get()
                if item is _CLOSED:
                    raise EventFeedClosedError("the event feed is closed")
                if item is _OVERFLOW:
                    raise EventFeedOverflowError(
                        f"more than {self._max_queued} events or {self._max_queued_bytes} bytes of events waited "
                        "for this subscriber; resume after the last event received"
                    )
                event, size = cast(tuple[EventDocument, int], item)
                subscriber.take(size)
                if event["_id"] not in seen:
                    await budget.pace()  # a backlog neither (what waits past it fills the queue)
                    yield event
        finally:
            self._leave(poller, subscriber)
            subscriber.budget.dequeue(subscriber.queued_bytes)  # the events it left in its queue
            subscriber.queued_bytes = 0
            self.budgets.release(owner, budget)

    def _poller(self, agent_id: str | None) -> _Poller:
        poller = self._pollers.get(agent_id)
        if poller is None:
            poller = _Poller(agent_id=agent_id, cursor=event_id_floor(self._clock_ns() - self._lookback_ns))
            poller.task = asyncio.get_running_loop().create_task(
                self._run(poller), name=f"runsgate-event-feed-{'*' if agent_id is None else agent_id}"
            )
            self._pollers[agent_id] = poller
        return poller

    def _leave(self, poller: _Poller, subscriber: _Subscriber) -> None:
        poller.subscribers.discard(subscriber)
        if not poller.subscribers and self._pollers.get(poller.agent_id) is poller:
            del self._pollers[poller.agent_id]
            if poller.task is not None:
                poller.task.cancel()

    async def _run(self, poller: _Poller) -> None:
        while True:
            try:
                await self._poll(poller)
            except StoreUnavailableError as exc:
                logger.warning("event feed of agent %s: %s; retrying", poller.agent_id, exc)
            except Exception:
                logger.exception("event feed of agent %s failed to poll; retrying", poller.agent_id)
            stop_if_cancelled()  # close() awaits this task: a swallowed cancel must still end it
            await asyncio.sleep(self._poll_interval)

    async def _poll(self, poller: _Poller) -> None:
        """Read the log once from ``cursor`` and hand every new event to the subscribers."""
        now_ns = self._clock_ns()
        after: str | None = poller.cursor
        while after is not None:
            page = await self._store.list_events_after(
                EventsAfter(agent_id=poller.agent_id, after_event_id=after, limit=self._page_size)
            )
            for event in page:
                if event["_id"] in poller.recent:
                    continue
                poller.recent.add(event["_id"])
                size = event_size(event) if poller.subscribers else 0
                for subscriber in list(poller.subscribers):
                    try:
                        kept = subscriber.offer(event, size)
                    except Exception:
                        logger.exception("event feed of agent %s: a subscriber's filter failed", poller.agent_id)
                        continue
                    if not kept:
                        poller.subscribers.discard(subscriber)
            after = page[-1]["_id"] if len(page) == self._page_size else None
        poller.cursor = max(poller.cursor, event_id_floor(now_ns - self._lookback_ns))
        poller.recent = {i for i in poller.recent if i > poller.cursor}

    async def close(self) -> None:
        """Stop every poller and end every subscription (``EventFeedClosedError``)."""
        self._closed = True
        pollers = list(self._pollers.values())
        self._pollers.clear()
        for poller in pollers:
            for subscriber in poller.subscribers:
                subscriber.queue.put_nowait(_CLOSED)
            if poller.task is not None:
                poller.task.cancel()
        for poller in pollers:
            if poller.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await poller.task


__all__ = [
    "MAX_QUEUED_BYTES",
    "REPLAY_PAGE_BYTES",
    "EventFeed",
    "EventFeedClosedError",
    "EventFeedOverflowError",
    "EventPredicate",
    "event_size",
]
