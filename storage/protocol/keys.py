"""``IdempotencyKeys``: the answers remembered for idempotency keys, each reserved under a lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..documents import IdempotencyDocument


@dataclass(frozen=True, kw_only=True)
class KeyAnswer:
    """An idempotency key's answer written with a run's write (``RunStore.delete_claimed``'s
    ``key``), as ``IdempotencyKeys.complete_idempotency_key(key_id, result, by=by, now=now)``."""

    key_id: str
    result: dict[str, Any]
    by: str
    now: datetime


class IdempotencyKeys(Protocol):
    """Answers remembered for idempotency keys (``key_id`` = ``{agentId}:{operation}:{key}``).
    Every method may raise ``StoreUnavailableError``."""

    async def reserve_idempotency_key(
        self,
        key_id: str,
        fingerprint: str,
        now: datetime,
        *,
        by: str | None = None,
        until: datetime | None = None,
    ) -> IdempotencyDocument | None:
        """Reserve the key for the request ``by``, with a lease until ``until`` (UTC; ``None``:
        no lease, held until completed or released).

        Returns ``None`` when ``by`` now holds the key: it was new, or it had no result, the same
        ``fingerprint`` and a lease that lapsed before ``now`` (its request died or could not
        release it), in which case it is taken over by one conditional write, so of several
        retries only one gets it. Otherwise the existing document (a result to replay, a request
        in flight, or other arguments).
        """

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        """Extend the lease of a reservation ``by`` still holds (no result yet); ``False`` if it
        was taken over or is gone."""

    async def complete_idempotency_key(
        self, key_id: str, result: dict[str, Any], *, by: str | None = None, now: datetime
    ) -> None:
        """Store the answer given for a reserved key and its ``finishedAt`` = ``now`` (UTC), only
        while ``by`` holds it (``None``: whoever does); a holder whose key was taken over writes
        nothing."""

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        """Forget a reserved key whose request failed unexpectedly, so it can be retried; only
        while ``by`` holds it (``None``: whoever does), never once it has a result."""

    async def delete_expired_idempotency_keys(self, *, before: datetime, limit: int) -> int:
        """Delete at most ``limit`` keys that meet ``rules.key_expired(before)`` (answered before
        ``before``, UTC), oldest answer first, through an index; never a key in flight.

        Returns:
            How many were deleted.

        Raises:
            ValueError: ``limit`` is below 1.
        """
        ...


__all__ = ["IdempotencyKeys"]
