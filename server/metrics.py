"""``GET /metrics``: Prometheus metrics in the text exposition format (prometheus_client).

Besides the GraphQL and decision metrics of ``resolvers.metrics`` and prometheus_client's
process and Python collectors, each scrape measures the store:

- ``runsgate_suspended_runs{agent_id}``: runs of each registered agent stored as waiting for
  input (what ``suspendedRuns`` lists, ``totalCount`` with no filter), counted when scraped.
- ``runsgate_store_up``: 1 when those counts succeeded, 0 when the store did not answer.

Cost of a scrape: one ``count_runs`` per registered agent (a fixed set, from
``RUNSGATE_AGENTS``), run concurrently. On MongoDB each is a count over the ``agentId`` prefix
of the listing index (it reads index keys, not documents, and never histories), bounded in
time by ``RUNSGATE_MONGODB_TIMEOUT``. No other label grows with the data: the agent ids are
the registered ones, whatever the store holds.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, disable_created_metrics, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from runtime import AgentRegistry
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


async def metrics(request: Request) -> Response:
    """Serve every metric of the process's default registry, after measuring the store."""
    state = request.app.state
    await measure_store(state.store, state.runs.agents)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
