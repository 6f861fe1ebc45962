"""A document of several operations needs ``operationName`` (GraphQL spec, "GetOperation").

``OperationNameRequired`` makes such a request without ``operationName`` a request error before
anything executes (Strawberry would run the first operation). The transport sets the request's
name with ``set_requested_operation_name`` in the task that executes it; where nothing set it,
nothing is checked. Why: docs/architecture.md "Requests and answers".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import ContextVar
from typing import Final

from graphql import GraphQLError, OperationDefinitionNode
from strawberry.extensions import SchemaExtension

MESSAGE: Final = "Must provide operation name if query contains multiple operations."
CODE: Final = "OPERATION_RESOLUTION_FAILURE"
"""The ``extensions.code`` of that error, over HTTP and WebSocket (Apollo Server's name)."""
"""graphql-core's own message for the case (``graphql.execution.execute``)."""

_UNKNOWN: Final = object()
_REQUESTED: ContextVar[object] = ContextVar("runsgate_requested_operation_name", default=_UNKNOWN)


def set_requested_operation_name(name: str | None) -> None:
    """Record the ``operationName`` the request being executed in this task gave (``None``: none)."""
    _REQUESTED.set(name)


class OperationNameRequired(SchemaExtension):
    """Refuse, at validation, a document of more than one operation sent without
    ``operationName``: a request error (no ``data``; 400 for clients of the GraphQL over HTTP
    media type), with ``MESSAGE``, and nothing executed.

    Runs after ``ValidationCache`` (which sets the validation errors), adding its error to theirs.
    """

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        if (
            document is not None
            and _REQUESTED.get() is None
            and sum(isinstance(definition, OperationDefinitionNode) for definition in document.definitions) > 1
        ):
            refused = GraphQLError(MESSAGE, extensions={"code": CODE})
            context.pre_execution_errors = [*(context.pre_execution_errors or []), refused]
        yield


__all__ = ["CODE", "MESSAGE", "OperationNameRequired", "set_requested_operation_name"]
