"""``GET /metrics``: Prometheus metrics in the text exposition format (prometheus_client).

Besides ``resolvers.metrics`` and the process collectors: ``runsgate_suspended_runs{agent_id}``
and ``runsgate_store_up``, measured at each scrape (one ``count_runs`` per registered agent); the
webhook counters ``runsgate_webhook_attempts_total{result}`` and
``runsgate_webhook_deliveries_total{outcome}``; and what subscriptions hold, read at each scrape:
``runsgate_websockets``, ``runsgate_websocket_operations``, ``runsgate_subscription_held_bytes``.
Label values and a scrape's cost: docs/operations.md "Metrics".
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, disable_created_metrics, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from runtime import AgentRegistry
from runtime.webhooks.dispatcher import AttemptResult, DeliveryOutcome
from storage import RunFilter, SnapshotStore, StoreUnavailableError

logger = logging.getLogger("runsgate.metrics")

# No ``*_created`` series: they double the output and Prometheus does not use them.
disable_created_metrics()  # type: ignore[no-untyped-call]

SUSPENDED_RUNS = Gauge(
    "runsgate_suspended_runs",
    "Runs of the agent stored as waiting for input (suspendedRuns totalCount), counted at scrape time.",
    ["agent_id"],
)
STORE_UP = Gauge("runsgate_store_up", "1 when the store answered the last scrape's counts, else 0.")
WEBHOOK_ATTEMPTS = Counter(
    "runsgate_webhook_attempts", "Webhook delivery attempts made by this instance, by how they ended.", ["result"]
)
WEBHOOK_DELIVERIES = Counter(
    "runsgate_webhook_deliveries",
    "Webhook delivery attempts by what they made of the delivery: delivered, retrying or failed.",
    ["outcome"],
)
WEBSOCKETS = Gauge("runsgate_websockets", "WebSockets acknowledged and open on this process.")
WEBSOCKET_OPERATIONS = Gauge(
    "runsgate_websocket_operations", "Operations (subscriptions included) in flight over this process's WebSockets."
)
SUBSCRIPTION_HELD_BYTES = Gauge(
    "runsgate_subscription_held_bytes",
    "Bytes of events and run updates held for subscribers on this process: replay pages not yet sent, "
    "and live items waiting (runtime.subscription_budgets).",
)
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


async def metrics(request: Request) -> Response:
    """Serve every metric of the process's default registry, after measuring the store and the
    subscriptions."""
    state = request.app.state
    measure_streams(state)
    await measure_store(state.store, state.runs.agents)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
