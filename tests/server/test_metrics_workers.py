"""``/metrics`` of ``runsgate serve --workers 2`` adds up both workers (prometheus_client's
multiprocess mode; docs/operations.md "Metrics"), whichever worker answers the scrape."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .._graphql import REFUND, SUSPENDED_RUNS, data
from .._processes import scaled
from .._servers import SERVE, runsgate_servers

REQUESTS = 12
SCRAPES = 6


def _samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, for runsgate's own series."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("runsgate_"):
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


def _scrape(url: str) -> dict[str, float]:
    # a new connection each time (no keep-alive), so that either worker may answer
    with httpx.Client(timeout=scaled(30)) as client:
        response = client.get(f"{url}/metrics")
    assert response.status_code == 200, response.text
    return _samples(response.text)


def _wait_for_workers(url: str, count: int) -> None:
    """Scrape until ``runsgate_worker_processes`` is ``count``, at most ``scaled(60)`` seconds."""
    deadline = time.monotonic() + scaled(60)
    seen = None
    while time.monotonic() < deadline:
        seen = _scrape(url).get("runsgate_worker_processes{}")
        if seen == count:
            return
        time.sleep(0.2)
    raise AssertionError(f"runsgate_worker_processes stayed {seen}, not {count}")


@pytest.mark.process
def test_every_scrape_of_two_workers_adds_up_both(tmp_path: Path) -> None:
    logs = [tmp_path / "runsgate.log"]
    store = f"sqlite:///{tmp_path / 'runsgate.db'}"
    with runsgate_servers(logs, [*SERVE, "--workers", "2"], RUNSGATE_STORE=store) as servers:
        (server,) = servers
        # given both workers started (the first answers while the second may still import the app)
        _wait_for_workers(server.url, 2)
        # when queries are answered, each on a new connection
        for _ in range(REQUESTS):
            assert data(server.url, None, SUSPENDED_RUNS, agentId=REFUND)["suspendedRuns"]["edges"] == []

        # then every scrape, whichever worker answers it, counts both live workers and every query
        for _ in range(SCRAPES):
            samples = _scrape(server.url)
            assert samples["runsgate_worker_processes{}"] == 2, samples
            queries = {k: v for k, v in samples.items() if k.startswith("runsgate_graphql_requests_total{")}
            assert sum(queries.values()) == REQUESTS, queries
            # and what the scraping worker measures of the store is there once
            assert samples["runsgate_store_up{}"] == 1, samples
            assert samples[f"runsgate_suspended_runs{{agent_id={REFUND}}}"] == 0, samples
