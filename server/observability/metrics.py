"""``GET /metrics``: Prometheus metrics in the text exposition format (prometheus_client).

Besides ``resolvers.metrics`` and the process collectors: ``runsgate_suspended_runs{agent_id}``
and ``runsgate_store_up``, measured at each scrape (one ``count_runs`` per registered agent); the
webhook counters ``runsgate_webhook_attempts_total{result}`` and
``runsgate_webhook_deliveries_total{outcome}``; and what subscriptions hold, read at each scrape:
``runsgate_websockets``, ``runsgate_websocket_operations``, ``runsgate_subscription_held_bytes``.
With ``PROMETHEUS_MULTIPROC_DIR`` (set for ``--workers``: ``workers_metrics_dir``) a scrape adds up
every worker (prometheus_client's multiprocess mode). Labels, cost: docs/operations.md "Metrics".
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from starlette.requests import Request
from starlette.responses import Response

from runtime import AgentRegistry
from runtime.webhooks.messages import AttemptResult, DeliveryOutcome
from storage import RunFilter, SnapshotStore, StoreUnavailableError

logger = logging.getLogger("runsgate.metrics")

# No ``*_created`` series: they double the output and Prometheus does not use them.
disable_created_metrics()  # type: ignore[no-untyped-call]

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable: the folder where each process writes its values (multiprocess mode);
read when prometheus_client is imported, so it is set before the ``--workers`` processes start."""

# multiprocess_mode: how a scrape in multiprocess mode joins the processes' values of a gauge (counters
# and histograms are added up); ignored in one process
SUSPENDED_RUNS = Gauge(
    "runsgate_suspended_runs",
    "Runs of the agent stored as waiting for input (suspendedRuns totalCount), counted at scrape time.",
    ["agent_id"],
    multiprocess_mode="mostrecent",
)
STORE_UP = Gauge(
    "runsgate_store_up", "1 when the store answered the last scrape's counts, else 0.", multiprocess_mode="mostrecent"
)
WORKER_PROCESSES = Gauge(
    "runsgate_worker_processes",
    "Processes serving this instance: 1, or the live processes of runsgate serve --workers N.",
    multiprocess_mode="livesum",
)
WEBHOOK_ATTEMPTS = Counter(
    "runsgate_webhook_attempts", "Webhook delivery attempts made by this instance, by how they ended.", ["result"]
)
WEBHOOK_DELIVERIES = Counter(
    "runsgate_webhook_deliveries",
    "Webhook delivery attempts by what they made of the delivery: delivered, retrying or failed.",
    ["outcome"],
)
WEBSOCKETS = Gauge(
    "runsgate_websockets", "WebSockets acknowledged and open on this instance.", multiprocess_mode="livesum"
)
WEBSOCKET_OPERATIONS = Gauge(
    "runsgate_websocket_operations",
    "Operations (subscriptions included) in flight over this instance's WebSockets.",
    multiprocess_mode="livesum",
)
SUBSCRIPTION_HELD_BYTES = Gauge(
    "runsgate_subscription_held_bytes",
    "Bytes of events and run updates held for subscribers on this instance: replay pages not yet sent, "
    "and live items waiting (runtime.subscription_budgets).",
    multiprocess_mode="livesum",
)
STREAMS_REFRESH_SECONDS = 1.0
"""In multiprocess mode, how often each process writes its stream gauges (``process_metrics``): a
scrape reads the other processes' last values."""
for _result in ("delivered", "http_error", "redirect", "timeout", "network_error"):
    WEBHOOK_ATTEMPTS.labels(_result)
for _outcome in ("delivered", "retrying", "failed"):
    WEBHOOK_DELIVERIES.labels(_outcome)


def count_webhook_attempt(result: AttemptResult, outcome: DeliveryOutcome) -> None:
    """Count one recorded webhook attempt (``WebhookDispatcher``'s ``on_attempt``)."""
    WEBHOOK_ATTEMPTS.labels(result).inc()
    WEBHOOK_DELIVERIES.labels(outcome).inc()


async def measure_store(store: SnapshotStore, agents: AgentRegistry) -> None:
    """Set ``runsgate_suspended_runs`` for every registered agent and ``runsgate_store_up``.

    When the store does not answer, the per-agent values are removed (not left stale) and
    ``runsgate_store_up`` is 0.
    """
    ids = agents.ids()
    try:
        counts = await asyncio.gather(*(store.count_runs(agent_id, RunFilter()) for agent_id in ids))
    except StoreUnavailableError as exc:
        logger.warning("metrics: the store did not answer: %s", exc)
        SUSPENDED_RUNS.clear()
        STORE_UP.set(0)
        return
    for agent_id, count in zip(ids, counts, strict=True):
        SUSPENDED_RUNS.labels(agent_id).set(count)
    STORE_UP.set(1)


def measure_streams(state: Any) -> None:
    """Set the gauges of what WebSockets and subscriptions hold, from the app's ``state``."""
    streams = getattr(state, "principal_streams", None)
    WEBSOCKETS.set(0 if streams is None else streams.sockets)
    WEBSOCKET_OPERATIONS.set(0 if streams is None else streams.operations)
    SUBSCRIPTION_HELD_BYTES.set(state.events.budgets.total_held)


def in_multiprocess_mode() -> bool:
    """Whether this process writes its values to ``PROMETHEUS_MULTIPROC_DIR`` (set before import)."""
    return bool(os.environ.get(MULTIPROC_DIR))


@contextmanager
def workers_metrics_dir() -> Iterator[str]:
    """The folder of ``PROMETHEUS_MULTIPROC_DIR`` for the ``--workers`` processes started inside the
    block: the operator's (created if missing, its ``*.db`` files of an earlier run deleted), or a
    temporary one, set in ``os.environ`` and removed after the block."""
    given = os.environ.get(MULTIPROC_DIR)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink(missing_ok=True)
        yield given
        return
    made = tempfile.mkdtemp(prefix="runsgate-metrics-")
    os.environ[MULTIPROC_DIR] = made
    try:
        yield made
    finally:
        os.environ.pop(MULTIPROC_DIR, None)
        shutil.rmtree(made, ignore_errors=True)


async def _keep_streams(state: Any, interval: float) -> None:
    while True:
        measure_streams(state)
        await asyncio.sleep(interval)


@asynccontextmanager
async def process_metrics(state: Any, interval: float = STREAMS_REFRESH_SECONDS) -> AsyncIterator[None]:
    """While the app's lifespan runs (``state`` exposed): ``runsgate_worker_processes`` is 1 for this
    process; in multiprocess mode its stream gauges are written every ``interval`` seconds, and
    its live gauges are removed when it stops (``multiprocess.mark_process_dead``)."""
    WORKER_PROCESSES.set(1)
    if not in_multiprocess_mode():
        yield
        return
    task = asyncio.create_task(_keep_streams(state, interval))
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def _registry() -> CollectorRegistry:
    """The default registry, or in multiprocess mode one reading every process's values."""
    if not in_multiprocess_mode():
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry


async def metrics(request: Request) -> Response:
    """Serve every metric of the process's default registry (in multiprocess mode, every process's
    values added up), after measuring the store and the subscriptions."""
    state = request.app.state
    measure_streams(state)
    await measure_store(state.store, state.runs.agents)
    return Response(generate_latest(_registry()), media_type=CONTENT_TYPE_LATEST)
