"""Helpers of the tests that talk to a real ``python -m server serve`` process over HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

Sample = tuple[str, frozenset[tuple[str, str]]]
"""A metric sample's key: its name (``..._total`` for counters) and its labels."""


def scrape(base_url: str) -> dict[Sample, float]:
    """``GET /metrics``, parsed with prometheus_client's own parser: sample key -> value."""
    response = httpx.get(f"{base_url}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def sample(name: str, **labels: str) -> Sample:
    return name, frozenset(labels.items())


def log_records(log: Path) -> list[dict[str, Any]]:
    """Every line of a JSON-format server log, parsed (a line that is not a JSON object fails)."""
    records = []
    for line in log.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            assert isinstance(record, dict), line
            records.append(record)
    return records


def wait_for_records(
    log: Path, matching: Callable[[dict[str, Any]], bool], timeout: float = 20.0
) -> list[dict[str, Any]]:
    """The log's records that match, once there is at least one (the server writes them as it goes)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [record for record in log_records(log) if matching(record)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)
