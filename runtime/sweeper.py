"""Taking over runs nobody is continuing (docs/architecture.md "The sweeper").

``StalledRunSweeper`` runs on every instance: every ``interval`` seconds it continues the runs
``list_stalled_runs`` finds (a claim nobody renews, or every call decided and nobody claimed),
racing other sweepers on the claim, and applies deadlines (``list_expired_runs``,
``RunManager.expire``). Each sweep also prunes old ``runUpdates`` batches (``prune_run_updates``)
expired idempotency keys (``delete_expired_idempotency_keys``), webhook deliveries done
(``delete_expired_webhook_deliveries``) and the events of runs finished a retention period ago
(``_event_retention``). Failed runs wait for ``retryRun``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any

from storage import SnapshotDocument, StoreUnavailableError

from ._cancel import stop_if_cancelled
from .errors import AgentNotFoundError
from .events.retention import sweep_event_retention
from .lifecycle import RunManager
from .outcome import RunOutcome

logger = logging.getLogger(__name__)

PRUNE_BATCH = 1000
"""Run update batches, idempotency keys and webhook deliveries one sweep deletes at most (each)."""


class StalledRunSweeper:
    """Finds stalled runs and continues them on this instance.

    Args:
        manager: The instance's ``RunManager`` (its store, agents, claim time to live, clock).
        interval: Seconds between two sweeps.
        idle_grace: Seconds a run whose every call is decided may stay unclaimed before it is
            taken over (leave the deciding instance time to claim it). Default: the claim's
            time to live.
        batch: Runs looked at per sweep.
        max_active: Runs this instance continues at once for the sweeper; more wait for a
            later sweep.
        update_retention: Seconds a run update batch is kept (config
            ``RUNSGATE_RUN_UPDATES_RETENTION``); ``None``: never pruned here.
        key_retention: Seconds an idempotency key is kept after its answer (config
            ``RUNSGATE_IDEMPOTENCY_KEY_RETENTION``); ``None``: never deleted here.
        delivery_retention: Seconds a delivered or failed webhook delivery is kept (config
            ``RUNSGATE_WEBHOOK_DELIVERY_RETENTION``); ``None``: never deleted here.
        event_retention: Seconds a finished run's events are kept (config
            ``RUNSGATE_EVENT_RETENTION``); ``None``: never deleted here.
    """

    def __init__(
        self,
        manager: RunManager,
        *,
        interval: float,
        idle_grace: float | None = None,
        batch: int = 50,
        max_active: int = 8,
        update_retention: float | None = None,
        key_retention: float | None = None,
        delivery_retention: float | None = None,
        event_retention: float | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive (seconds)")
        self._manager = manager
        self._interval = interval
        self._idle_grace = manager.claim_ttl if idle_grace is None else idle_grace
        self._batch = batch
        self._max_active = max_active
        self._update_retention = update_retention
        self._key_retention = key_retention
        self._delivery_retention = delivery_retention
        self._event_retention = event_retention
        self._active: dict[str, asyncio.Task[RunOutcome | None]] = {}

    async def find(self) -> list[SnapshotDocument]:
        """The stalled runs now, least recently updated first, after completing the events a dead
        process left inside snapshots older than the grace period (``complete_pending_events``)
        and deleting what outlived its retention (run updates, idempotency keys, webhook
        deliveries done, finished runs' events; a batch each).
        Raises ``StoreUnavailableError``."""
        now = self._manager.now()
        store = self._manager.store
        await store.complete_pending_events(before=now - timedelta(seconds=self._idle_grace), limit=self._batch)
        if self._update_retention is not None:
            await store.prune_run_updates(before=now - timedelta(seconds=self._update_retention), limit=PRUNE_BATCH)
        if self._key_retention is not None:
            before = now - timedelta(seconds=self._key_retention)
            await store.delete_expired_idempotency_keys(before=before, limit=PRUNE_BATCH)
        if self._delivery_retention is not None:
            before = now - timedelta(seconds=self._delivery_retention)
            await store.delete_expired_webhook_deliveries(before=before, limit=PRUNE_BATCH)
        if self._event_retention is not None:
            await sweep_event_retention(store, now=now, retention=self._event_retention)
        return await store.list_stalled_runs(
            now=now, idle_before=now - timedelta(seconds=self._idle_grace), limit=self._batch
        )

    async def find_expired(self) -> list[SnapshotDocument]:
        """The runs with a call whose deadline passed, earliest deadline first (at most ``batch``).
        Raises ``StoreUnavailableError``."""
        return await self._manager.store.list_expired_runs(now=self._manager.now(), limit=self._batch)

    def _start(
        self,
        docs: list[SnapshotDocument],
        work: Callable[[SnapshotDocument], Coroutine[Any, Any, RunOutcome | None]] | None = None,
        kind: str = "takeover",
    ) -> list[asyncio.Task[RunOutcome | None]]:
        work = work or self._take_over
        started = []
        for doc in docs:
            if doc["_id"] in self._active or len(self._active) >= self._max_active:
                continue
            task = asyncio.create_task(work(doc), name=f"runsgate-{kind}-{doc['_id']}")
            self._active[doc["_id"]] = task
            task.add_done_callback(functools.partial(self._done, doc["_id"]))
            started.append(task)
        return started

    def _done(self, run_id: str, _: asyncio.Task[RunOutcome | None]) -> None:
        self._active.pop(run_id, None)

    async def _take_over(self, doc: SnapshotDocument) -> RunOutcome | None:
        outcome = await _logged(self._manager.take_over, doc, "stalled", "taking over")
        if outcome is not None:
            logger.info("took over run %s of agent %s: %s", doc["_id"], doc["agentId"], outcome.status)
        return outcome

    async def _expire(self, doc: SnapshotDocument) -> RunOutcome | None:
        return await _logged(self._manager.expire, doc, "expired", "applying the deadline of")

    def _start_all(
        self, stalled: list[SnapshotDocument], expired: list[SnapshotDocument]
    ) -> list[asyncio.Task[RunOutcome | None]]:
        return self._start(stalled) + self._start(expired, self._expire, "expiry")

    async def sweep_once(self) -> list[RunOutcome]:
        """One sweep (stalled runs, then deadlines), waiting until every run it took over or
        expired is done (tests, tools).

        Returns:
            The outcome of each run this call continued (``resuming`` when another instance
            claimed it first) or recorded a fallback on (``suspended`` while other calls wait).

        Raises:
            StoreUnavailableError: The store could not be asked.
        """
        outcomes = await asyncio.gather(*self._start_all(await self.find(), await self.find_expired()))
        return [outcome for outcome in outcomes if outcome is not None]

    async def run_forever(self) -> None:
        """Sweep every ``interval`` seconds until cancelled; store errors are logged, not raised.

        Cancelling also cancels the continuations it started: their claims expire and another
        instance takes them over (the tool may then run twice: at least once across a crash).
        """
        try:
            while True:
                await asyncio.sleep(self._interval)
                try:
                    self._start_all(await self.find(), await self.find_expired())
                except StoreUnavailableError as exc:
                    logger.warning("sweep skipped: %s", exc)
                except Exception:
                    logger.exception("sweep failed")
                stop_if_cancelled()  # the server's shutdown awaits this task (runtime/_cancel.py)
        finally:
            for task in list(self._active.values()):
                task.cancel()
            if self._active:
                await asyncio.wait(list(self._active.values()))


async def _logged(
    action: Callable[[SnapshotDocument], Awaitable[RunOutcome | None]], doc: SnapshotDocument, kind: str, doing: str
) -> RunOutcome | None:
    """``action(doc)``, or ``None`` when it raised: a run of an agent not registered here is left to
    an instance that has it (a warning naming the ``kind`` of run), any other error is logged with
    its traceback (``"{doing} run ... failed"``)."""
    try:
        return await action(doc)
    except AgentNotFoundError:
        logger.warning("%s run %s belongs to agent %s, not registered here", kind, doc["_id"], doc["agentId"])
    except Exception:
        logger.exception("%s run %s failed", doing, doc["_id"])
    return None


__all__ = ["StalledRunSweeper"]
