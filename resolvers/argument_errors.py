"""``QueryArgumentError``, in a module of its own so that any resolver module can raise it
(``resolvers.errors`` imports ``resolvers.types``, so the types cannot import from it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphql import GraphQLError, Node


class QueryArgumentError(GraphQLError):
    """A rejected query argument: a GraphQL error with ``extensions.code`` and ``extensions.argument``,
    located at ``nodes`` when given (a refusal before execution names the argument's value)."""

    def __init__(
        self, message: str, *, argument: str, code: str = "BAD_USER_INPUT", nodes: Sequence[Node] | None = None
    ) -> None:
        extensions: dict[str, Any] = {"code": code, "argument": argument}
        super().__init__(message, nodes=nodes, extensions=extensions)


__all__ = ["QueryArgumentError"]
