"""The ``graphql-transport-ws`` handler of ``/graphql``: ``graphql_view.TransportWsHandler`` (a
credential's lifetime, fresh DataLoaders), with request errors answered as over HTTP.

An operation whose document cannot run (it does not parse, does not validate, or names an
operation it lacks; no ``query``) gets the protocol's ``error`` message, whose errors are the
ones HTTP answers, with their ``extensions.code`` (``graphql_view.request_error_code``):
``GRAPHQL_PARSE_FAILED``, ``GRAPHQL_VALIDATION_FAILED``, ``OPERATION_RESOLUTION_FAILURE``,
``BAD_REQUEST``. It ends that operation only; the socket and its other operations go on.
Strawberry closes the whole socket (4400) for a syntax error or an unknown operation name.

Strawberry's hook for it is private (``_handle_pre_execution_error``): ``missing()`` names what a
Strawberry upgrade removed; then the handler keeps Strawberry's behaviour and the app logs one
warning at start (``server.app``).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, cast

from graphql import GraphQLError, GraphQLFormattedError
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler, Operation
from strawberry.subscriptions.protocols.graphql_transport_ws.types import ErrorMessage
from strawberry.types.execution import PreExecutionError

from resolvers import Context

from .graphql_view import (
    OPERATION_RESOLUTION_FAILURE,
    TransportWsHandler,
    request_error_code,
)
from .http_errors import CODES

logger = logging.getLogger("runsgate.graphql")

NO_QUERY = "No GraphQL query found in the request"
"""The message of an operation without a ``query``: HTTP's 400 for a request without one."""

_PRIVATE_HOOKS = {"_handle_pre_execution_error": ("self", "operation", "result")}
"""Strawberry's private methods this handler overrides, with their parameters."""


def missing() -> list[str]:
    """The private hooks of Strawberry's handler that this module overrides and that are not
    there with the parameters it expects (empty: every one is)."""
    gone = []
    for name, parameters in _PRIVATE_HOOKS.items():
        hook = getattr(BaseGraphQLTransportWSHandler, name, None)
        if not inspect.iscoroutinefunction(hook) or tuple(inspect.signature(hook).parameters) != parameters:
            gone.append(f"BaseGraphQLTransportWSHandler.{name}")
    return gone


def formatted_request_error(error: GraphQLError) -> dict[str, Any]:
    """One error of a request error as HTTP answers it (``server.graphql_view``): Strawberry's
    formatting, with the ``extensions.code`` of ``request_error_code`` (an error's own code
    kept); an unknown or missing operation in graphql-core's words, as HTTP gives them."""
    original = error.original_error
    if isinstance(original, CannotGetOperationTypeError):
        message = (
            "Must provide an operation."
            if original.operation_name is None
            else f"Unknown operation named '{original.operation_name}'."
        )
        return {"message": message, "extensions": {"code": OPERATION_RESOLUTION_FAILURE}}
    if isinstance(original, MissingQueryError):
        return {"message": NO_QUERY, "extensions": {"code": CODES[400]}}
    formatted: dict[str, Any] = dict(error.formatted)
    extensions = dict(formatted.get("extensions") or {})
    if "code" not in extensions:
        code = request_error_code(error, before_execution=True)
        if code is not None:
            extensions["code"] = code
    if extensions:
        formatted["extensions"] = extensions
    return formatted


class WsHandler(TransportWsHandler):
    """runsgate's ``graphql-transport-ws`` handler (module docstring)."""

    async def _handle_pre_execution_error(self, operation: Operation[Context, None], result: PreExecutionError) -> None:
        """Answer a request error with the ``error`` message (module docstring), where Strawberry
        closes the socket for some."""
        payload = [cast(GraphQLFormattedError, formatted_request_error(error)) for error in result.errors or []]
        await operation.send_operation_message(ErrorMessage(id=operation.id, type="error", payload=payload))


__all__ = ["NO_QUERY", "WsHandler", "formatted_request_error", "missing"]
