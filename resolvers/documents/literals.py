"""Integer literals longer than Python converts, refused without Python's words or every digit.

graphql-core refuses a literal its scalar could not parse with "Expected value of type 'T', but
encountered error '<the exception>'; found: <the literal>". For an integer literal of more
digits than ``sys.get_int_max_str_digits()`` the exception is Python's own (its int limit and
``sys.set_int_max_str_digits()``) and the literal is echoed whole. ``bounded_literal_error``
gives the error a client sees instead; ``ErrorMasking`` (``resolvers.errors``) applies it to
every request's errors, over HTTP and WebSocket.
"""

from __future__ import annotations

import re
import sys
from typing import Final

from graphql import GraphQLError, IntValueNode

SHOWN_DIGITS: Final = 20
"""Digits of an over-long literal the message repeats, before "..." and the count."""

_REFUSED_LITERAL = re.compile(r"Expected value of type '([^']+)', but encountered error '")


def _oversized(error: GraphQLError) -> tuple[str, IntValueNode] | None:
    """The scalar's name and the literal when ``error`` is graphql-core's refusal of an integer
    literal longer than Python converts; else None."""
    nodes = error.nodes or []
    if error.path is not None or not isinstance(error.original_error, ValueError) or len(nodes) != 1:
        return None
    node = nodes[0]
    limit = sys.get_int_max_str_digits()
    if not isinstance(node, IntValueNode) or not limit or len(node.value.lstrip("-")) <= limit:
        return None
    refused = _REFUSED_LITERAL.match(error.message)
    return (refused.group(1), node) if refused else None


def is_oversized_literal_error(error: GraphQLError) -> bool:
    """Whether ``error`` refuses an integer literal longer than Python converts (a validation
    error, no ``path``, located at the literal)."""
    return _oversized(error) is not None


def bounded_literal_error(error: GraphQLError) -> GraphQLError:
    """The refusal of an over-long integer literal as a client sees it, at the same location with
    the same ``extensions``: for ``Int``, graphql-core's out-of-range message ("Int cannot
    represent non 32-bit signed integer value: ..."), else "Expected value of type 'T', found:
    ..."; the literal cut to its sign, ``SHOWN_DIGITS`` digits, "..." and its digit count. Any
    other error is returned as it is."""
    oversized = _oversized(error)
    if oversized is None:
        return error
    type_name, node = oversized
    digits = node.value.lstrip("-")
    shown = f"{node.value[: len(node.value) - len(digits) + SHOWN_DIGITS]}... ({len(digits)} digits)"
    if type_name == "Int":
        message = f"Int cannot represent non 32-bit signed integer value: {shown}"
    else:
        message = f"Expected value of type '{type_name}', found: {shown}."
    return GraphQLError(
        message, nodes=error.nodes, source=error.source, positions=error.positions, extensions=error.extensions
    )


__all__ = ["SHOWN_DIGITS", "bounded_literal_error", "is_oversized_literal_error"]
