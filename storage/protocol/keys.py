"""``IdempotencyKeys``: the answers remembered for idempotency keys, each reserved under a lease."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from ..documents import IdempotencyDocument
from .writes import KeyAnswer, KeyReservation


class IdempotencyKeyTakenError(Exception):
    """A decision's write found its key (``KeyReservation``) held or answered by another request,
    or fingerprinted with other arguments: nothing was written. ``existing`` is that key's
    document, as ``reserve_idempotency_key`` returns it."""

    def __init__(self, existing: IdempotencyDocument) -> None:
        super().__init__(f"idempotency key {existing['_id']!r} is taken")
        self.existing = existing


class IdempotencyKeys(Protocol):
    """Answers remembered for idempotency keys (``key_id`` = ``{agentId}:{operation}:{key}``).
    Every method may raise ``StoreUnavailableError``.

    ``reserves_with_decisions``: whether ``RunStore.record_decision`` takes a ``key`` and
    reserves it in the decision's own write (SQLite: one transaction; memory: one step). MongoDB
    has no multi-document transactions on every engine it runs on: there it is ``False``, and a
    key is reserved by its own write first.
    """

    reserves_with_decisions: bool

    async def reserve_idempotency_key(self, reservation: KeyReservation) -> IdempotencyDocument | None:
        """Reserve ``reservation.key_id`` for the request ``by``, with a lease until ``until``
        (UTC; ``None``: no lease, held until completed or released).

        Returns ``None`` when ``by`` now holds the key: it was new, or it had no result, the same
        ``fingerprint`` and a lease that lapsed before ``now`` (its request died or could not
        release it), in which case it is taken over by one conditional write, so of several
        retries only one gets it. Otherwise the existing document (a result to replay, a request
        in flight, or other arguments).
        """

    async def get_idempotency_key(self, key_id: str) -> IdempotencyDocument | None:
        """The key's document as stored, or ``None`` when there is none."""

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        """Extend the lease of a reservation ``by`` still holds (no result yet); ``False`` if it
        was taken over or is gone."""

    async def complete_idempotency_key(self, answer: KeyAnswer) -> None:
        """Store ``answer.result`` for a reserved key and its ``finishedAt`` = ``now`` (UTC), only
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
