"""Settings and GraphQL documents shared by the webhook server tests."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests._processes import scaled
from tests._receiver import Receiver

ALL_EVENTS = ["run.suspended", "run.decided", "call.expired", "run.completed", "run.failed"]

FAST = {
    "RUNSGATE_WEBHOOK_POLL_INTERVAL": "0.2",
    "RUNSGATE_SUBSCRIPTION_LOOKBACK": "1",
    "RUNSGATE_WEBHOOK_BACKOFF": "0.3",
    "RUNSGATE_WEBHOOK_BACKOFF_MAX": "1",
    "RUNSGATE_WEBHOOK_RETRY_FOR": "30",
    "RUNSGATE_WEBHOOK_CONNECT_TIMEOUT": "1",
    "RUNSGATE_WEBHOOK_READ_TIMEOUT": "2",
    "RUNSGATE_PUBLIC_URL": "https://runs.example.com",
    "RUNSGATE_GRAPHIQL": "false",
}
"""Test-friendly webhook settings: a scan every 0.2 s, retries after 0.15-1 s."""

DELIVERIES = """
query Deliveries($first: Int, $after: String, $status: WebhookDeliveryStatus) {
  webhookDeliveries(first: $first, after: $after, status: $status) {
    edges { cursor node {
      id eventType eventId agentId runId resourceId endpoint status attempts
      createdAt nextAttemptAt lastAttemptAt lastStatusCode lastError finishedAt
    } }
    pageInfo { hasNextPage hasPreviousPage endCursor }
  }
}
"""


def webhooks_env(*receivers: tuple[Receiver, list[str]], **more: str) -> dict[str, str]:
    """``RUNSGATE_WEBHOOKS`` naming each receiver with its events, plus ``FAST`` and ``more``."""
    hooks = [{"url": r.url, "secret": r.secret, "events": events} for r, events in receivers]
    return {**FAST, "RUNSGATE_WEBHOOKS": json.dumps(hooks), **more}


def wait_until(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy, for at most ``scaled(timeout)`` s; that value."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout} s (last: {last!r})")


def metric(base_url: str, name: str, label: str) -> float:
    """The value of ``name{...label...}`` on ``/metrics`` (0 when absent)."""
    for line in httpx.get(f"{base_url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0
