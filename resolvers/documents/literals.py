"""Long literals and names in validation errors, cut short; over-long integers refused without Python's words.

graphql-core's validation errors echo a literal whole ("Int cannot represent non-integer value:
<literal>", "Value '<literal>' does not exist in 'E' enum.", "Expected value of type 'T', but
encountered error '<exception>'; found: <literal>"), whatever its type, and a name the schema does
not know; an integer literal longer than ``sys.get_int_max_str_digits()`` gets Python's own words.
``bounded_literal_error`` cuts each such literal or name (and a message still over
``LONGEST_MESSAGE``) to its first characters, "..." and its length; ``ErrorMasking``
(``resolvers.errors``) applies it to every request's errors, over HTTP and WebSocket.
"""

from __future__ import annotations

import re
import sys
from typing import Final

from graphql import GraphQLError, IntValueNode, NameNode, Node, ValueNode, print_ast

SHOWN_DIGITS: Final = 20
"""Digits of an over-long integer literal the message repeats, before "..." and the count."""
SHOWN_CHARACTERS: Final = 20
"""Characters of another long literal (as printed) the message repeats, before "..." and the count."""
LONGEST_ECHOED: Final = 64
"""The longest literal (as printed) or name a message repeats whole."""
LONGEST_MESSAGE: Final = 1024
"""The longest validation error message sent whole (one printing an object whose long literal is
not the error's own node is cut as a whole)."""
PRINT_WIDTH: Final = 100
"""The indentation depth graphql-core prints a literal with in its messages (``print_for_error``)."""

_REFUSED_LITERAL = re.compile(r"Expected value of type '([^']+)', but encountered error '")


def _literal(error: GraphQLError) -> ValueNode | None:
    """The literal ``error`` is about: a validation error (no ``path``) located at one value."""
    nodes = error.nodes or []
    if error.path is not None or len(nodes) != 1 or not isinstance(nodes[0], ValueNode):
        return None
    return nodes[0]


def _forms(node: Node) -> set[str]:
    """What a message may repeat of ``node``: a literal as graphql-core prints it and its text (a
    string's or an enum value's); a name; the name, alias and variable name of another node."""
    if isinstance(node, ValueNode):
        return {print_ast(node, PRINT_WIDTH), print_ast(node), str(getattr(node, "value", ""))}
    if isinstance(node, NameNode):
        return {node.value}
    parts = (
        getattr(node, "name", None),
        getattr(node, "alias", None),
        getattr(getattr(node, "variable", None), "name", None),
    )
    return {part.value for part in parts if isinstance(part, NameNode)}


def _oversized(error: GraphQLError, node: ValueNode) -> str | None:
    """The scalar's name when ``error`` is graphql-core's refusal of an integer literal longer
    than Python converts; else None."""
    limit = sys.get_int_max_str_digits()
    if not isinstance(error.original_error, ValueError) or not isinstance(node, IntValueNode) or not limit:
        return None
    if len(node.value.lstrip("-")) <= limit:
        return None
    refused = _REFUSED_LITERAL.match(error.message)
    return refused.group(1) if refused else None


def _echoed(error: GraphQLError) -> list[str]:
    """The literals and names of ``error``'s nodes (``_forms``) longer than ``LONGEST_ECHOED``
    that its message repeats, longest first; none for an error of execution (with a ``path``)."""
    if error.path is not None or len(error.message) <= LONGEST_ECHOED:
        return []
    forms = set().union(*(_forms(node) for node in error.nodes or ()))
    return sorted((f for f in forms if len(f) > LONGEST_ECHOED and f in error.message), key=len, reverse=True)


def _too_long(error: GraphQLError) -> bool:
    return error.path is None and bool(error.nodes) and len(error.message) > LONGEST_MESSAGE


def is_oversized_literal_error(error: GraphQLError) -> bool:
    """Whether ``error`` is a validation error that repeats a literal or a name longer than
    ``LONGEST_ECHOED``, or whose message is longer than ``LONGEST_MESSAGE``, or one refusing an
    integer literal longer than Python converts."""
    node = _literal(error)
    return (node is not None and _oversized(error, node) is not None) or _too_long(error) or bool(_echoed(error))


def _cut(text: str, unit: str = "characters", shown: int = SHOWN_CHARACTERS) -> str:
    return f"{text[:shown]}... ({len(text)} {unit})"


def bounded_literal_error(error: GraphQLError) -> GraphQLError:
    """The error as a client sees it, at the same location with the same ``extensions``: each
    long literal or name its message repeats cut to its first ``SHOWN_CHARACTERS`` characters,
    "..." and its length ("... (100002 characters)"), then the message itself, if still longer
    than ``LONGEST_MESSAGE``, cut to that many characters the same way. An over-long integer literal gets, for ``Int``,
    graphql-core's out-of-range message ("Int cannot represent non 32-bit signed integer value:
    ..."), else "Expected value of type 'T', found: ..."; the literal cut to its sign,
    ``SHOWN_DIGITS`` digits, "..." and its digit count. Any other error is returned as it is."""
    node = _literal(error)
    type_name = None if node is None else _oversized(error, node)
    if type_name is not None:
        assert isinstance(node, IntValueNode)
        digits = node.value.lstrip("-")
        shown = f"{node.value[: len(node.value) - len(digits)]}{_cut(digits, 'digits', SHOWN_DIGITS)}"
        if type_name == "Int":
            message = f"Int cannot represent non 32-bit signed integer value: {shown}"
        else:
            message = f"Expected value of type '{type_name}', found: {shown}."
    else:
        message = error.message
        for form in _echoed(error):
            message = message.replace(form, _cut(form))
        if error.path is None and len(message) > LONGEST_MESSAGE:
            message = _cut(message, shown=LONGEST_MESSAGE)
        if message == error.message:
            return error
    return GraphQLError(
        message, nodes=error.nodes, source=error.source, positions=error.positions, extensions=error.extensions
    )


__all__ = [
    "LONGEST_ECHOED",
    "LONGEST_MESSAGE",
    "SHOWN_CHARACTERS",
    "SHOWN_DIGITS",
    "bounded_literal_error",
    "is_oversized_literal_error",
]
