"""Limits on what a client sends, in bytes: one table for every argument and input field.

``INPUT_LIMITS`` names each limit by its GraphQL name (UTF-8 bytes of a string; bytes and depth
of compact JSON), wherever it appears; SECURITY.md lists the same table. ``InputLimits``, a field
extension installed by ``install_input_limits``, checks every argument before the resolver runs:
over its limit is a ``QueryArgumentError`` (``BAD_USER_INPUT``) naming its path, without echoing
the value. The table: SECURITY.md "Limits and hostile input".
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from strawberry.extensions import FieldExtension
from strawberry.types.base import has_object_definition
from strawberry.types.field import StrawberryField
from strawberry.utils.await_maybe import await_maybe
from strawberry.utils.str_converters import to_camel_case

from ..context import DEFAULT_LIMITS, Context, Info, RequestLimits
from ..errors import QueryArgumentError


@dataclass(frozen=True, kw_only=True)
class Limit:
    """The largest value of one input.

    Attributes:
        max_bytes: UTF-8 bytes of a string (or of compact JSON), when fixed.
        setting: Name of the ``RequestLimits`` attribute holding the limit instead (a ``RUNSGATE_``
            setting, e.g. ``max_prompt_bytes``).
        depth_setting: ``JSON`` inputs: the ``RequestLimits`` attribute holding the deepest nesting.
        min_bytes: Shortest accepted (``idempotencyKey``: not empty).
    """

    max_bytes: int | None = None
    setting: str | None = None
    depth_setting: str | None = None
    min_bytes: int = 0

    def bytes_for(self, context: Context | None) -> int:
        """The limit in bytes (a setting read from ``context``; its default without one)."""
        if self.max_bytes is not None:
            return self.max_bytes
        assert self.setting is not None
        return int(getattr(_limits(context), self.setting))


def _limits(context: Context | None) -> RequestLimits:
    return context.limits if context is not None else DEFAULT_LIMITS


ID_BYTES: Final = 128
"""Agent ids and run ids (runsgate's run ids are 32 hex digits)."""
MODEL_ID_BYTES: Final = 256
"""Ids a model or a tool makes: tool call ids (``call_...``, ``toolu_...``, ``pyd_ai_...``), question ids."""
NAME_BYTES: Final = 256
"""Names a client chooses: ``threadId``, ``resourceId``."""
CURSOR_BYTES: Final = 512
"""Opaque cursors and global ids runsgate made (a listing cursor holds a date and a run id)."""
EVENT_ID_BYTES: Final = 64
"""Event ids (``{20 digits}-{12 hex}``)."""
MAX_IDEMPOTENCY_KEY_BYTES: Final = 255
"""An ``idempotencyKey`` (Stripe's limit: room for a UUID with a prefix)."""
OTHER_STRING_BYTES: Final = 1024
"""A string input the table does not name (none: ``tests/resolvers/test_input_limits.py``)."""

_JSON = Limit(setting="max_resume_data_bytes", depth_setting="max_resume_data_depth")

INPUT_LIMITS: Final[Mapping[str, Limit]] = {
    "agentId": Limit(max_bytes=ID_BYTES),
    "agentIds": Limit(max_bytes=ID_BYTES),
    "toolNames": Limit(max_bytes=NAME_BYTES),
    "runId": Limit(max_bytes=ID_BYTES),
    "toolCallId": Limit(max_bytes=MODEL_ID_BYTES),
    "questionId": Limit(max_bytes=MODEL_ID_BYTES),
    "threadId": Limit(max_bytes=NAME_BYTES),
    "resourceId": Limit(max_bytes=NAME_BYTES),
    "idempotencyKey": Limit(max_bytes=MAX_IDEMPOTENCY_KEY_BYTES, min_bytes=1),
    "prompt": Limit(setting="max_prompt_bytes"),
    "reason": Limit(setting="max_reason_bytes"),
    "after": Limit(max_bytes=CURSOR_BYTES),
    "before": Limit(max_bytes=CURSOR_BYTES),
    "id": Limit(max_bytes=CURSOR_BYTES),
    "afterEventId": Limit(max_bytes=EVENT_ID_BYTES),
    "editedArgs": _JSON,
    "resumeData": _JSON,
}
"""GraphQL name of an argument or input field -> its limit (module docstring; SECURITY.md)."""


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


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_value(name: str, value: Any, path: str, context: Context | None = None) -> None:
    """Check one client value named ``name`` (its GraphQL name) against ``INPUT_LIMITS``; input
    objects and lists are walked, their items named by their own field names.

    Raises:
        QueryArgumentError: ``BAD_USER_INPUT`` naming ``path`` (the value is not echoed).
    """
    limit = INPUT_LIMITS.get(name)
    if limit is not None and limit.depth_setting is not None:
        _check_json(value, limit, path, context)
    elif isinstance(value, str):
        _check_text(value, limit, path, context)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_value(name, item, f"{path}[{index}]", context)
    elif has_object_definition(value):
        for field in value.__strawberry_definition__.fields:
            field_name = field.graphql_name or to_camel_case(field.python_name)
            check_value(field_name, getattr(value, field.python_name, None), f"{path}.{field_name}", context)


def _check_text(value: str, limit: Limit | None, path: str, context: Context | None) -> None:
    most = OTHER_STRING_BYTES if limit is None else limit.bytes_for(context)
    if limit is not None and len(value) < limit.min_bytes:
        raise QueryArgumentError(f"`{path}` is empty; send a unique key (a UUID) or none", argument=path)
    if len(value) * 4 <= most:  # a character is at most 4 bytes of UTF-8
        return
    size = _utf8_size(value)
    if size > most:
        raise QueryArgumentError(f"`{path}` is {size} bytes; at most {most} are accepted", argument=path)


def _check_json(value: Any, limit: Limit, path: str, context: Context | None) -> None:
    if value is None:
        return
    assert limit.depth_setting is not None
    max_depth = int(getattr(_limits(context), limit.depth_setting))
    if json_depth(value, stop_above=max_depth) > max_depth:
        raise QueryArgumentError(f"`{path}` is nested deeper than {max_depth} levels", argument=path)
    most = limit.bytes_for(context)
    size = _utf8_size(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    if size > most:
        raise QueryArgumentError(f"`{path}` is {size} bytes as JSON; at most {most} are accepted", argument=path)


def check_arguments(info: Info, field: StrawberryField, arguments: Mapping[str, Any]) -> None:
    """Check every argument of ``field`` given in ``arguments`` (converted, by Python name).

    Raises:
        QueryArgumentError: A value is over its limit (``check_value``).
    """
    context = info.context if isinstance(info.context, Context) else None
    for argument in field.arguments:
        if argument.python_name in arguments:
            name = argument.graphql_name or to_camel_case(argument.python_name)
            check_value(name, arguments[argument.python_name], name, context)


class InputLimits(FieldExtension):
    """Holds one field's arguments to ``INPUT_LIMITS`` before its resolver runs (module docstring).

    A refused subscription yields the error as its one result, as a refused scope does
    (``resolvers.access.CanReadEvents``).
    """

    field: StrawberryField

    def apply(self, field: StrawberryField) -> None:
        self.field = field

    def resolve(self, next_: Any, source: Any, info: Info, **kwargs: Any) -> Any:
        check_arguments(info, self.field, kwargs)
        return next_(source, info, **kwargs)

    async def resolve_async(self, next_: Any, source: Any, info: Info, **kwargs: Any) -> Any:
        try:
            check_arguments(info, self.field, kwargs)
        except QueryArgumentError as error:
            if self.field.is_subscription:
                return _refused(error)
            raise
        result = next_(source, info, **kwargs)
        return result if inspect.isasyncgen(result) else await await_maybe(result)


async def _refused(error: QueryArgumentError) -> AsyncGenerator[NoReturn, None]:
    raise error
    yield  # pragma: no cover - makes this an async generator


def install_input_limits(types: Iterable[type]) -> None:
    """Add ``InputLimits`` to every field with arguments of ``types`` (once; schemas built later
    carry it)."""
    for type_ in types:
        for field in type_.__strawberry_definition__.fields:  # type: ignore[attr-defined]
            if field.arguments and not any(isinstance(e, InputLimits) for e in field.extensions):
                field.extensions.append(InputLimits())


__all__ = [
    "INPUT_LIMITS",
    "MAX_IDEMPOTENCY_KEY_BYTES",
    "InputLimits",
    "Limit",
    "check_arguments",
    "check_value",
    "install_input_limits",
    "json_depth",
]
