"""The ``/graphql`` view: Strawberry's ASGI view, speaking the GraphQL-over-HTTP spec
(``GraphQLOverHTTP``, ``server.view.conformance``), decoding each request's JSON once and
strictly (``parse_json``, ``decode_json``), answering within a budget in bytes
(``server.http.encoding.EncodedAnswer``), serving one JSON object by a shorter path (``PreparedView``) and GraphiQL
offline (``server.view.graphiql``); and its ``graphql-transport-ws`` handler's base
(``TransportWsHandler``). ``/graphql`` serves GET and POST (``GRAPHQL_METHODS``). Why:
docs/api.md and docs/architecture.md "Requests and answers".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.websockets import WebSocket
from starlette.websockets import WebSocketDisconnected as SocketClosed
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler, Operation
from strawberry.types import ExecutionResult
from strawberry.types.unset import UNSET

from resolvers import Context, begin_operation
from resolvers.documents.operation_name import set_requested_operation_name
from storage import strict_json

from ..http.encoding import CHUNK, EncodedAnswer, encoded_answer
from .conformance import JSON, GraphQLOverHTTP
from .graphiql import offline_graphiql_html

if TYPE_CHECKING:
    from .prepared_http import PreparedRequests

logger = logging.getLogger("runsgate.graphql")

CREDENTIALS_EXPIRED = "Forbidden: credentials expired"
"""The reason of the 4403 that closes a WebSocket when its credential expires."""


_DECODED: ContextVar[tuple[object, object, json.JSONDecodeError | None] | None] = ContextVar(
    "runsgate_decoded_body", default=None
)
"""The last body ``GraphQLView.parse_json`` decoded in this task, its value and its error."""


DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""``RUNSGATE_MAX_RESPONSE_BYTES``' default: the most bytes one answer may take (4 MiB)."""


class TransportWsHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """Strawberry's ``graphql-transport-ws`` handler, held to the lifetime of its credential and
    with fresh DataLoaders for each operation (the socket's ``Context`` lives as long as the
    connection; its caches must not).

    A credential that expires (a JWT's ``exp``, ``Principal.expires_at``) closes the socket
    with 4403 at that instant, which ends every operation still running (subscriptions
    included); an operation that arrives after it is refused the same way.

    A send that finds the socket closed (the client went away, as a client may at any time) ends
    its operation with one DEBUG line: no ERROR, no traceback (``handle_task_exception``).
    """

    _expiry: asyncio.Task[None] | None = None

    async def handle_connection_init(self, message: Any) -> None:
        await super().handle_connection_init(message)
        expires_at = self.context.principal.expires_at
        if self.connection_acknowledged and expires_at is not None and self._expiry is None:
            self._expiry = asyncio.create_task(self._close_at(expires_at))

    async def _close_at(self, expires_at: datetime) -> None:
        await asyncio.sleep(max((expires_at - datetime.now(UTC)).total_seconds(), 0.0))
        await self._close_expired()

    async def _close_expired(self) -> None:
        logger.info("WebSocket closed: its credential expired")
        with contextlib.suppress(Exception):  # the socket may be closing already
            await self.websocket.close(code=4403, reason=CREDENTIALS_EXPIRED)

    async def handle_subscribe(self, message: Any) -> None:
        expires_at = self.context.principal.expires_at
        if expires_at is not None and expires_at <= datetime.now(UTC):
            await self._close_expired()
            return
        await super().handle_subscribe(message)

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        begin_operation(self.context)  # in the operation's own task
        set_requested_operation_name(operation.operation_name)  # for OperationNameRequired
        await super().run_operation(operation)

    async def shutdown(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        await super().shutdown()

    async def send_message(self, message: Any) -> None:
        """Strawberry's, with each ``next`` message (a query's answer, a subscription's event)
        encoded within ``GraphQLView.max_response_bytes``; one past it is sent as the refusal
        ``RESPONSE_TOO_LARGE`` in its place (``encoded_answer``)."""
        if isinstance(message, dict) and message.get("type") == "next" and isinstance(self.view, GraphQLView):
            message = await encoded_answer(message, self.view.max_response_bytes, message=True)
        try:
            await super().send_message(message)
        except SocketClosed as closed:  # starlette's, once a send (another operation's) found the socket gone
            raise WebSocketDisconnected from closed  # Strawberry's, as for the send that found it

    async def handle_task_exception(self, error: Exception) -> None:
        """Strawberry's (ERROR, with the traceback), but for ``WebSocketDisconnected``: the client
        closed the socket while an operation was sending, which ends that operation (DEBUG)."""
        if isinstance(error, WebSocketDisconnected):
            logger.debug("WebSocket operation ended: the client closed the socket")
            return
        await super().handle_task_exception(error)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")

_PARSING: ContextVar[str] = ContextVar("runsgate_parsing", default="body")
"""What ``GraphQLView.parse_json`` decodes in this task: the request body, or a query parameter."""


def _unparsable(what: str, reason: str | None) -> str:
    """Strawberry's 400 text for JSON it cannot parse, with the reason when runsgate refused it."""
    text = "Unable to parse request body as JSON" if what == "body" else "Unable to parse a query parameter as JSON"
    return text if reason is None else f"{text}: {reason}"


class RefusedJson(json.JSONDecodeError):
    """``decode_json``'s refusal; ``reason`` says why in a few words (``None``: malformed text)."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(f"request JSON is not strict JSON: {reason or 'malformed'}", "", 0)
        self.reason = reason


def _refusal(exc: BaseException) -> str | None:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, strict_json.NotStrictJsonError):
        if "twice" in str(exc):
            return f"{exc} (each name of a JSON object once, RFC 7493)"
        return f"{exc} (RFC 8259 JSON has no NaN, Infinity or number beyond a double)"
    if isinstance(exc, UnicodeEncodeError):
        return "a string holds a lone UTF-16 surrogate"
    if isinstance(exc, json.JSONDecodeError):
        return None
    return "a number has more digits than allowed" if "digits" in str(exc) else None


class PreparedView(GraphQL[Context, None]):
    """Strawberry's ASGI view serving one JSON object's query or mutation by a shorter path
    (``run_prepared``)."""

    prepared: PreparedRequests | None = None
    """The fast path's HTTP half (``server.view.prepared_http``), set by ``server.app.create_app``
    when the schema has prepared operations; None: Strawberry's ``run`` serves every request."""
    prepared_requests: int = 0
    """Requests served by ``run_prepared``, prepared or not (tests and benchmarks read it)."""

    async def run(
        self,
        request: Request | WebSocket,
        context: Context = UNSET,
        root_value: None = UNSET,
    ) -> Any:
        """One JSON object's query or mutation through ``run_prepared``; any other request as
        Strawberry's ``run``.
        Then the request's contexts let go of what their DataLoaders read (``Context.release``)."""
        try:
            if isinstance(request, Request) and context is UNSET and root_value is UNSET:
                response = await self.run_prepared(request)
                if response is not None:
                    return response
            return await super().run(request, context, root_value)
        finally:
            if isinstance(request, Request):
                for made in getattr(request.state, "graphql_contexts", ()):
                    made.release()
                request.state.graphql_contexts = []

    async def run_prepared(self, request: Request) -> Response | None:
        """The fast path's response to a request ``prepared.serve`` takes (one JSON object), when
        the view has one (``RUNSGATE_COMPILED_EXECUTION``); None for any other request, which
        Strawberry's ``run`` then serves (a context ``serve`` made for it is released with the
        others)."""
        if self.prepared is None:
            return None
        response = await self.prepared.serve(self, request)
        if response is not None:
            self.prepared_requests += 1
        return response


class GraphQLView(GraphQLOverHTTP, PreparedView):
    """Strawberry's ASGI view with the spec's response media type (``GraphQLOverHTTP``), answers
    within their budget in bytes, an offline GraphiQL, and a shorter path for a JSON object's
    query or mutation (``PreparedView.run_prepared``). ``GraphQLOverHTTP`` comes first among its bases, so that its
    ``run`` holds the fast path's answers to the spec too."""

    graphql_transport_ws_handler_class = TransportWsHandler

    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    """The most bytes one HTTP response (a batch's answers together) or WebSocket message may
    take (``RUNSGATE_MAX_RESPONSE_BYTES``, set by ``server.app.create_app``)."""

    async def process_result(self, request: Request, result: ExecutionResult) -> GraphQLHTTPResponse:
        """The response as ``GraphQLOverHTTP.process_result`` makes it (a request error without
        ``data``, its errors coded), encoded within what is left of the response's
        ``max_response_bytes`` (an ``EncodedAnswer``; past it, the refusal
        ``RESPONSE_TOO_LARGE``). The fast path's responses (``server.view.prepared_http``) are
        made here too."""
        response = await super().process_result(request, result)
        left = getattr(request.state, "response_bytes_left", self.max_response_bytes)
        encoded = await encoded_answer(dict(response), max(left, 0))
        request.state.response_bytes_left = left - encoded.size
        return encoded  # type: ignore[return-value]

    def encode_json(self, data: object) -> str | bytes:
        """An ``EncodedAnswer``'s chunks, joined; anything else (a WebSocket message, a streamed
        result) through orjson rather than ``json.dumps``, for speed.

        Returned as text: Strawberry sends bytes over a WebSocket as a binary frame, and
        ``graphql-transport-ws`` clients (graphql-ws) only read text frames. What orjson refuses
        (an integer beyond 64 bits in a tool call's ``args``) goes through ``json``. Both write
        RFC 8259 JSON: a float that is not finite (only a document an older runsgate stored can
        hold one) is ``null`` (``storage.strict_json.dumps_shown``).
        """
        if isinstance(data, EncodedAnswer):
            return b"".join(data.chunks).decode()
        try:
            return orjson.dumps(data).decode()
        except TypeError:
            return strict_json.dumps_shown(data)

    def create_response(
        self, response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse], sub_response: Response
    ) -> Response:
        """Strawberry's response, sending the chunks of the ``EncodedAnswer``s that
        ``process_result`` made, with their total as ``Content-Length``; a batch is a JSON array
        of them. Up to ``CHUNK`` bytes in all, one body (a plain ``Response``: no streaming task
        waiting for the client's disconnect beside it); more, one chunk at a time, each let go
        once sent."""
        answers = response_data if isinstance(response_data, list) else [response_data]
        if not all(isinstance(answer, EncodedAnswer) for answer in answers):
            return super().create_response(response_data, sub_response)
        parts: list[bytes] = []
        for index, answer in enumerate(answers):
            assert isinstance(answer, EncodedAnswer)
            if isinstance(response_data, list):
                parts.append(b"[" if index == 0 else b",")
            parts.extend(answer.chunks)
        if isinstance(response_data, list):
            parts.append(b"]" if answers else b"[]")

        length = sum(map(len, parts))
        response: Response
        if length <= CHUNK:
            response = Response(b"".join(parts), media_type=JSON)
        else:

            async def body() -> AsyncIterator[bytes]:
                parts.reverse()
                while parts:
                    yield parts.pop()

            response = StreamingResponse(body(), media_type=JSON, headers={"content-length": str(length)})
        response.headers.raw.extend(sub_response.headers.raw)
        if sub_response.background:
            response.background = sub_response.background
        if sub_response.status_code:
            response.status_code = sub_response.status_code
        return response

    def parse_json(self, data: str | bytes) -> Any:
        """Strawberry's ``parse_json`` (``decode_json``; 400 for a body that is not JSON), decoding
        each request body once: the fast path (``run_prepared``), the shape checks of
        ``parse_http_body`` and Strawberry's own parsing all ask for the same body object, and
        get the value (or the error) of its first decoding in this task."""
        known = _DECODED.get()
        if known is None or known[0] is not data:
            try:
                known = (data, self.decode_json(data), None)
            except json.JSONDecodeError as error:
                known = (data, None, error)
            _DECODED.set(known)
        if known[2] is not None:
            reason = getattr(known[2], "reason", None)
            raise HTTPException(400, _unparsable(_PARSING.get(), reason)) from known[2]
        return known[1]

    def decode_json(self, data: str | bytes) -> object:
        """Strict JSON for request bodies, GET variables and WebSocket messages.

        Refused (``json.JSONDecodeError``, so HTTP answers 400 and a WebSocket closes with 4400):
        what is not RFC 8259 JSON (``storage.strict_json.loads``: malformed text, ``NaN``,
        ``Infinity``, a number beyond a double such as ``1e999``, a name twice in one object),
        numbers longer than Python's int limit, nesting deeper than the parser's recursion limit,
        and strings with a lone UTF-16 surrogate (``"\\ud800"``), which no store could encode.
        """
        try:
            value = strict_json.loads(data)
            escapes = _SURROGATE_ESCAPE_BYTES if isinstance(data, bytes) else _SURROGATE_ESCAPE
            if escapes.search(data):  # type: ignore[arg-type]
                json.dumps(value, ensure_ascii=False).encode("utf-8")  # UnicodeEncodeError on a lone surrogate
        except (ValueError, RecursionError) as exc:
            raise RefusedJson(_refusal(exc)) from None
        return value

    def parse_query_params(self, params: Any) -> dict[str, Any]:
        """Strawberry's, with a 400 for a ``variables`` or ``extensions`` parameter that is not
        JSON naming that parameter (not "request body")."""
        token = _PARSING.set("query")
        try:
            return super().parse_query_params(params)
        finally:
            _PARSING.reset(token)

    async def render_graphql_ide(self, request: Request) -> HTMLResponse:
        """Strawberry's GraphiQL page, loading its files from ``GRAPHIQL_ASSETS_PATH``."""
        return HTMLResponse(offline_graphiql_html(self.graphql_ide_html, request.scope.get("root_path", "")))
