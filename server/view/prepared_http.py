"""The fast path's HTTP half: ``PreparedRequests`` serves a ``POST`` of one JSON object (a query
or a mutation, prepared or not; ``resolvers.fastpath.prepared`` runs a prepared one) without
Strawberry's request parsing. Imported only when compiled execution is on; the private
Strawberry names it needs are in ``resolvers.fastpath.internals``. Which requests qualify:
docs/architecture.md "Fast path".
"""

from __future__ import annotations

from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLRequestData
from strawberry.schema.base import BaseSchema

from resolvers import Context
from resolvers.fastpath.internals import handle_errors, stream_transport
from resolvers.fastpath.prepared import PreparedOperations
from resolvers.fastpath.schema import PreparedSchema

from .conformance import request_problem

JSON = "application/json"


class PreparedRequests:
    """The prepared operations of one schema, served over HTTP (``serve``)."""

    def __init__(self, prepared: PreparedOperations) -> None:
        self.prepared = prepared

    @classmethod
    def of(cls, schema: BaseSchema) -> PreparedRequests | None:
        """The HTTP half of ``schema``'s prepared operations, or None when it has none (a schema
        ``resolvers.fastpath.install`` did not build, or built without them)."""
        if isinstance(schema, PreparedSchema) and schema.prepared_operations is not None:
            return cls(schema.prepared_operations)
        return None

    async def serve(self, view: GraphQL[Context, None], request: Request) -> Response | None:
        """The response to ``request`` when it is a ``POST`` of ``application/json`` asking for no
        streaming transport, whose body is one JSON object with a string ``query`` and parameters
        of the spec's types (``server.view.conformance.request_problem``, the view's own check),
        built by ``view``'s own methods in the order of Strawberry's ``run`` (the context, then
        the body; ``server.view.graphql_view.GraphQLView``'s: the same response; its
        ``execute_single`` runs the operation, prepared or not, and refuses what HTTP does not
        serve); None for any other request, which Strawberry's ``run`` then serves with the body
        already decoded (``GraphQLView.parse_json``) and a context of its own (the view releases
        both)."""
        if request.method != "POST":
            return None
        content_type = request.headers.get("content-type")
        if content_type is None or content_type.split(";", 1)[0].strip() != JSON:
            return None
        if stream_transport(view, request.headers) is not None:
            return None
        await view.get_root_value(request)  # as Strawberry's run; the view's root value is None
        request_adapter = view.request_adapter_class(request)
        sub_response = await view.get_sub_response(request)
        context = await view.get_context(request, response=sub_response)
        try:
            data = view.parse_json(await request.body())
        except HTTPException:  # not JSON: Strawberry's parsing answers it
            return None
        if type(data) is not dict or not isinstance(data.get("query"), str) or request_problem(data) is not None:
            return None
        result = await view.execute_single(
            request=request,
            request_adapter=request_adapter,
            sub_response=sub_response,
            context=context,
            root_value=None,
            request_data=GraphQLRequestData(
                query=data["query"],
                variables=data.get("variables"),
                operation_name=data.get("operationName"),
                extensions=data.get("extensions"),
                protocol="http",
            ),
        )
        response_data = await view.process_result(request, result)
        if result.errors:
            handle_errors(view, result.errors, response_data)
        return view.create_response(response_data=response_data, sub_response=sub_response)


__all__ = ["PreparedRequests"]
