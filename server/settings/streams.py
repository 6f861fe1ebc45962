"""What one principal may hold open on this process (SECURITY.md "Bounds on what a client or a
receiver controls"): its WebSockets, its operations over them, and the bytes its subscriptions
hold (replay pages, live queues; ``runtime.subscription_budgets``).

A mixin of ``server.settings.Settings`` (same ``RUNSGATE_`` prefix, same ``.env``);
docs/configuration.md lists every variable with its range.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from pydantic_settings import BaseSettings

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


class StreamSettings(BaseSettings):
    """Per-principal bounds of WebSockets and subscriptions (docs/configuration.md)."""

    max_ws_connections_per_principal: Annotated[int, Field(ge=1, le=10_000)] = 16
    """WebSockets one principal may have acknowledged at once; one more is closed with 1013."""
    max_ws_operations_per_principal: Annotated[int, Field(ge=1, le=1_000_000)] = 100
    """Operations one principal may have in flight over all its WebSockets; one more is the
    ``error`` message ``TOO_MANY_OPERATIONS``."""
    max_replay_bytes_per_principal: Annotated[int, Field(ge=64 * KIB, le=GIB)] = 4 * MIB
    """Bytes of stored events and run updates one principal's replays hold at once (pages of at
    most 256 KiB, smaller as they near it; past it, pages of one item)."""
    max_queued_bytes_per_principal: Annotated[int, Field(ge=64 * KIB, le=GIB)] = 16 * MIB
    """Bytes of live events and run updates that may wait for one principal's subscribers; the
    subscriber whose event would pass it is dropped (``SUBSCRIPTION_OVERFLOW``, resumable)."""
    max_subscription_rate_per_principal: Annotated[int, Field(ge=1, le=1_000_000)] = 250
    """Events and run updates a second one principal's subscriptions are sent, replayed or live
    (a burst of a tenth of a second's worth at once): what it may take of the event loop."""


__all__ = ["StreamSettings"]
