"""Request errors: a request that never executed (it does not parse, does not validate, names an
operation it lacks, sends a subscription over HTTP, or has variables that do not coerce), and
the ``extensions.code`` of each of its errors (``request_error_code``), as HTTP answers them
(``server.view.conformance``) and WebSocket ``error`` messages too (``server.view.ws_handler``).
Why: docs/api.md "GraphQL over HTTP"."""

from __future__ import annotations

from graphql import GraphQLError, GraphQLSyntaxError
from strawberry.http import GraphQLHTTPResponse
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError

from resolvers.documents.operation_name import CODE as OPERATION_NAME_CODE

SUBSCRIPTIONS_OVER_WEBSOCKET = (
    "Subscriptions are served over WebSocket (the graphql-transport-ws protocol on /graphql), not over HTTP."
)
"""The request error answering a subscription sent as an HTTP request (GET or POST)."""


def is_request_error(result: ExecutionResult) -> bool:
    """True when the operation never executed: no data, and only errors without a ``path``.

    Parse, validation and variable coercion errors carry no path; an error raised by a field
    always has one, even when it nulls the whole ``data``.
    """
    return result.data is None and bool(result.errors) and all(error.path is None for error in result.errors or [])


GRAPHQL_PARSE_FAILED = "GRAPHQL_PARSE_FAILED"
GRAPHQL_VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"
BAD_USER_INPUT = "BAD_USER_INPUT"
OPERATION_RESOLUTION_FAILURE = OPERATION_NAME_CODE
SUBSCRIPTIONS_OVER_WEBSOCKET_CODE = "SUBSCRIPTIONS_OVER_WEBSOCKET"
"""The ``extensions.code`` of each kind of request error (``request_error_code``): Apollo
Server's names, and ``SUBSCRIPTIONS_OVER_WEBSOCKET`` for a subscription sent over HTTP."""


class OperationResolutionError(GraphQLError):
    """A request error: the document has no operation of the ``operationName`` given, or no
    operation at all (``OPERATION_RESOLUTION_FAILURE``)."""


class SubscriptionOverHTTPError(GraphQLError):
    """A request error: a subscription sent over HTTP (``SUBSCRIPTIONS_OVER_WEBSOCKET``)."""


def request_error_code(error: GraphQLError, *, before_execution: bool) -> str | None:
    """The ``extensions.code`` of an error of a request error (``is_request_error``), or None for
    a fault while parsing or validating (an exception Strawberry wrapped, located nowhere in the
    document; a literal its scalar refuses is located, so the client's).

    By type: ``GraphQLSyntaxError`` is ``GRAPHQL_PARSE_FAILED``; ``OperationResolutionError`` (an
    unknown operation name, no operation) is ``OPERATION_RESOLUTION_FAILURE``, as is the error of
    ``resolvers.documents.operation_name``, which carries that code itself;
    ``SubscriptionOverHTTPError`` is ``SUBSCRIPTIONS_OVER_WEBSOCKET``. Otherwise by the step that
    refused the request: ``before_execution`` (parsing and validation) is
    ``GRAPHQL_VALIDATION_FAILED``; the execution step, which refuses a request only while
    coercing its variables (``ExecutionContext.build``), is ``BAD_USER_INPUT``.
    """
    if isinstance(error, GraphQLSyntaxError):
        return GRAPHQL_PARSE_FAILED
    if isinstance(error, OperationResolutionError):
        return OPERATION_RESOLUTION_FAILURE
    if isinstance(error, SubscriptionOverHTTPError):
        return SUBSCRIPTIONS_OVER_WEBSOCKET_CODE
    if before_execution:
        fault = error.original_error is not None and not error.nodes
        return None if fault else GRAPHQL_VALIDATION_FAILED
    return BAD_USER_INPUT


def with_request_error_codes(result: ExecutionResult, response: GraphQLHTTPResponse) -> None:
    """Give each error of ``response`` (request error ``result`` as Strawberry formatted it) the
    code of ``request_error_code``, keeping any code an error has.

    The formatted errors get new ``extensions``: the ``GraphQLError`` objects, which the parse and
    validation caches may share between requests, are left as they are.
    """
    before_execution = isinstance(result, PreExecutionError)
    coded: list[object] = []
    for error, formatted in zip(result.errors or [], response.get("errors") or [], strict=True):
        code = None
        if isinstance(formatted, dict):
            extensions = formatted.get("extensions") or {}
            if "code" not in extensions:
                code = request_error_code(error, before_execution=before_execution)
            if code is not None:
                formatted = {**formatted, "extensions": {**extensions, "code": code}}
        coded.append(formatted)
    response["errors"] = coded
