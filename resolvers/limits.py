"""Input limits checked by resolvers: the size and nesting of ``resumeData``, the size of a
``startRun`` prompt and of a decline reason, the length of an ``idempotencyKey``.

Limits on the request as a whole (body size, query depth, tokens, aliases, batching) are
set by ``server/`` around the schema; these need the parsed argument.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .context import Info
from .errors import QueryArgumentError


def json_depth(value: Any, *, stop_above: int) -> int:
    """Nesting depth of a JSON value (arrays and objects), computed without recursion.

    A scalar is 0, ``[]`` is 1, ``{"a": [1]}`` is 2. Stops counting once the depth passes
    ``stop_above`` (the returned value is then ``stop_above + 1``).
    """
    depth = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            depth = max(depth, level + 1)
            if depth > stop_above:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return depth


def check_resume_data(info: Info, value: Any, *, argument: str = "input.resumeData") -> None:
    """Reject ``resumeData`` nested deeper or larger than the configured limits.

    Size is the UTF-8 length in bytes of the value as compact JSON. Checked before anything
    is read or written, so a rejected request changes nothing.

    Raises:
        QueryArgumentError: ``BAD_USER_INPUT`` naming ``argument`` and the limit.
    """
    context = info.context
    max_depth = context.max_resume_data_depth
    if json_depth(value, stop_above=max_depth) > max_depth:
        raise QueryArgumentError(f"`{argument}` is nested deeper than {max_depth} levels", argument=argument)
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > context.max_resume_data_bytes:
        raise QueryArgumentError(
            f"`{argument}` is {size} bytes as JSON; at most {context.max_resume_data_bytes} are accepted",
            argument=argument,
        )


def check_text_size(value: str | None, limit: int, *, argument: str) -> None:
    """Reject a text argument longer than ``limit`` UTF-8 bytes, before anything is read or written.

    Raises:
        QueryArgumentError: ``BAD_USER_INPUT`` naming ``argument`` and the limit.
    """
    if value is None or len(value) * 4 <= limit:  # a character is at most 4 bytes
        return
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise QueryArgumentError(f"`{argument}` is {size} bytes; at most {limit} are accepted", argument=argument)


MAX_IDEMPOTENCY_KEY_LENGTH: Final = 255
"""Characters of an ``idempotencyKey`` (Stripe's limit: room for a UUID with a prefix)."""


def check_idempotency_key(key: str | None, *, argument: str = "input.idempotencyKey") -> None:
    """Reject an empty ``idempotencyKey``, or one longer than ``MAX_IDEMPOTENCY_KEY_LENGTH``
    characters, before anything is read or written (the key is stored with its answer).

    Raises:
        QueryArgumentError: ``BAD_USER_INPUT`` naming ``argument``.
    """
    if key is None:
        return
    if not key:
        raise QueryArgumentError(f"`{argument}` is empty; send a unique key (a UUID) or none", argument=argument)
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise QueryArgumentError(
            f"`{argument}` is {len(key)} characters; at most {MAX_IDEMPOTENCY_KEY_LENGTH} are accepted",
            argument=argument,
        )


__all__ = ["MAX_IDEMPOTENCY_KEY_LENGTH", "check_idempotency_key", "check_resume_data", "check_text_size", "json_depth"]
