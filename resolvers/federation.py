"""The federation schema: ``_entities`` representations checked, client mistakes logged quietly.

A malformed representation is the client's mistake, ``BAD_USER_INPUT`` naming
``representations[i]`` (Strawberry would mask it as a fault); errors of a response that are
client mistakes are one INFO line each, unexpected faults ERROR with their traceback
(``resolvers.schema.should_mask_error``). A streamed operation (``stream``, WebSocket) whose
document does not parse gives a ``PreExecutionError``, as one that does not validate does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.exceptions import MissingQueryError
from strawberry.federation.schema import FederationAny
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.schema.schema import StreamResult
from strawberry.types import ExecutionContext, Info
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType
from strawberry.utils.aio import aclosing

from storage import StoreUnavailableError

from .documents.limits import check_value
from .errors import QueryArgumentError, escaped_fault

logger = logging.getLogger("runsgate.graphql")

REQUEST_REFUSALS = (CannotGetOperationTypeError, InvalidOperationTypeError, MissingQueryError)
"""Strawberry's exceptions for a request it cannot run (an operation name the document lacks, an
operation type the transport does not serve, no query): the client's, shown as they are."""

ENTITY_KEYS = {"SuspendedRun": "runId", "Agent": "id"}
"""Entity type -> its ``@key`` field (docs/api.md "Apollo Federation")."""


def escaped(error: GraphQLError) -> bool:
    """Whether ``error`` is Strawberry's wrapping of an exception that escaped execution
    (graphql-core's ``execute`` or an extension hook raising, not a field): no path, no location,
    and an original error that is neither a ``GraphQLError`` (a request error is one, or is
    located) nor one of Strawberry's refusals of the request (``REQUEST_REFUSALS``)."""
    original = error.original_error
    if error.path is not None or error.nodes or original is None:
        return False
    return not isinstance(original, (GraphQLError, *REQUEST_REFUSALS))


class FederationSchema(strawberry.federation.Schema):
    """``strawberry.federation.Schema`` whose ``_entities`` refuses malformed representations
    (the fast path's schema, ``resolvers.fastpath.schema.PreparedSchema``, extends it)."""

    def entities_resolver(self, info: Info, representations: list[FederationAny]) -> list[FederationAny]:
        """Check every representation, then resolve them (Strawberry's resolver).

        Raises:
            QueryArgumentError: A representation is not ``{"__typename": <entity>, <key>: <id>}``,
                or its key is over its limit in bytes (``resolvers.documents.limits.INPUT_LIMITS``).
        """
        checked: list[Any] = []
        for index, representation in enumerate(representations):
            argument = f"representations[{index}]"
            type_name = representation.get("__typename") if isinstance(representation, dict) else None
            key = ENTITY_KEYS.get(type_name) if isinstance(type_name, str) else None
            if key is None:
                raise QueryArgumentError(
                    f"`{argument}` must be an object whose __typename is one of {sorted(ENTITY_KEYS)}",
                    argument=argument,
                )
            if set(representation) != {"__typename", key} or not isinstance(representation[key], str | int):  # type: ignore[call-overload,index]
                raise QueryArgumentError(
                    f"`{argument}` must hold exactly __typename and the key field {key!r} (a string)",
                    argument=argument,
                )
            value = str(representation[key])  # type: ignore[index]
            check_value(key, value, f"{argument}.{key}")
            checked.append({"__typename": type_name, key: value})
        return super().entities_resolver(info, checked)

    async def stream(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        operation_extensions: dict[str, Any] | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
    ) -> StreamResult:
        """Strawberry's ``stream``, whose first result is a ``PreExecutionError`` also for a
        document that does not parse (``GraphQLSyntaxError``, the token limit included): Strawberry's
        ``ParserCache`` parses in its hook, outside the step that turns such errors into results,
        so the error escaped the stream instead (a WebSocket operation then ended with a logged
        traceback and no error). The error is logged as every request error is
        (``process_errors``)."""
        source = await super().stream(
            query,
            variable_values=variable_values,
            context_value=context_value,
            root_value=root_value,
            operation_name=operation_name,
            operation_extensions=operation_extensions,
            allowed_operation_types=allowed_operation_types,
        )
        return self._request_errors_as_results(source)

    async def _request_errors_as_results(self, source: StreamResult) -> StreamResult:
        started = False
        async with aclosing(source):
            try:
                async for result in source:
                    started = True
                    yield result
            except GraphQLError as error:
                if started:
                    raise
                self.process_errors([error])
                yield PreExecutionError(data=None, errors=[error])

    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        """One line per error of a response: WARNING for a store outage (answered as
        ``STORE_UNAVAILABLE``, ``resolvers.errors.ErrorMasking``), else INFO (faults were logged
        with their traceback already). A fault that escaped execution (``escaped``), which
        Strawberry answers after ``ErrorMasking`` ran, is logged with its traceback and replaced,
        in ``errors`` (the list Strawberry answers), by what a client is told (``escaped_fault``)."""
        for index, error in enumerate(errors):
            if escaped(error):
                logger.error("unexpected error outside execution", exc_info=error.original_error)
                errors[index] = escaped_fault(error)
            elif isinstance(error.original_error, StoreUnavailableError):
                logger.warning("store unavailable in %s: %s", error.path, error.original_error)
            else:
                logger.info("GraphQL error at %s: %s", error.path or "request", error.message)


__all__ = ["ENTITY_KEYS", "FederationSchema"]
