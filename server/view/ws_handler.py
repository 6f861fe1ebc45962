"""The ``graphql-transport-ws`` handler of ``/graphql`` (``WsHandler``, on ``graphql_view.TransportWsHandler``).
- A message of a shape the protocol does not define closes the socket with 4400 naming the field; a
  document that cannot run, or whose variables do not coerce, gets the ``error`` message with HTTP's
  errors and ``extensions.code`` (``request_errors.request_error_code``), and the socket goes on.
- ``PrincipalStreams`` bounds what one principal holds open: one operation past
  ``RUNSGATE_MAX_WS_OPERATIONS`` (a socket) or ``..._PER_PRINCIPAL`` (all its sockets) is the
  ``error`` message ``TOO_MANY_OPERATIONS``; one socket past ``RUNSGATE_MAX_WS_CONNECTIONS_PER_PRINCIPAL``
  is closed at ``connection_init`` with 1013 (Try Again Later, RFC 6455), which clients retry.
- Strawberry's private hooks it overrides (``_PRIVATE_HOOKS``) are checked at start (``missing()``):
  without one, Strawberry's behaviour stays there and the app logs a warning.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

from graphql import GraphQLError, GraphQLFormattedError
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler, Operation
from strawberry.subscriptions.protocols.graphql_transport_ws.types import ErrorMessage
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError

from resolvers import Context
from resolvers.documents.executor import VariableCoercionError

from ..http.http_errors import CODES
from .authenticated import WebSocketRefused
from .graphql_view import TransportWsHandler
from .request_errors import (
    OPERATION_RESOLUTION_FAILURE,
    request_error_code,
)

logger = logging.getLogger("runsgate.graphql")

NO_QUERY = "No GraphQL query found in the request"
"""The message of an operation without a ``query``: HTTP's 400 for a request without one."""
TOO_MANY_OPERATIONS = "TOO_MANY_OPERATIONS"
"""The ``extensions.code`` of an operation refused for the operations already in flight."""
TRY_AGAIN_LATER = 1013
"""The close code of a WebSocket one more than its principal may have (RFC 6455's registry)."""
FORBIDDEN = 4403
"""graphql-transport-ws' close code of a socket whose ``connection_init`` lacks valid credentials."""

_PRIVATE_HOOKS = {
    "_handle_pre_execution_error": ("self", "operation", "result"),
    "_send_result_stream": ("self", "operation", "result_source"),
}
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
    """One error of a request error as HTTP answers it (``server.view.conformance``): Strawberry's
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


_OPTIONAL_OBJECTS = {"connection_init": ("payload",), "ping": ("payload",), "pong": ("payload",)}
"""The fields of the messages without an operation that are an object or null when present."""
_SUBSCRIBE_PAYLOAD = (("query", str), ("variables", dict), ("operationName", str), ("extensions", dict))
"""A ``subscribe`` payload's fields and their JSON type (each may be null; a missing query is
answered as HTTP answers a request without one)."""


def message_problem(message: Any) -> str | None:
    """What makes ``message`` (parsed JSON) no ``graphql-transport-ws`` message, or ``None``: the
    protocol closes the socket with 4400 for such a message, and the reason names the field."""
    if not isinstance(message, dict):
        return "A graphql-transport-ws message must be a JSON object"
    kind = message.get("type")
    if not isinstance(kind, str):
        return "A message's `type` must be a string"
    for name in _OPTIONAL_OBJECTS.get(kind, ()):
        if message.get(name) is not None and not isinstance(message[name], dict):
            return f"A {kind} message's `{name}` must be an object or null"
    if kind in ("subscribe", "complete") and not isinstance(message.get("id"), str):
        return f"A {kind} message's `id` must be a string"
    if kind == "subscribe":
        payload = message.get("payload")
        if not isinstance(payload, dict):
            return "A subscribe message's `payload` must be an object"
        for name, json_type in _SUBSCRIBE_PAYLOAD:
            if payload.get(name) is not None and not isinstance(payload[name], json_type):
                kind_of = "a string" if json_type is str else "an object"
                return f"A subscribe message's `payload.{name}` must be {kind_of} or null"
    return None


def _not_coerced(result: ExecutionResult) -> bool:
    """Whether ``result`` is an operation that never ran: its variables do not coerce."""
    return (
        result.data is None
        and bool(result.errors)
        and all(isinstance(error, VariableCoercionError) for error in result.errors or [])
    )


async def _after(first: Any, rest: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    """``first``, then what ``rest`` yields."""
    yield first
    async for result in rest:
        yield result


class TooManyWebSocketsError(Exception):
    """A principal already has as many WebSockets as it may (``PrincipalStreams.admit``)."""


@dataclass
class _Principal:
    sockets: int = 0
    operations: int = 0


@dataclass
class PrincipalStreams:
    """The WebSockets and operations each principal has open on this process, bounded
    (``StreamSettings``); the counts of all of them (``/metrics``)."""

    max_sockets: int
    max_operations: int
    _by_identity: dict[str, _Principal] = field(default_factory=dict)
    _admitted: dict[int, str] = field(default_factory=dict)
    """``id`` of an admitted socket's context -> its principal's identity."""
    sockets: int = 0
    operations: int = 0

    def _of(self, identity: str) -> _Principal:
        return self._by_identity.setdefault(identity, _Principal())

    def _forget_if_idle(self, identity: str) -> None:
        found = self._by_identity.get(identity)
        if found is not None and not found.sockets and not found.operations:
            del self._by_identity[identity]

    def admit(self, context: Context) -> None:
        """Count the socket of ``context`` for its principal (once).

        Raises:
            TooManyWebSocketsError: The principal has ``max_sockets`` already.
        """
        if id(context) in self._admitted:
            return
        identity = context.principal.identity
        mine = self._of(identity)
        if mine.sockets >= self.max_sockets:
            self._forget_if_idle(identity)
            raise TooManyWebSocketsError(
                f"Try Again Later: this principal has {mine.sockets} WebSockets open, the most it may "
                "(RUNSGATE_MAX_WS_CONNECTIONS_PER_PRINCIPAL)"
            )
        mine.sockets += 1
        self.sockets += 1
        self._admitted[id(context)] = identity

    def leave(self, context: Context) -> None:
        """The socket of ``context`` ended (a no-op for one never admitted)."""
        identity = self._admitted.pop(id(context), None)
        if identity is not None:
            self._of(identity).sockets -= 1
            self.sockets -= 1
            self._forget_if_idle(identity)

    def start_operation(self, identity: str) -> bool:
        """Count one operation of ``identity``; ``False`` (nothing counted) when it has
        ``max_operations`` in flight already."""
        mine = self._of(identity)
        if mine.operations >= self.max_operations:
            self._forget_if_idle(identity)
            return False
        mine.operations += 1
        self.operations += 1
        return True

    def end_operation(self, identity: str) -> None:
        """One operation of ``identity`` ended."""
        self._of(identity).operations -= 1
        self.operations -= 1
        self._forget_if_idle(identity)


def too_many_operations(count: int, setting: str, what: str) -> GraphQLError:
    """The error refusing an operation past ``count`` in flight on ``what``, naming ``setting``."""
    return GraphQLError(
        f"{what} has {count} operations in flight, the most it may ({setting}): complete one first",
        extensions={"code": TOO_MANY_OPERATIONS, "limit": count},
    )


class WsHandler(TransportWsHandler):
    """runsgate's ``graphql-transport-ws`` handler (module docstring); its view's ``streams`` is
    the process's ``PrincipalStreams`` (none: no bound per principal)."""

    @property
    def _streams(self) -> PrincipalStreams | None:
        streams = getattr(self.view, "streams", None)
        return streams if isinstance(streams, PrincipalStreams) else None

    async def handle_message(self, message: Any) -> None:
        """Strawberry's, for a message of the protocol's shape; any other closes the socket with
        4400 and the field it gets wrong (``message_problem``), where Strawberry's would raise."""
        problem = message_problem(message)
        if problem is not None:
            await self.handle_invalid_message(problem)
            return
        await super().handle_message(message)

    async def handle_connection_init(self, message: Any) -> None:
        """Strawberry's, whose ``on_ws_connect`` (``server.app.GraphQLApp``) authenticates the
        socket and admits it for its principal, or refuses it: closed with 4403 and the reason
        of ``WebSocketRefused`` (what the credential lacks), or with 1013 (module docstring)."""
        try:
            await super().handle_connection_init(message)
        except WebSocketRefused as refused:
            logger.info("WebSocket refused: %s", refused.reason)
            await self.websocket.close(code=FORBIDDEN, reason=refused.reason)
        except TooManyWebSocketsError as refused:
            logger.info("WebSocket refused: %s", refused)
            await self.websocket.close(code=TRY_AGAIN_LATER, reason=str(refused)[:120])

    async def handle_subscribe(self, message: Any) -> None:
        """Strawberry's, with its refusal of an operation past ``RUNSGATE_MAX_WS_OPERATIONS`` on
        this socket coded as the principal's is (``TOO_MANY_OPERATIONS``)."""
        limit = self.max_subscriptions_per_connection
        if (
            self.connection_acknowledged
            and limit is not None
            and len(self.operations) >= limit
            and message.get("id") not in self.operations
        ):
            error = too_many_operations(limit, "RUNSGATE_MAX_WS_OPERATIONS", "this WebSocket")
            await self.send_message(ErrorMessage(id=message["id"], type="error", payload=[error.formatted]))
            return
        await super().handle_subscribe(message)

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        """Run ``operation`` unless its principal has ``RUNSGATE_MAX_WS_OPERATIONS_PER_PRINCIPAL``
        in flight already over all its sockets (then the ``error`` message ``TOO_MANY_OPERATIONS``)."""
        streams = self._streams
        if streams is None:
            await super().run_operation(operation)
            return
        identity = self.context.principal.identity
        if not streams.start_operation(identity):
            error = too_many_operations(
                streams.max_operations, "RUNSGATE_MAX_WS_OPERATIONS_PER_PRINCIPAL", "this principal"
            )
            logger.info("WebSocket operation refused: %s", error.message)
            await operation.send_initial_errors([error])
            return
        try:
            await super().run_operation(operation)
        finally:
            streams.end_operation(identity)

    async def shutdown(self) -> None:
        try:
            await super().shutdown()
        finally:
            if self._streams is not None:
                self._streams.leave(self.context)

    async def _send_result_stream(self, operation: Operation[Context, None], result_source: Any) -> None:
        """Strawberry's, but a first result of variables that do not coerce (a query's or a
        mutation's, which Strawberry sends as ``next``) is answered as
        ``_handle_pre_execution_error`` answers a request error."""
        results = aiter(result_source)
        first = await anext(results, None)
        if first is None:
            return
        if type(first) is ExecutionResult and _not_coerced(first):
            await self._handle_pre_execution_error(operation, PreExecutionError(data=None, errors=first.errors))
            return
        await super()._send_result_stream(operation, _after(first, results))

    async def _handle_pre_execution_error(self, operation: Operation[Context, None], result: PreExecutionError) -> None:
        """Answer a request error with the ``error`` message (module docstring), where Strawberry
        closes the socket for some."""
        payload = [cast(GraphQLFormattedError, formatted_request_error(error)) for error in result.errors or []]
        await operation.send_operation_message(ErrorMessage(id=operation.id, type="error", payload=payload))


__all__ = [
    "NO_QUERY",
    "TOO_MANY_OPERATIONS",
    "TRY_AGAIN_LATER",
    "PrincipalStreams",
    "TooManyWebSocketsError",
    "WsHandler",
    "formatted_request_error",
    "message_problem",
    "missing",
    "too_many_operations",
]
