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

from storage import IdempotencyDocument, IdempotencyKeys, KeyAnswer, to_bson_precision

from ._claims import renewing
from ._json import canonical_json, fingerprint
from .errors import IdempotencyKeyReusedError, RunsgateError
from .outcome import RunOutcome

_T = TypeVar("_T")


class HeldKey:
    """The key a running request holds (``IdempotencyGuard.once`` gives it to its action): the
    action may hand its answer to the write that finishes the run (``RunStore.delete_claimed``'s
    ``key``), then the guard writes no answer of its own."""

    def __init__(self, key_id: str, by: str, encode: Callable[[Any], dict[str, Any]], clock: Callable[[], datetime]):
        self._key_id, self._by, self._encode, self._clock = key_id, by, encode, clock
        self.answered = False
        """Whether the store wrote the answer (``written``)."""

    def answer(self, answer: Any) -> KeyAnswer:
        """The key's answer ``answer`` as a store write takes it; pass it to one write only."""
        now = to_bson_precision(self._clock())
        return KeyAnswer(key_id=self._key_id, result=self._encode(answer), by=self._by, now=now)

    def written(self) -> None:
        """The write holding ``answer``'s result succeeded."""
        self.answered = True


class IdempotencyGuard:
    """Runs operations at most once per idempotency key while their request lives.

    A reservation is a lease held by one request (``{instance_id}:{uuid}``) until ``lease``
    seconds ahead, renewed every ``lease / 3`` seconds while the operation runs, and released on
    every failure (cancellation included). A request that died (its process killed) or could not
    release its key (the store failed) leaves a reservation whose lease lapses; a retry with the
    same arguments then takes the key over by the store's conditional write and runs the
    operation. Never while the first request is alive: it keeps renewing. If the dead request
    had already recorded a decision, the retry's decision is refused by the store's own
    conditional write (``ToolCallAlreadyDecidedError``), so decisions stay exactly-once.

    Args:
        store: Where keys are reserved (the store's ``IdempotencyKeys`` part).
        clock: Aware UTC now.
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

    def _until(self) -> datetime:
        return to_bson_precision(self._clock() + timedelta(seconds=self._lease))

    async def _reserve(self, key_id: str, expected: str, by: str) -> IdempotencyDocument | None:
        return await self._store.reserve_idempotency_key(key_id, expected, self._clock(), by=by, until=self._until())

    async def run(
        self,
        *,
        agent_id: str,
        operation: str,
        key: str | None,
        arguments: dict[str, Any],
        action: Callable[[HeldKey | None], Awaitable[RunOutcome]],
    ) -> RunOutcome:
        """``await action(held)`` once per ``(agent_id, operation, key)``; without a key, just run
        it (``held`` ``None``).

        Args:
            arguments: Everything that defines the request; its fingerprint must match on reuse.

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
    ) -> _T:
        """``run`` for any answer: ``encode`` gives the JSON stored as the key's ``result``,
        ``decode`` the answer a repeat gets from the stored document. Raises as ``run``. The
        answer is written after ``action`` returns unless a store write took it (``HeldKey``)."""
        if key is None:
            return await action(None)
        key_id = f"{agent_id}:{operation}:{key}"
        expected = fingerprint(arguments)
        me = f"{self._owner}:{uuid.uuid4().hex}"
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
        held = HeldKey(key_id, me, cast(Callable[[Any], dict[str, Any]], encode), self._clock)
        try:
            async with self._renewing(key_id, me):
                answer = await action(held)
        except BaseException:
            with contextlib.suppress(Exception):  # else its lease lapses and a retry takes it over
                await self._store.release_idempotency_key(key_id, by=me)
            raise
        if not held.answered:
            finished = to_bson_precision(self._clock())
            await self._store.complete_idempotency_key(key_id, encode(answer), by=me, now=finished)
        return answer

    def _renewing(self, key_id: str, me: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Renew ``me``'s lease on the key every ``lease / 3`` seconds while the body runs."""
        return renewing(
            lambda: self._store.renew_idempotency_key(key_id, by=me, until=self._until()),
            every=self._lease / 3,
            lease=f"idempotency key {key_id}",
        )


def keyed_run_id(agent_id: str, operation: str, key: str, arguments: dict[str, Any]) -> str:
    """The run id of the start ``(agent_id, operation, key)`` with ``arguments`` (as ``IdempotencyGuard.run``
    scopes and fingerprints them): 32 hex digits of an HMAC-SHA256 keyed by ``key``, so every
    repeat of the start names the same run and nobody without the key can name it."""
    message = canonical_json([agent_id, operation, fingerprint(arguments)])
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()[:32]


def _replay(existing: IdempotencyDocument) -> RunOutcome:
    result = existing["result"]
    assert result is not None
    if "error" in result:
        raise RunsgateError.from_json(result["error"])
    return RunOutcome.from_json(result["outcome"])
