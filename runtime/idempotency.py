"""Idempotency keys: a repeated request returns the first answer and does nothing twice (docs/api.md "Mutations").

The stored ``result`` is ``{"outcome": RunOutcome.to_json()}``. A request refused with a
domain error changed nothing, so it leaves nothing either (SECURITY.md: a rejected request
writes nothing): its key is released, and repeating the request checks it again, which gives
the same error as long as the run is unchanged. Results ``{"error": ...}`` stored by earlier
versions still replay as that error.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from storage import (
    IdempotencyDocument,
    IdempotencyKeys,
    IdempotencyKeyTakenError,
    KeyAnswer,
    KeyReservation,
    to_bson_precision,
)

from ._json import canonical_json, fingerprint
from .continuing.claims import renewing, whole_milliseconds
from .errors import IdempotencyKeyReusedError, RunsgateError
from .outcome import RunOutcome

_T = TypeVar("_T")


class NothingWritten(Exception):
    """An action's failure that wrote nothing (a refusal that is no ``RunsgateError``): its key is
    released, as on a domain error."""


class HeldKey:
    """The key a running request holds (``IdempotencyGuard.once`` gives it to its action): the
    action may hand its answer to the write that finishes the run (``RunStore.delete_claimed``'s
    ``key``), then the guard writes no answer of its own. A deferred key (``once(defer=True)``)
    is not yet reserved: the action's first write reserves it (``reservation``, ``reserve``)."""

    def __init__(
        self,
        key_id: str,
        by: str,
        encode: Callable[[Any], dict[str, Any]],
        clock: Callable[[], datetime],
        *,
        fingerprint: str = "",
        lease: timedelta | None = None,
        store: IdempotencyKeys | None = None,
        reserved: bool = False,
    ):
        self.key_id, self.by, self._encode, self._clock = key_id, by, encode, clock
        self._fingerprint, self._lease, self._store = fingerprint, lease, store
        self.answered = False
        """Whether the store wrote the answer: set by the action once the write holding ``answer``'s
        result succeeded (a field, not a method: the write's caller sets it without a call back here)."""
        self.reserved = reserved or store is None
        """Whether this request holds the key (always, unless deferred): set by the action once the
        write holding ``reservation`` succeeded, as ``answered`` is."""

    def reservation(self, now: datetime | None = None) -> KeyReservation | None:
        """The reservation a decision's write takes (``RunStore.record_decision``'s ``key``), made
        at ``now`` (the write's time, from the guard's clock; ``None``: read it), or ``None`` when
        the key is held already; set ``reserved`` once that write succeeded."""
        if self.reserved or self._lease is None:
            return None
        now = self._clock() if now is None else now
        return KeyReservation(
            key_id=self.key_id, fingerprint=self._fingerprint, by=self.by, until=now + self._lease, now=now
        )

    async def reserve(self) -> None:
        """Reserve a deferred key by its own write, before a write that cannot take it.

        Raises:
            IdempotencyKeyTakenError: Another request holds or answered the key.
        """
        reservation = self.reservation()
        if reservation is None or self._store is None:
            return
        existing = await self._store.reserve_idempotency_key(reservation)
        if existing is not None:
            raise IdempotencyKeyTakenError(existing)
        self.reserved = True

    async def reserved_at(self) -> datetime:
        """UTC time the key was first reserved (its ``createdAt``): the same for every request
        that holds it until it expires and is deleted, so it tells one life of the key from the
        next. Read from the store.

        Raises:
            RuntimeError: The key is not stored (a deferred key not yet reserved).
        """
        found = None if self._store is None else await self._store.get_idempotency_key(self.key_id)
        if found is None:
            raise RuntimeError(f"idempotency key {self.key_id!r} is not reserved")
        return found["createdAt"]

    def answer(self, answer: Any, now: datetime | None = None) -> KeyAnswer:
        """The key's answer ``answer`` as a store write at ``now`` (the write's time, from the guard's
        clock; ``None``: read it) takes it; pass it to one write only, and set ``answered`` once
        that write succeeded."""
        now = self._clock() if now is None else now
        return KeyAnswer(key_id=self.key_id, result=self._encode(answer), by=self.by, now=now)


class IdempotencyGuard:
    """Runs operations at most once per idempotency key while their request lives.

    A reservation is a lease held by one request (``{instance_id}:{uuid}``), renewed every
    ``lease / 3`` seconds while it runs, released on a domain error and made to lapse at once on
    any other failure. Once a lease lapsed (its request died, or failed), a retry with the same
    arguments takes the key over by the store's conditional write; a decision the dead request
    recorded refuses the retry's (``ToolCallAlreadyDecidedError``): decisions stay exactly-once.

    Args:
        store: Where keys are reserved (the store's ``IdempotencyKeys`` part).
        clock: Aware UTC now at millisecond (BSON) precision.
        in_flight_wait: Seconds to wait, polling, for a first request with the same key that
            is still running, before answering ``IdempotencyKeyReusedError(in_flight=True)``.
        polls: How many times to look during that wait.
        owner: Prefix of the holder recorded in reservations (the instance id).
        lease: Seconds a reservation lasts without renewal (the claim TTL).
    """

    def __init__(
        self,
        store: IdempotencyKeys,
        clock: Callable[[], datetime],
        *,
        in_flight_wait: float,
        polls: int = 5,
        owner: str = "runsgate",
        lease: float = 60.0,
    ) -> None:
        self._store = store
        self._clock = clock
        self._interval = in_flight_wait / max(polls, 1)
        self._polls = polls
        self._owner = owner
        self._lease = lease
        self._lease_ms = whole_milliseconds(lease)

    def _until(self) -> datetime:
        return self._clock() + self._lease_ms

    async def _reserve(self, key_id: str, expected: str, by: str) -> IdempotencyDocument | None:
        reservation = KeyReservation(key_id=key_id, fingerprint=expected, now=self._clock(), by=by, until=self._until())
        return await self._store.reserve_idempotency_key(reservation)

    async def run(
        self,
        *,
        agent_id: str,
        operation: str,
        key: str | None,
        arguments: dict[str, Any],
        action: Callable[[HeldKey | None], Awaitable[RunOutcome]],
        defer: bool = False,
    ) -> RunOutcome:
        """``await action(held)`` once per ``(agent_id, operation, key)``; without a key, just run
        it (``held`` ``None``).

        Args:
            arguments: Everything that defines the request; its fingerprint must match on reuse.
            defer: The action's first write reserves the key (``HeldKey.reservation``), where
                the store can (``reserves_with_decisions``): one commit less. Else, and for
                an action that fails before that write, the key is reserved by its own write.

        Raises:
            IdempotencyKeyReusedError: The key was used with other arguments, or its first
                request is still running (its lease is renewed).
            RunsgateError: The request's domain error (nothing was written, the key is free again).
        """
        return await self.once(
            agent_id=agent_id,
            operation=operation,
            key=key,
            arguments=arguments,
            action=action,
            encode=lambda outcome: {"outcome": outcome.to_json()},
            decode=_replay,
            defer=defer,
        )

    async def once(
        self,
        *,
        agent_id: str,
        operation: str,
        key: str | None,
        arguments: dict[str, Any],
        action: Callable[[HeldKey | None], Awaitable[_T]],
        encode: Callable[[_T], dict[str, Any]],
        decode: Callable[[IdempotencyDocument], _T],
        defer: bool = False,
    ) -> _T:
        """``run`` for any answer: ``encode`` gives the JSON stored as the key's ``result``,
        ``decode`` the answer a repeat gets from the stored document. Raises as ``run``. The
        answer is written after ``action`` returns unless a store write took it (``HeldKey``)."""
        if key is None:
            return await action(None)
        key_id = f"{agent_id}:{operation}:{key}"
        expected = fingerprint(arguments)
        me = f"{self._owner}:{uuid.uuid4().hex}"
        encoded = cast(Callable[[Any], dict[str, Any]], encode)
        if defer and self._store.reserves_with_decisions:
            held = HeldKey(
                key_id, me, encoded, self._clock, fingerprint=expected, lease=self._lease_ms, store=self._store
            )
            try:
                return await self._act(held, action, encode)
            except IdempotencyKeyTakenError as exc:
                existing: IdempotencyDocument | None = exc.existing
            except RunsgateError:
                if held.reserved:  # released by _act
                    raise
                # refused before any write: the answer, unless another request holds the key
                existing = await self._reserve(key_id, expected, me)
                if existing is None:
                    with contextlib.suppress(Exception):
                        await self._store.release_idempotency_key(key_id, by=me)
                    raise
        else:
            existing = await self._reserve(key_id, expected, me)
        polls = 0
        while existing is not None:
            if existing["fingerprint"] != expected:
                raise IdempotencyKeyReusedError(key)
            if existing["result"] is not None:
                return decode(existing)
            if polls == self._polls:
                raise IdempotencyKeyReusedError(key, in_flight=True)
            polls += 1
            await asyncio.sleep(self._interval)
            # Re-reserving reads the key; if the first request released it, or its lease lapsed,
            # we now hold it.
            existing = await self._reserve(key_id, expected, me)
        return await self._act(
            HeldKey(key_id, me, encoded, self._clock, store=self._store, reserved=True), action, encode
        )

    async def _act(
        self, held: HeldKey, action: Callable[[HeldKey | None], Awaitable[_T]], encode: Callable[[_T], dict[str, Any]]
    ) -> _T:
        """Run ``action`` holding ``held`` (renewed), then write its answer unless a store write took
        it. On a domain error or ``NothingWritten`` (a refusal) the key is released; on any other
        failure its lease is made to lapse at once instead, so a retry takes it over with the key's
        first reservation time (``HeldKey.reserved_at``: a keyed start's run id) kept."""
        try:
            async with self._renewing(held):
                answer = await action(held)
        except BaseException as failed:
            if held.reserved:
                with contextlib.suppress(Exception):  # else its lease lapses and a retry takes it over
                    if isinstance(failed, RunsgateError | NothingWritten):
                        await self._store.release_idempotency_key(held.key_id, by=held.by)
                    else:
                        lapsed = self._clock() - timedelta(milliseconds=1)
                        await self._store.renew_idempotency_key(held.key_id, by=held.by, until=lapsed)
            raise
        if not held.answered:
            if not held.reserved:  # a deferred key the action wrote nothing with
                try:
                    await held.reserve()
                except IdempotencyKeyTakenError:
                    return answer
            finished = self._clock()
            await self._store.complete_idempotency_key(
                KeyAnswer(key_id=held.key_id, result=encode(answer), by=held.by, now=finished)
            )
        return answer

    def _renewing(self, held: HeldKey) -> contextlib.AbstractAsyncContextManager[None]:
        """Renew ``held``'s lease every ``lease / 3`` seconds while the body runs (once reserved)."""

        async def renew() -> bool:
            if not held.reserved:
                return True
            return await self._store.renew_idempotency_key(held.key_id, by=held.by, until=self._until())

        return renewing(renew, every=self._lease / 3, lease=f"idempotency key {held.key_id}")


def keyed_run_id(agent_id: str, operation: str, key: str, arguments: dict[str, Any], reserved_at: datetime) -> str:
    """The run id of the start ``(agent_id, operation, key)`` with ``arguments`` (as ``IdempotencyGuard.run``
    scopes and fingerprints them) whose key was first reserved at ``reserved_at`` (``HeldKey.reserved_at``):
    32 hex digits of an HMAC-SHA256 keyed by ``key``. Every repeat of the start while the key lives
    names the same run; once the key expired, the same start names a new one; nobody without the
    key can name it."""
    message = canonical_json([agent_id, operation, fingerprint(arguments), to_bson_precision(reserved_at).isoformat()])
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()[:32]


def _replay(existing: IdempotencyDocument) -> RunOutcome:
    result = existing["result"]
    assert result is not None
    if "error" in result:
        raise RunsgateError.from_json(result["error"])
    return RunOutcome.from_json(result["outcome"])
