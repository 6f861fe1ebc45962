"""``GraphQLOverHTTP``: Strawberry's ASGI view with the overrides that make ``/graphql`` keep the
GraphQL-over-HTTP spec where Strawberry's view does not, each in one place so that it can go once
Strawberry does it (the class docstring says, override by override, what each fixes).

Why: docs/api.md "GraphQL over HTTP" and docs/architecture.md "Requests and answers".
"""

from __future__ import annotations

import logging
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import MissingQueryError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.http.parse_content_type import parse_content_type
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET

from resolvers import Context
from resolvers.documents.operation_name import set_requested_operation_name

from ..http.http_errors import refusal
from .request_errors import (
    SUBSCRIPTIONS_OVER_WEBSOCKET,
    OperationResolutionError,
    SubscriptionOverHTTPError,
    is_request_error,
    with_request_error_codes,
)

logger = logging.getLogger("runsgate.graphql")

GRAPHQL_METHODS = ("GET", "POST")
"""The methods ``/graphql`` serves over HTTP (its route's, and the ``Allow`` of each of its 405s)."""

GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
"""The GraphQL over HTTP spec's own media type for responses."""
JSON = "application/json"
NOT_AN_OBJECT = "The request body must be a JSON object, or a list of them for a batch."
"""The 400 answer to a JSON body of another kind (a string, a number, null), or to a batch
item that is not an object."""


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


class MethodNotAllowed(HTTPException):
    """A 405 refusal (``GraphQLOverHTTP.run``) that names the methods serving the request in ``allow``
    (a mutation sent by GET: ``POST``), where another 405 gets ``GRAPHQL_METHODS``."""

    def __init__(self, reason: str, *, allow: str) -> None:
        super().__init__(405, reason)
        self.allow = allow


class GraphQLOverHTTP(GraphQL[Context, None]):
    """Strawberry's ASGI view keeping the GraphQL-over-HTTP spec. Each can go once Strawberry does it:

    - ``run``: a request refused before it executes (Strawberry's ``HTTPException``: JSON that does
      not parse, a content type, a method, a batch) is answered as every refusal is
      (``server.http.http_errors``: JSON ``errors`` with an ``extensions.code``), where Strawberry
      answers a ``text/plain`` body; a 405 carries ``Allow`` (``GRAPHQL_METHODS``, or the methods
      serving the request), where Strawberry's has none; a client accepting
      ``application/graphql-response+json`` gets it (``preferred_media_type``), and a request error
      then gets 400, where Strawberry answers ``application/json`` and 200 to every client.
    - ``execute_single``: a subscription sent over HTTP is a request error
      (``SUBSCRIPTIONS_OVER_WEBSOCKET``), where Strawberry executes it and fails with a masked
      fault; a mutation sent by GET is a 405 with ``Allow: POST``, where Strawberry answers 400; an
      unknown ``operationName``, or a document without an operation, is a request error in
      graphql-core's words, where Strawberry answers a ``text/plain`` 400.
    - ``process_result``: a request error's response has no ``data``, and each of its errors an
      ``extensions.code`` (``server.view.request_errors``), where Strawberry gives ``"data": null``
      and no code.
    - ``parse_http_body``: a JSON body (or batch item) that is not an object is a 400
      (``NOT_AN_OBJECT``), where Strawberry answers 500; a parameter of the wrong type is a 400
      naming it (``request_problem``), batch items and ``operationName`` included, which Strawberry
      does not check; an unsupported content type's 400 says what to send.
    """

    async def run(
        self,
        request: Request | WebSocket,
        context: Context = UNSET,
        root_value: None = UNSET,
    ) -> Any:
        """Serve the request, then set the negotiated media type (and 400 for a request error) on
        JSON results.

        A request refused before it executes (Strawberry's ``HTTPException``: JSON that does not
        parse, a content type, a method, a batch) is answered as every refusal is
        (``server.http.http_errors``): its status, and ``errors`` with its reason and an
        ``extensions.code``, where Strawberry answers a ``text/plain`` body. A 405 carries
        ``Allow``: the methods that serve the request (``MethodNotAllowed``), else
        ``GRAPHQL_METHODS``, where Strawberry's has no header."""
        try:
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
            accept = request.headers.get("accept")
            # a client that does not name the spec's media type gets JSON (preferred_media_type)
            if (
                accept
                and GRAPHQL_RESPONSE_JSON in accept.lower()
                and preferred_media_type(accept) == GRAPHQL_RESPONSE_JSON
            ):
                response.headers["content-type"] = f"{GRAPHQL_RESPONSE_JSON}; charset=utf-8"
                if getattr(request.state, "graphql_request_error", False):
                    response.status_code = 400
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

    async def process_result(self, request: Request, result: ExecutionResult) -> GraphQLHTTPResponse:
        """Drop ``data`` from a request error's response, give its errors their codes
        (``with_request_error_codes``), and mark the request for a 400 (see ``run``)."""
        response = await super().process_result(request, result)
        if is_request_error(result):
            with_request_error_codes(result, response)
            response.pop("data", None)
            request.state.graphql_request_error = True
        return response

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
