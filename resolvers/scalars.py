"""Custom scalars: ``DateTime`` (RFC 3339 with offset, UTC out; mapped from ``datetime`` through
``StrawberryConfig.scalar_map``) and ``JSON`` (Strawberry's ``strawberry.scalars.JSON``, given a
literal parser that reads variables inside literals as graphql-js does; mapped through
``scalar_map`` too, see ``JSON_SCALAR``)."""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import strawberry
from graphql import (
    BooleanValueNode,
    EnumValueNode,
    FloatValueNode,
    IntValueNode,
    ListValueNode,
    NullValueNode,
    ObjectValueNode,
    StringValueNode,
    ValueNode,
    VariableNode,
)
from graphql.pyutils import Undefined
from strawberry.scalars import JSON
from strawberry.schema.types.scalar import DEFAULT_SCALAR_REGISTRY
from strawberry.types.scalar import ScalarDefinition


def serialize_datetime(value: datetime) -> str:
    """RFC 3339 in UTC with millisecond precision, e.g. ``2026-11-29T22:28:04.123Z``."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?")
"""RFC 3339 ``date-time`` (offset checked apart, for a clearer message); ``fromisoformat`` alone is
more lenient (other ISO 8601 forms, stray characters)."""


def _shown(value: str) -> str:
    """``value`` as an error message quotes it: at most 40 characters (a client's string is never
    echoed whole)."""
    return repr(value) if len(value) <= 40 else f"{value[:40]!r}..."


def parse_datetime(value: Any) -> datetime:
    """Parse an RFC 3339 date-time that carries an offset; return it in UTC.

    Raises:
        ValueError: Not a string, not a date-time, or no offset (a naive time is ambiguous).
    """
    if not isinstance(value, str):
        raise ValueError("DateTime must be an RFC 3339 string such as 2026-01-31T09:00:00Z")
    if not _RFC3339.fullmatch(value):
        raise ValueError(f"DateTime {_shown(value)} is not RFC 3339 (e.g. 2026-01-31T09:00:00Z)")
    try:
        parsed = datetime.fromisoformat(value.upper())  # RFC 3339 allows t and z
    except ValueError:
        raise ValueError(f"DateTime {_shown(value)} is not RFC 3339 (e.g. 2026-01-31T09:00:00Z)") from None
    if parsed.tzinfo is None:
        raise ValueError(f"DateTime {_shown(value)} has no UTC offset; add Z or +hh:mm")
    return parsed.astimezone(UTC)


DateTime = strawberry.scalar(
    name="DateTime",
    description="An RFC 3339 date-time with a UTC offset; runsgate returns UTC (`Z`).",
    serialize=serialize_datetime,
    parse_value=parse_datetime,
    specified_by_url="https://datatracker.ietf.org/doc/html/rfc3339#section-5.6",
)


def _variable_value(value: Any) -> Any:
    """A variable's coerced value as JSON: enum values by their name, the rest as they are."""
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, dict):
        return {key: _variable_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_variable_value(item) for item in value]
    return value


def parse_json_literal(node: ValueNode, variables: dict[str, Any] | None = None) -> Any:
    """A ``JSON`` literal as a Python value, as graphql-js's ``valueFromASTUntyped`` followed by
    ``JSON.stringify`` reads it.

    Variables may appear anywhere inside the literal: a variable given is its coerced value; an
    omitted one (or any variable when ``variables`` is ``None``, as during validation) drops its
    object key, is ``null`` in a list, and is ``Undefined`` (graphql-core: an invalid value) as
    the whole literal. Enum literals are their name, as strings.

    Raises:
        ValueError: A number JSON cannot hold: a float literal that overflows to infinity, or an
            integer literal longer than Python converts (``sys.get_int_max_str_digits``).
            graphql-core reports it as an invalid value for the argument, naming the reason.
    """
    if isinstance(node, VariableNode):
        if not variables:
            return Undefined
        return _variable_value(variables.get(node.name.value, Undefined))
    if isinstance(node, ObjectValueNode):
        fields = ((field.name.value, parse_json_literal(field.value, variables)) for field in node.fields)
        return {name: value for name, value in fields if value is not Undefined}
    if isinstance(node, ListValueNode):
        items = (parse_json_literal(item, variables) for item in node.values)
        return [None if item is Undefined else item for item in items]
    if isinstance(node, IntValueNode):
        try:
            return int(node.value)
        except ValueError:
            raise ValueError(f"JSON integer {node.value[:20]}... has too many digits") from None
    if isinstance(node, FloatValueNode):
        number = float(node.value)
        if not math.isfinite(number):
            raise ValueError(f"JSON number {node.value} is out of range")
        return number
    if isinstance(node, StringValueNode | EnumValueNode | BooleanValueNode):
        return node.value
    if isinstance(node, NullValueNode):
        return None
    raise ValueError(f"{type(node).__name__} is not a JSON value")  # pragma: no cover: every node kind is above


_STRAWBERRY_JSON = DEFAULT_SCALAR_REGISTRY[JSON]

JSON_SCALAR: ScalarDefinition = dataclasses.replace(_STRAWBERRY_JSON, parse_literal=parse_json_literal)
"""Strawberry's ``JSON`` scalar (same name, description, URL, ``serialize`` and ``parse_value``)
with ``parse_json_literal`` as its literal parser. Fields keep the annotation
``strawberry.scalars.JSON``; the schema maps it to this definition (``StrawberryConfig.scalar_map``)."""

__all__ = ["JSON", "JSON_SCALAR", "DateTime", "parse_datetime", "parse_json_literal", "serialize_datetime"]
