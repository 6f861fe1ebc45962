"""Authentication in front of Strawberry's ASGI view, for HTTP and for WebSockets.

HTTP: every request on ``/graphql`` carries ``Authorization: Bearer <token>``, else 401 with
``WWW-Authenticate: Bearer`` (RFC 6750), before anything is parsed or run. A ``GET`` without
a ``query`` parameter executes nothing (it is GraphiQL's page, or an error) and needs no token.

WebSocket (``graphql-transport-ws``): the token comes in the ``connection_init`` payload as
``{"Authorization": "Bearer <token>"}``, or else in the upgrade request's header; without a
valid one it is closed with 4403, whose reason says what is missing (``WebSocketRefused``), and
no operation runs (Strawberry closes with 4401 any operation sent before the ``connection_ack``).
"""

from __future__ import annotations

import logging
from typing import cast

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send
from strawberry.types.unset import UNSET, UnsetType

from resolvers import Context

from ..auth import AuthenticationError, Authenticator, authorization_header
from ..http.http_errors import refusal
from ..observability.logs import has_credential_parameter

logger = logging.getLogger("runsgate.auth")

PRINCIPAL_KEY = "runsgate.principal"
"""Key of the authenticated principal in the ASGI scope of an HTTP request (``AuthenticatedView``
puts it there before the view runs; none: no token was asked for, or a WebSocket)."""


def unauthorized(error: AuthenticationError) -> JSONResponse:
    """401 with ``WWW-Authenticate: Bearer`` (``error="invalid_token"`` when a token was sent), or
    400 with ``error="invalid_request"`` when the request repeated it (RFC 6750 3.1)."""
    challenge = 'Bearer realm="runsgate"'
    if error.token_given:
        code = "invalid_request" if error.malformed else "invalid_token"
        challenge += f', error="{code}", error_description="{error.message}"'
    return refusal(error.message, 400 if error.malformed else 401, headers={"WWW-Authenticate": challenge})


WS_CREDENTIAL = '{"Authorization": "Bearer <token>"}'
"""What a ``connection_init`` payload carries to authenticate its WebSocket."""

MAX_CLOSE_REASON_BYTES = 123
"""The longest close reason a WebSocket close frame holds (RFC 6455 5.5: 125 bytes of payload)."""


class WebSocketRefused(Exception):
    """A WebSocket refused at ``connection_init`` for its credentials: ``reason`` is the close
    reason of its 4403, "Forbidden: " and the ``AuthenticationError``'s message, or, when no
    token came, where to send one (``WS_CREDENTIAL``); never the token, at most
    ``MAX_CLOSE_REASON_BYTES`` of UTF-8. ``server.view.ws_handler.WsHandler`` closes the socket."""

    def __init__(self, error: AuthenticationError) -> None:
        told = error.message if error.token_given else f"send {WS_CREDENTIAL} in the connection_init payload"
        reason = f"Forbidden: {told}".encode()[:MAX_CLOSE_REASON_BYTES].decode(errors="ignore")
        super().__init__(reason)
        self.reason = reason


class AuthenticatedView:
    """Mixin for ``strawberry.asgi.GraphQL``: authenticates before Strawberry runs anything.

    The subclass sets ``authenticator`` before serving.
    """

    authenticator: Authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        query_string: bytes = scope.get("query_string", b"")
        parameter = has_credential_parameter(query_string.decode("latin-1")) if query_string else None
        if parameter is not None:
            await _credential_in_query(scope, receive, send, parameter)
            return
        if scope["type"] == "http" and not _executes_nothing(scope):
            request = Request(scope, receive)
            try:
                header = authorization_header(request.headers.getlist("authorization"))
                scope[PRINCIPAL_KEY] = await self.authenticator.authenticate(header)
            except AuthenticationError as error:
                await unauthorized(error)(scope, receive, send)
                return
        await super().__call__(scope, receive, send)  # type: ignore[misc]

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        """Authenticate a WebSocket at ``connection_init`` (payload first, then the upgrade header).

        Raises:
            WebSocketRefused: No valid credentials (the socket is closed with 4403 and its reason).
        """
        params = context.connection_params if isinstance(context.connection_params, dict) else {}
        header = params.get("Authorization", params.get("authorization"))
        try:
            if header is None and context.request is not None:
                header = authorization_header(context.request.headers.getlist("authorization"))
            principal = await self.authenticator.authenticate(header if isinstance(header, str) else None)
        except AuthenticationError as error:
            raise WebSocketRefused(error) from None
        context.authenticated(principal)
        return cast(UnsetType, UNSET)


async def _credential_in_query(scope: Scope, receive: Receive, send: Send, parameter: str) -> None:
    """Refuse a request carrying a credential in its query string (``server.observability.logs.CREDENTIAL_PARAMETERS``):
    400 naming the parameter, or a WebSocket upgrade refused (403), before anything runs."""
    logger.info("request refused: credential in the query string parameter %r", parameter)
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 4400, "reason": ""})
        return
    message = (
        f"the query string parameter {parameter!r} looks like a credential: send credentials only in the "
        "Authorization header (or a WebSocket's connection_init), never in a URL"
    )
    await refusal(message)(scope, receive, send)


def _executes_nothing(scope: Scope) -> bool:
    """A ``GET`` without ``query``: GraphiQL's page, or an error; nothing is executed."""
    if scope.get("method") != "GET":
        return False
    query_string: bytes = scope.get("query_string", b"")
    from urllib.parse import parse_qs

    return "query" not in parse_qs(query_string.decode("latin-1"), keep_blank_values=True)


__all__ = [
    "MAX_CLOSE_REASON_BYTES",
    "PRINCIPAL_KEY",
    "WS_CREDENTIAL",
    "AuthenticatedView",
    "WebSocketRefused",
    "unauthorized",
]
