"""The fast path's HTTP side: a ``POST`` of a prepared query served without Strawberry's
request parsing (``run_prepared``), called by ``server.graphql_view.GraphQLView.run`` through
``PreparedSchema.run_prepared``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cross_web import HTTPException
from strawberry.http import GraphQLRequestData

from .internals import handle_errors, stream_transport
from .prepared import well_formed

if TYPE_CHECKING:
    from .prepared import PreparedOperations

JSON = "application/json"


async def run_prepared(prepared: PreparedOperations, view: Any, request: Any) -> Any:
    """Serve a ``POST`` of a prepared query operation (``resolvers.fastpath.prepared``) without
    Strawberry's request parsing; None, having changed nothing, for any other request.

    ``view`` is Strawberry's ASGI view (``strawberry.asgi.GraphQL``, with runsgate's
    ``parse_json``, which decodes a request's body once), ``request`` a Starlette ``Request``.
    The request qualifies when its ``Content-Type`` is ``application/json`` (parameters
    allowed), it asks for no streaming transport, and its body is one JSON object whose
    ``query`` and ``operationName`` name a prepared operation, with ``variables`` and
    ``extensions`` objects or absent (GraphQL over HTTP, "Request Parameters"). It is then
    served as Strawberry's ``run`` serves it: the same ``get_root_value``, sub-response,
    ``get_context``, ``execute_single``, ``process_result`` and ``create_response``, in the
    same order, so the response is the same; only the content-type parsing, the body's shape
    checks and the checks for streamed results are skipped. Anything else returns None and
    Strawberry's ``run`` serves the request, with the body already decoded.
    """
    if request.method != "POST":
        return None
    content_type = request.headers.get("content-type")
    if content_type is None or content_type.split(";", 1)[0].strip() != JSON:
        return None
    if stream_transport(view, request.headers) is not None:
        return None
    try:
        data = view.parse_json(await request.body())
    except HTTPException:  # not JSON: Strawberry's parsing answers it
        return None
    if type(data) is not dict:
        return None
    query = data.get("query")
    operation_name = data.get("operationName")
    variables = data.get("variables")
    extensions = data.get("extensions")
    if (
        not isinstance(query, str)
        or not well_formed(operation_name, variables, extensions)
        or prepared.get(query, operation_name) is None
    ):
        return None
    root_value = await view.get_root_value(request)  # as Strawberry's run
    request_adapter = view.request_adapter_class(request)
    sub_response = await view.get_sub_response(request)
    context = await view.get_context(request, response=sub_response)
    result = await view.execute_single(
        request=request,
        request_adapter=request_adapter,
        sub_response=sub_response,
        context=context,
        root_value=root_value,
        request_data=GraphQLRequestData(
            query=query,
            variables=variables,
            operation_name=operation_name,
            extensions=extensions,
            protocol="http",
        ),
    )
    response_data = await view.process_result(request, result)
    if result.errors:
        handle_errors(view, result.errors, response_data)
    return view.create_response(response_data=response_data, sub_response=sub_response)


__all__ = ["run_prepared"]
