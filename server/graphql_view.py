"""The ``/graphql`` view: Strawberry's ASGI view, speaking the GraphQL-over-HTTP spec and serving GraphiQL offline.

A client accepting ``application/graphql-response+json`` gets it, and a request error then gets
400 (``application/json`` clients keep 200); a request error's response has no ``data``, and each
of its errors an ``extensions.code`` (``request_error_code``). ``/graphql`` serves GET and POST
(``GRAPHQL_METHODS``): every 405 says so in ``Allow``, and a mutation sent by GET is a 405 with
``Allow: POST``. The GraphiQL page loads runsgate's own copies of its files
(``server/static/graphiql``), keeping their ``integrity`` hashes. Why: docs/api.md and
docs/modules.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from cross_web import AsyncHTTPRequestAdapter, HTTPException
from graphql import GraphQLError, GraphQLSyntaxError
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import MissingQueryError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.http.parse_content_type import parse_content_type
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler, Operation
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET

from resolvers import Context, begin_operation
from resolvers.operation_name import CODE as OPERATION_NAME_CODE
from resolvers.operation_name import set_requested_operation_name

from .encoding import encode_within, too_large
from .http_errors import refusal

if TYPE_CHECKING:
    from .prepared_http import PreparedRequests

logger = logging.getLogger("runsgate.graphql")

SUBSCRIPTIONS_OVER_WEBSOCKET = (
    "Subscriptions are served over WebSocket (the graphql-transport-ws protocol on /graphql), not over HTTP."
)
"""The request error answering a subscription sent as an HTTP request (GET or POST)."""
GRAPHQL_METHODS = ("GET", "POST")
"""The methods ``/graphql`` serves over HTTP (its route's, and the ``Allow`` of each of its 405s)."""
CREDENTIALS_EXPIRED = "Forbidden: credentials expired"
"""The reason of the 4403 that closes a WebSocket when its credential expires."""

GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
"""The GraphQL over HTTP spec's own media type for responses."""
JSON = "application/json"
NOT_AN_OBJECT = "The request body must be a JSON object, or a list of them for a batch."
"""The 400 answer to a JSON body of another kind (a string, a number, null), or to a batch
item that is not an object."""


_DECODED: ContextVar[tuple[object, object, json.JSONDecodeError | None] | None] = ContextVar(
    "runsgate_decoded_body", default=None
)
"""The last body ``GraphQLView.parse_json`` decoded in this task, its value and its error."""


def request_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with the types of a request's parameters (GraphQL over HTTP, "Request
    Parameters": ``query`` and ``operationName`` strings, ``variables`` and ``extensions``
    objects; each may be null or absent), or None. The messages are Strawberry's."""
    for name, kind, expected in (
        ("query", str, "a string"),
        ("operationName", str, "a string"),
        ("variables", dict, "an object"),
        ("extensions", dict, "an object"),
    ):
        value = data.get(name)
        if value is not None and not isinstance(value, kind):
            return f"The GraphQL operation's `{name}` must be {expected} or null, if provided."
    return None


GRAPHIQL_CDN = "https://unpkg.com/"
GRAPHIQL_ASSETS_DIR = Path(__file__).resolve().parent / "static" / "graphiql"
"""The files the GraphiQL page loads, laid out as their unpkg.com paths (``package@version/file``)."""
GRAPHIQL_ASSETS_PATH = "/static/graphiql"
"""URL path the app serves ``GRAPHIQL_ASSETS_DIR`` under."""
GRAPHIQL_EXAMPLE_QUERY = """# runsgate: agent runs waiting for a human decision.
# Run this query with Ctrl-Enter (or the play button): the refund agent's
# suspended runs, newest first, with the tool calls that wait for approval.
# Then decide one with the approveToolCall or declineToolCall mutation,
# naming the call's toolCallId and the questionId you were shown.
{
  suspendedRuns(agentId: "refund-agent", first: 10) {
    totalCount
    nodes {
      runId
      createdAt
      toolCalls { toolCallId questionId toolName args requiresApproval }
    }
  }
}
"""
"""The query GraphiQL opens with, in place of Strawberry's welcome text."""


def preferred_media_type(accept: str | None) -> str:
    """The response media type for an ``Accept`` header: ``application/graphql-response+json`` or JSON.

    ``application/graphql-response+json`` only when the client names it, with a quality at
    least that of ``application/json`` (whether named, or matched by ``application/*`` or
    ``*/*``); otherwise ``application/json``, which is also the answer to a missing header or
    one that accepts neither (the spec allows answering with JSON rather than 406).
    """
    quality = {GRAPHQL_RESPONSE_JSON: -1.0, JSON: -1.0, "application/*": -1.0, "*/*": -1.0}
    for part in (accept or "").split(","):
        media_type, *params = (p.strip() for p in part.split(";"))
        media_type = media_type.lower()
        if media_type not in quality:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        quality[media_type] = max(quality[media_type], q)
    json_q = max(quality[JSON], quality["application/*"], quality["*/*"])
    if quality[GRAPHQL_RESPONSE_JSON] > 0 and quality[GRAPHQL_RESPONSE_JSON] >= json_q:
        return GRAPHQL_RESPONSE_JSON
    return JSON


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
    one that is no mistake of the client's (a fault while parsing or validating: a wrapped
    exception).

    By type where there is one: a ``GraphQLSyntaxError`` (the document does not parse, or has too
    many tokens) is ``GRAPHQL_PARSE_FAILED``; ``OperationResolutionError`` (an unknown operation
    name, no operation) is ``OPERATION_RESOLUTION_FAILURE``, as is the error of
    ``resolvers.operation_name`` (several operations and no name), which carries that code
    itself; ``SubscriptionOverHTTPError`` is ``SUBSCRIPTIONS_OVER_WEBSOCKET``.
    Otherwise by the step that refused the request (graphql-core gives no other type): an error
    ``before_execution`` (Strawberry's ``PreExecutionError``: parsing and validation) is
    ``GRAPHQL_VALIDATION_FAILED``; one of the execution step, which refuses a request only while
    coercing its variables (``ExecutionContext.build``: the operation was resolved before it), is
    ``BAD_USER_INPUT``.
    """
    if isinstance(error, GraphQLSyntaxError):
        return GRAPHQL_PARSE_FAILED
    if isinstance(error, OperationResolutionError):
        return OPERATION_RESOLUTION_FAILURE
    if isinstance(error, SubscriptionOverHTTPError):
        return SUBSCRIPTIONS_OVER_WEBSOCKET_CODE
    if before_execution:
        return GRAPHQL_VALIDATION_FAILED if error.original_error is None else None
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


class MethodNotAllowed(HTTPException):
    """A 405 refusal (``GraphQLView.run``) that names the methods serving the request in ``allow``
    (a mutation sent by GET: ``POST``), where another 405 gets ``GRAPHQL_METHODS``."""

    def __init__(self, reason: str, *, allow: str) -> None:
        super().__init__(405, reason)
        self.allow = allow


_GRAPHIQL_STORAGE = """const runsgateStorage = (() => {
        // localStorage, except that no header is ever written: every "headers" field of a JSON
        // value is stored as null, and the headers editor's own key is not stored at all
        const drop = (value) =>
          Array.isArray(value)
            ? value.map(drop)
            : value !== null && typeof value === "object"
              ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === "headers" ? null : drop(v)]))
              : value;
        return {
          getItem: (key) => localStorage.getItem(key),
          setItem: (key, value) => {
            if (key === "graphiql:headers") return;
            let kept = value;
            try {
              kept = JSON.stringify(drop(JSON.parse(value)));
            } catch (e) {}
            localStorage.setItem(key, kept);
          },
          removeItem: (key) => localStorage.removeItem(key),
          clear: () => localStorage.clear(),
          key: (index) => localStorage.key(index),
          get length() {
            return localStorage.length;
          },
        };
      })();

"""
"""A ``Storage`` for GraphiQL that never writes a header (``GRAPHIQL_CREDENTIAL_EDITS``)."""


GRAPHIQL_CREDENTIAL_EDITS = (
    # GraphiQL writes the headers editor (where a person puts `Authorization: Bearer ...`) to
    # localStorage, on the origin every page of runsgate shares, and reads it back in every tab
    # and after a restart; with false it keeps them in the page only (also out of its saved tabs)
    ("shouldPersistHeaders: true,", "shouldPersistHeaders: false,\n          storage: runsgateStorage,"),
    # GraphiQL's history (`graphiql:queries`, `graphiql:favorites`) saves each query with its
    # headers whatever shouldPersistHeaders says: its storage keeps every `headers` field null
    ("const root = ReactDOM.createRoot(", _GRAPHIQL_STORAGE + "      const root = ReactDOM.createRoot("),
    # Strawberry's page fills the headers editor from a `headers` URL parameter: a link could
    # carry a credential, or make the page send someone else's
    ("React.useState(parameters.headers)", "React.useState(undefined)"),
)
"""Edits of Strawberry's GraphiQL page so that no credential outlives the tab (SECURITY.md)."""


def offline_graphiql_html(html: str, root_path: str = "") -> str:
    """Strawberry's GraphiQL page with its CDN URLs pointing at runsgate's own copies, titled
    "runsgate GraphiQL", opening with ``GRAPHIQL_EXAMPLE_QUERY`` (the page's ``EXAMPLE_QUERY``
    constant), and keeping headers in the page only (``GRAPHIQL_CREDENTIAL_EDITS``).

    Raises:
        RuntimeError: Strawberry's page no longer has the code an edit of
            ``GRAPHIQL_CREDENTIAL_EDITS`` changes (an upgrade: the page would keep credentials).
    """
    for old, new in GRAPHIQL_CREDENTIAL_EDITS:
        if old not in html:
            raise RuntimeError(f"Strawberry's GraphiQL page has no {old!r}: check that it keeps no credential")
        html = html.replace(old, new)
    html = html.replace("<title>Strawberry GraphiQL</title>", "<title>runsgate GraphiQL</title>", 1)
    start = html.find("const EXAMPLE_QUERY = `")
    end = html.find("`;", start)
    if start >= 0 and end >= 0:
        html = f"{html[:start]}const EXAMPLE_QUERY = `{GRAPHIQL_EXAMPLE_QUERY}`{html[end + 1 :]}"
    return html.replace(GRAPHIQL_CDN, f"{root_path}{GRAPHIQL_ASSETS_PATH}/")


DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""``RUNSGATE_MAX_RESPONSE_BYTES``' default: the most bytes one answer may take (4 MiB)."""


class EncodedAnswer(dict[str, Any]):
    """An answer (a response body, or a WebSocket message) with its JSON already encoded within
    the budget, in ``chunks``; ``GraphQLView.encode_json`` and ``create_response`` send those."""

    def __init__(self, answer: dict[str, Any], chunks: list[bytes]) -> None:
        super().__init__(answer)
        self.chunks = chunks

    @property
    def size(self) -> int:
        return sum(map(len, self.chunks))


async def encoded_answer(answer: dict[str, Any], limit: int, *, message: bool = False) -> EncodedAnswer:
    """``answer`` (a response, or with ``message`` a WebSocket message whose ``payload`` is one)
    encoded within ``limit`` bytes (``server.encoding``); past it, the refusal
    ``RESPONSE_TOO_LARGE`` in its place, with the answer's ``extensions`` (its cost)."""
    encoded = await encode_within(answer, limit)
    if encoded is not None:
        return EncodedAnswer(answer, encoded)
    logger.info("answer over RUNSGATE_MAX_RESPONSE_BYTES (%d bytes) refused", limit)
    response = answer.get("payload") or {} if message else answer
    refused = too_large(limit, response.get("extensions"))
    if message:
        refused = {**answer, "payload": refused}
    return EncodedAnswer(refused, [orjson.dumps(refused)])


class TransportWsHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """Strawberry's ``graphql-transport-ws`` handler, held to the lifetime of its credential and
    with fresh DataLoaders for each operation (the socket's ``Context`` lives as long as the
    connection; its caches must not).

    A credential that expires (a JWT's ``exp``, ``Principal.expires_at``) closes the socket
    with 4403 at that instant, which ends every operation still running (subscriptions
    included); an operation that arrives after it is refused the same way.
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
        await super().send_message(message)


_PARSING: ContextVar[str] = ContextVar("runsgate_parsing", default="body")
"""What ``GraphQLView.parse_json`` decodes in this task: the request body, or a query parameter."""


def _unparsable(what: str, reason: str | None) -> str:
    """Strawberry's 400 text for JSON it cannot parse, with the reason when runsgate refused it."""
    text = "Unable to parse request body as JSON" if what == "body" else "Unable to parse a query parameter as JSON"
    return text if reason is None else f"{text}: {reason}"


class GraphQLView(GraphQL[Context, None]):
    """Strawberry's ASGI view with the spec's response media type, an offline GraphiQL, and a
    shorter path for prepared queries (``run_prepared``)."""

    graphql_transport_ws_handler_class = TransportWsHandler

    prepared: PreparedRequests | None = None
    """The fast path's HTTP half (``server.prepared_http``), set by ``server.app.create_app``
    when the schema has prepared operations; None: Strawberry's ``run`` serves every request."""
    prepared_requests: int = 0
    """Requests served by ``run_prepared`` (tests and benchmarks read it)."""
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    """The most bytes one HTTP response (a batch's answers together) or WebSocket message may
    take (``RUNSGATE_MAX_RESPONSE_BYTES``, set by ``server.app.create_app``)."""

    async def process_result(self, request: Request, result: ExecutionResult) -> GraphQLHTTPResponse:
        """Drop ``data`` from a request error's response, give its errors their codes
        (``with_request_error_codes``), and mark the request for a 400 (see ``run``); then encode
        it within what is left of the response's ``max_response_bytes`` (an ``EncodedAnswer``;
        past it, the refusal ``RESPONSE_TOO_LARGE``). The fast path's responses
        (``server.prepared_http``) are made here too."""
        response = await super().process_result(request, result)
        if is_request_error(result):
            with_request_error_codes(result, response)
            response.pop("data", None)
            request.state.graphql_request_error = True
        left = getattr(request.state, "response_bytes_left", self.max_response_bytes)
        encoded = await encoded_answer(dict(response), max(left, 0))
        request.state.response_bytes_left = left - encoded.size
        return encoded  # type: ignore[return-value]

    def encode_json(self, data: object) -> str | bytes:
        """An ``EncodedAnswer``'s chunks, joined (as text: Strawberry sends a WebSocket message as
        a text frame only so); anything else as Strawberry's view encodes it."""
        if isinstance(data, EncodedAnswer):
            return b"".join(data.chunks).decode()
        return super().encode_json(data)

    def create_response(
        self, response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse], sub_response: Response
    ) -> Response:
        """Strawberry's response, sending the chunks of the ``EncodedAnswer``s that
        ``process_result`` made one by one (each let go once sent), with their total as
        ``Content-Length``; a batch is a JSON array of them."""
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

        async def body() -> AsyncIterator[bytes]:
            parts.reverse()
            while parts:
                yield parts.pop()

        length = sum(map(len, parts))
        response = StreamingResponse(body(), media_type=JSON, headers={"content-length": str(length)})
        response.headers.raw.extend(sub_response.headers.raw)
        if sub_response.background:
            response.background = sub_response.background
        if sub_response.status_code:
            response.status_code = sub_response.status_code
        return response

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Any,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        """Strawberry's ``execute_single`` without subscriptions: HTTP serves queries and
        mutations only, and a subscription is a request error (``SUBSCRIPTIONS_OVER_WEBSOCKET``,
        no ``data``; 400 for clients of the GraphQL over HTTP media type) logged as one INFO
        line, where Strawberry would execute it and fail with a masked fault.

        An ``operationName`` the document does not define, or a document without an operation,
        is a request error too (``Unknown operation named 'X'.``, ``Must provide an operation.``).

        Raises:
            MethodNotAllowed: 405 with ``Allow: POST`` for an operation its method does not
                serve (a mutation sent by GET: the GraphQL over HTTP spec's 405), where
                Strawberry answers 400.
            HTTPException: 400 as Strawberry's (no query).
        """
        allowed = OperationType.from_http(request_adapter.method) - {OperationType.SUBSCRIPTION}
        if not self.allow_queries_via_get and request_adapter.method == "GET":
            allowed -= {OperationType.QUERY}
        set_requested_operation_name(request_data.operation_name)  # for OperationNameRequired
        try:
            return await self.schema.execute(
                request_data.query,
                root_value=root_value,
                variable_values=request_data.variables,
                context_value=context,
                operation_name=request_data.operation_name,
                allowed_operation_types=allowed,
                operation_extensions=request_data.extensions,
            )
        except CannotGetOperationTypeError as e:
            # a request error of the document, answered as one (JSON; 400 only for clients of the
            # GraphQL over HTTP media type) in graphql-core's words, where Strawberry answers a
            # text/plain 400
            missing = "Must provide an operation." if e.operation_name is None else None
            message = missing or f"Unknown operation named '{e.operation_name}'."
            return ExecutionResult(data=None, errors=[OperationResolutionError(message)])
        except InvalidOperationTypeError as e:
            if e.operation_type is OperationType.SUBSCRIPTION:
                logger.info("subscription refused over HTTP %s", request_adapter.method)
                return ExecutionResult(data=None, errors=[SubscriptionOverHTTPError(SUBSCRIPTIONS_OVER_WEBSOCKET)])
            # only GET refuses a query or a mutation (allow_queries_via_get, OperationType.from_http)
            reason = e.as_http_error_reason(request_adapter.method)
            raise MethodNotAllowed(f"{reason}; send it by POST", allow="POST") from e
        except MissingQueryError as e:
            raise HTTPException(400, "No GraphQL query found in the request") from e

    async def run(
        self,
        request: Request | WebSocket,
        context: Context = UNSET,
        root_value: None = UNSET,
    ) -> Any:
        """Serve the request (a prepared query through ``run_prepared``), then set the negotiated
        media type (and 400 for a request error) on JSON results.

        A request refused before it executes (Strawberry's ``HTTPException``: JSON that does not
        parse, a content type, a method, a batch) is answered as every refusal is
        (``server.http_errors``): its status, and ``errors`` with its reason and an
        ``extensions.code``, where Strawberry answers a ``text/plain`` body. A 405 carries
        ``Allow``: the methods that serve the request (``MethodNotAllowed``), else
        ``GRAPHQL_METHODS``, where Strawberry's has no header."""
        response = None
        try:
            if isinstance(request, Request) and context is UNSET and root_value is UNSET:
                response = await self.run_prepared(request)
            if response is None:
                response = await super().run(request, context, root_value)
        except HTTPException as exc:
            if not isinstance(request, Request):
                raise
            headers = None
            if exc.status_code == 405:
                allow = exc.allow if isinstance(exc, MethodNotAllowed) else ", ".join(GRAPHQL_METHODS)
                headers = {"Allow": allow}
            response = refusal(exc.reason, exc.status_code, headers=headers)
        if isinstance(request, Request) and isinstance(response, Response) and response.media_type == JSON:
            response.headers["vary"] = "Accept"
            if preferred_media_type(request.headers.get("accept")) == GRAPHQL_RESPONSE_JSON:
                response.headers["content-type"] = f"{GRAPHQL_RESPONSE_JSON}; charset=utf-8"
                if getattr(request.state, "graphql_request_error", False):
                    response.status_code = 400
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

    def parse_query_params(self, params: Any) -> dict[str, Any]:
        """Strawberry's, with a 400 for a ``variables`` or ``extensions`` parameter that is not
        JSON naming that parameter (not "request body")."""
        token = _PARSING.set("query")
        try:
            return super().parse_query_params(params)
        finally:
            _PARSING.reset(token)

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter) -> GraphQLRequestData | list[GraphQLRequestData]:
        """Strawberry's parsing, after checking the shape of a JSON body and of each batch item.

        Raises:
            HTTPException: 400 for a body such as ``"query"`` or ``5``, or a batch item such as
                ``[5]`` (``NOT_AN_OBJECT``), which Strawberry's own parsing answers with a 500;
                400 naming the field (``request_problem``) for a request or batch item whose
                ``query``, ``operationName``, ``variables`` or ``extensions`` has the wrong type
                (Strawberry checks a single request's ``query``, ``variables`` and
                ``extensions`` with the same messages, and no batch item); and whatever
                Strawberry's parsing raises.
        """
        if request.method == "POST":
            content_type, _ = parse_content_type(request.content_type or "")
            if JSON in content_type:  # Strawberry's own test for a JSON body
                data = self.parse_json(await request.get_body())
                batching = self.schema.config.batching_config
                problem = None
                if isinstance(data, dict):
                    problem = request_problem(data)
                elif not isinstance(data, list):
                    problem = NOT_AN_OBJECT
                elif batching is not None and len(data) <= batching["max_operations"]:
                    # a batch's items, once Strawberry's own batch checks (enabled, size) passed
                    for index, item in enumerate(data):
                        item_problem = request_problem(item) if isinstance(item, dict) else NOT_AN_OBJECT
                        if item_problem is not None:
                            problem = (
                                item_problem if item_problem is NOT_AN_OBJECT else f"Batch item {index}: {item_problem}"
                            )
                            break
                if problem is not None:
                    raise HTTPException(400, problem)
        try:
            return await super().parse_http_body(request)
        except HTTPException as exc:
            if exc.reason != "Unsupported content type":  # Strawberry's answer to any other POST
                raise
            uploads = ", or multipart/form-data (uploads)" if self.multipart_uploads_enabled else ""
            raise HTTPException(
                400,
                f'Unsupported content type "{(request.content_type or "")[:100]}"; POST a JSON body '
                f"with Content-Type: application/json{uploads} (and Accept: application/graphql-response+json "
                "for the GraphQL over HTTP media type), or send a query as GET parameters",
            ) from None

    async def run_prepared(self, request: Request) -> Response | None:
        """The fast path's response to a prepared query (``prepared``), when the view has one
        (``RUNSGATE_COMPILED_EXECUTION``); None, having changed nothing, for any other request,
        which Strawberry's ``run`` then serves."""
        if self.prepared is None:
            return None
        response = await self.prepared.serve(self, request)
        if response is not None:
            self.prepared_requests += 1
        return response

    async def render_graphql_ide(self, request: Request) -> HTMLResponse:
        """Strawberry's GraphiQL page, loading its files from ``GRAPHIQL_ASSETS_PATH``."""
        return HTMLResponse(offline_graphiql_html(self.graphql_ide_html, request.scope.get("root_path", "")))
