"""Answers encoded within a budget in bytes (``RUNSGATE_MAX_RESPONSE_BYTES``), piece by piece.

``encode_within`` writes a GraphQL answer as orjson's compact UTF-8 JSON, giving the event loop
its turn every ``CHUNK`` bytes or ``SCAN_STEP`` values, and gives up (None) as soon as the bytes
written would pass the budget: an answer beyond it is never encoded whole. An answer whose
bound (``bound``) fits is written by orjson in one call. ``too_large`` is the answer sent
instead (``RESPONSE_TOO_LARGE``); ``encoded_answer`` gives one or the other as an ``EncodedAnswer``,
which the view sends as encoded. Why and the figures: docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Generator, Iterator
from typing import Any, Final

import orjson

from storage import strict_json

logger = logging.getLogger("runsgate.graphql")

CODE: Final = "RESPONSE_TOO_LARGE"
"""The ``extensions.code`` of an answer refused for its size."""
CHUNK: Final = 64 * 1024
"""Bytes encoded between two turns of the event loop (about a quarter of a millisecond)."""
SCAN_STEP: Final = 4096
"""Values ``bound`` looks at between two turns of the event loop."""
_INT_RANGE: Final = (-(2**63), 2**64)
"""The integers orjson writes (others are written by ``json``)."""

_END: Final = object()


class AnswerTooLarge(Exception):
    """The answer passes its budget."""


def _leaf(value: Any) -> bytes:
    """One value as orjson writes it; what orjson refuses (an integer beyond 64 bits) as
    ``json`` writes it (``strict_json.dumps_shown``: a float that is not finite is ``null``)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return strict_json.dumps_shown(value).encode()


def _key(key: Any) -> bytes:
    """An object key as JSON writes one: a string (``json`` turns other keys into strings)."""
    return _leaf(key if isinstance(key, str) else json.dumps(key).strip('"'))


def _flat_size(value: dict[Any, Any] | list[Any]) -> int | None:
    """The characters of the strings in ``value`` when it holds no object or list (a lower bound
    of its encoded size), else None."""
    size = 0
    for item in value.values() if type(value) is dict else value:
        kind = type(item)
        if kind is str:
            size += len(item)
        elif kind is dict or kind is list:
            return None
    return size


def chunks(value: Any, limit: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """``value`` as compact JSON (orjson's, ``_leaf``), in chunks of at least ``chunk`` bytes
    (the last one smaller), walked with a stack of its own (any nesting).

    Raises:
        AnswerTooLarge: The bytes written would pass ``limit``; a string longer than what is left is
            never encoded, an object or list of scalars is encoded in one piece.
    """
    out = bytearray()
    sent = 0
    stack: list[list[Any]] = []  # [is a dict, its items, first item still to come]
    pending = value
    while True:
        kind = type(pending)
        if (kind is dict or kind is list) and pending:
            flat = _flat_size(pending)
            piece = None
            if flat is not None:
                if flat > limit - sent - len(out):
                    raise AnswerTooLarge
                try:
                    piece = orjson.dumps(pending)
                except TypeError:
                    piece = None  # encoded item by item below
            if piece is not None:
                out += piece
            elif kind is dict:
                out += b"{"
                stack.append([True, iter(pending.items()), True])
            else:
                out += b"["
                stack.append([False, iter(pending), True])
        else:
            if kind is str and len(pending) > limit - sent - len(out):
                raise AnswerTooLarge
            out += _leaf(pending)
        if sent + len(out) > limit:
            raise AnswerTooLarge
        if len(out) >= chunk:
            yield bytes(out)
            sent += len(out)
            out.clear()
        while stack:
            frame = stack[-1]
            item: Any = next(frame[1], _END)
            if item is _END:
                out += b"}" if frame[0] else b"]"
                stack.pop()
                continue
            if not frame[2]:
                out += b","
            frame[2] = False
            if frame[0]:
                out += _key(item[0])
                out += b":"
                pending = item[1]
            else:
                pending = item
            break
        else:
            break
    if sent + len(out) > limit:
        raise AnswerTooLarge
    if out:
        yield bytes(out)


def _string_bound(text: str) -> int:
    """Bytes ``text`` cannot pass as a JSON string: a short one (64 characters or less, not worth
    looking into) or a long one (over ``CHUNK``) 6 bytes a character (``\\u0001``; UTF-8 takes at
    most 4) plus its quotes, unless a long one is printable ASCII (its length, quotes and escaped
    ``"`` and ``\\\\``); any other exactly, as orjson writes it (faster than looking at it)."""
    size = len(text)
    if size <= 64:
        return 6 * size + 2
    if size <= CHUNK:
        return len(orjson.dumps(text))
    if text.isascii() and text.isprintable():
        return size + 2 + text.count('"') + text.count("\\")
    return 6 * size + 2


def bound(value: Any, cap: int) -> Generator[None, None, int]:
    """Look at every value in ``value`` (a step every ``SCAN_STEP`` of them) and return, as the
    generator's value, a number of bytes its compact JSON cannot pass (``_string_bound`` for a
    string, 24 for a number, ``true``, ``false`` or ``null``), or ``cap + 1`` as soon as that
    passes ``cap`` or a value is one orjson does not write (an integer beyond 64 bits)."""
    if type(value) is not dict and type(value) is not list:
        value = [value]
    total = 0
    seen = 0
    stack = [value]
    while stack:
        container = stack.pop()
        if type(container) is dict:
            total += 2 + 2 * len(container)  # braces, colons, commas
            for key in container:
                if type(key) is not str:
                    return cap + 1
                total += _string_bound(key)
            children: Any = container.values()
        else:
            total += 2 + len(container)  # brackets, commas
            children = container
        for child in children:
            seen += 1
            if seen >= SCAN_STEP:  # a turn of the event loop, also within a long list
                if total > cap:
                    return cap + 1
                seen = 0
                yield
            kind = type(child)
            if kind is str:
                total += _string_bound(child)
            elif kind is dict or kind is list:
                stack.append(child)
            elif (
                kind is float
                or kind is bool
                or child is None
                or (kind is int and _INT_RANGE[0] <= child < _INT_RANGE[1])
            ):
                total += 24
            else:
                return cap + 1
        if total > cap:
            return cap + 1
    return total


async def encode_within(value: Any, limit: int) -> list[bytes] | None:
    """``value`` as compact JSON, in chunks; None as soon as it would pass ``limit`` bytes (what
    was encoded is dropped). When its ``bound`` fits, orjson writes it in one call; otherwise it is
    written piece by piece (``chunks``), awaiting the event loop after each chunk."""
    scan = bound(value, limit)
    try:
        while True:
            next(scan)
            await asyncio.sleep(0)
    except StopIteration as done:
        fits = done.value <= limit
    if fits:
        return [orjson.dumps(value)]
    encoded: list[bytes] = []
    try:
        for piece in chunks(value, limit):
            encoded.append(piece)
            await asyncio.sleep(0)
    except AnswerTooLarge:
        return None
    return encoded


def too_large(limit: int, extensions: Any = None) -> dict[str, Any]:
    """The answer sent instead of one over ``limit`` bytes: no data, one error with
    ``RESPONSE_TOO_LARGE`` and the limit, and the answer's own ``extensions`` (its cost)."""
    answer: dict[str, Any] = {
        "data": None,
        "errors": [
            {
                "message": f"The answer would be larger than {limit} bytes (RUNSGATE_MAX_RESPONSE_BYTES), so it "
                "was not sent: ask for fewer runs per page, fewer fields or a smaller `maxBytes`.",
                "extensions": {"code": CODE, "maxResponseBytes": limit},
            }
        ],
    }
    if extensions:
        answer["extensions"] = extensions
    return answer


class EncodedAnswer(dict[str, Any]):
    """An answer (a response body, or a WebSocket message) with its JSON already encoded within
    the budget, in ``chunks``; ``GraphQLView.encode_json`` and ``create_response`` send those."""

    def __init__(self, answer: dict[str, Any], chunks: list[bytes]) -> None:
        super().__init__(answer)
        self.chunks = chunks

    @property
    def size(self) -> int:
        return sum(map(len, self.chunks))


async def encoded_answer(answer: dict[str, Any], limit: int, *, message: bool = False) -> EncodedAnswer:
    """``answer`` (a response, or with ``message`` a WebSocket message whose ``payload`` is one)
    encoded within ``limit`` bytes (``server.http.encoding``); past it, the refusal
    ``RESPONSE_TOO_LARGE`` in its place, with the answer's ``extensions`` (its cost)."""
    encoded = await encode_within(answer, limit)
    if encoded is not None:
        return EncodedAnswer(answer, encoded)
    logger.info("answer over RUNSGATE_MAX_RESPONSE_BYTES (%d bytes) refused", limit)
    response = answer.get("payload") or {} if message else answer
    refused = too_large(limit, response.get("extensions"))
    if message:
        refused = {**answer, "payload": refused}
    return EncodedAnswer(refused, [orjson.dumps(refused)])


__all__ = [
    "CHUNK",
    "CODE",
    "SCAN_STEP",
    "AnswerTooLarge",
    "EncodedAnswer",
    "bound",
    "chunks",
    "encode_within",
    "encoded_answer",
    "too_large",
]
