"""Prepared operations: a query document that already parsed and validated is executed
directly, without Strawberry's per-request extension pipeline (issue 6 §5).

Strawberry's ``Schema.execute`` runs every request through the same steps: build an
``ExecutionContext``, create one instance of each schema extension, enter and leave their
``on_operation``/``on_parse``/``on_validate``/``on_execute`` hooks (24 context managers with
runsgate's six extensions), look the document up in the parser and validation caches, execute,
then gather the extensions' results. Skipping that took a page of 20 runs from 0.90 to 0.76 CPU
ms, and ``{ __typename }`` from 0.23 to 0.14 (bench/RESULTS.md, "Prepared operations").

The outcome of parsing and validating depends only on the query text and the schema's
configuration (the limits of ``server/limits.py`` are parser options and validation rules), so
it is the same for every request of the same text. ``PreparedOperations`` keeps, per query text
and ``operationName``, the parsed document of each **query** operation that reached execution
once through the standard pipeline (``RecordPreparedOperation``, an ``on_execute`` hook, which
Strawberry runs only after parsing and validation passed). A later request with the same text
and name is executed by ``execute_prepared``: graphql-core's ``execute`` with the schema's
executor class (``CompiledExecutor``), then what runsgate's two other extensions do after
execution, in the same order as the standard path:

1. errors go through the schema's error processing (``internals.process_errors``;
   ``FederationSchema.process_errors`` logs them);
2. ``ErrorMasking.mask`` masks them (``resolvers.errors``);
3. ``OperationMetrics``'s counters and latency histogram are updated (``resolvers.metrics``);
4. the result is a Strawberry ``ExecutionResult`` with ``extensions={}``, as the standard path
   gathers from extensions that report nothing.

When the operation's selection is a single root field returning an object, ``execute_prepared``
first tries its root plan (``resolvers.fastpath.root_plan``), which skips building graphql-core's executor
and hands the request back to ``execute`` whenever it leaves the plain path.

Variables are coerced, and every resolver runs, on each request, as before (once; twice when
a root plan hands a request back after its resolver ran, ``resolvers.fastpath.root_plan``). Mutations
and subscriptions are never prepared. These take the standard path, which answers them as
before: a request whose operation type is not allowed (a query where a view allows only
mutations), and one whose parts have the wrong types (a list as ``operationName``; over HTTP the
view answers those with a 400 first, ``server.graphql_view.request_problem``). So does any
unexpected exception raised by the fast path: it is logged with its traceback and the whole
request is executed again, resolvers included, by the standard path, before anything was answered.

``resolvers.fastpath.install`` prepares operations only when every extension is one whose effect is covered
here: the parser and validation caches, ``AddValidationRules`` (and ``DisableIntrospection``),
``MaxTokensLimiter``, ``ErrorMasking``, ``OperationMetrics`` and ``OperationNameRequired`` (a
document of several operations sent without ``operationName`` fails validation, so it never
executes and is never prepared under no name). Any other extension (the
OpenTelemetry tracing extension) turns preparation off. ``RUNSGATE_COMPILED_EXECUTION=false``
turns it off with compiled completion. ``tests/server/test_compiled_differential.py`` sends every
document twice or more to a compiled app and a standard app and compares the responses byte
for byte; ``tests/server/test_prepared_operations.py`` checks the cases above.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache
from graphql import ExecutionResult as GraphQLExecutionResult
from graphql import GraphQLError, GraphQLSchema
from graphql.language import DocumentNode
from strawberry.execution.is_awaitable import optimized_is_awaitable
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType
from strawberry.utils.await_maybe import await_maybe

from ..metrics import OperationLabels, operation_metrics
from .internals import execute_function, executor_kwargs, graphql_schema, process_errors, provided_operation_name
from .root_plan import RootPlan, plan_root, run_root_plan

if TYPE_CHECKING:
    from strawberry.schema import Schema

PREPARED_CACHE_SIZE = 256
"""Prepared operations kept (least recently used dropped first), as many as ``ParserCache``."""


@dataclass(frozen=True, slots=True)
class PreparedOperation:
    """A query operation of a document that parsed and validated: what a request needs to run it."""

    document: DocumentNode
    operation_name: str | None
    """The name Strawberry executes the document under: the request's ``operationName``, or
    the name of the document's first operation when it gave none (``ExecutionContext.operation_name``)."""
    metrics: OperationLabels
    """The operation's label values and metric children (``resolvers.metrics.operation_metrics``)."""
    root: RootPlan | None = None
    """Its root plan (``resolvers.fastpath.root_plan``), when it has a single root field that qualifies."""


class PreparedOperations:
    """An LRU of ``PreparedOperation`` keyed by ``(query text, operationName)``.

    Args:
        mask_errors: ``ErrorMasking``'s error processing (errors in, errors to answer out).
        maxsize: Entries kept.
        root_plans: Plan the root field of each recorded query (``resolvers.fastpath.root_plan``).

    Attributes:
        executed: Requests executed as prepared operations (``resolvers.fastpath.schema.PreparedSchema.execute``).
        planned: Those of them answered by their root plan (``resolvers.fastpath.root_plan``).
    """

    def __init__(
        self,
        mask_errors: Callable[[list[GraphQLError]], list[GraphQLError]],
        maxsize: int = PREPARED_CACHE_SIZE,
        *,
        root_plans: bool = True,
    ) -> None:
        self.mask_errors = mask_errors
        self.root_plans = root_plans
        self._entries: LRUCache[tuple[str, str | None], PreparedOperation] = LRUCache(maxsize)
        self._lock = threading.Lock()  # Strawberry may run sync execution in threads
        self.executed = 0
        self.planned = 0

    def count_planned(self) -> None:
        """Count a request answered by its root plan (``execute_prepared``'s ``planned``)."""
        self.planned += 1

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, query: str, operation_name: str | None) -> PreparedOperation | None:
        """The prepared operation of this text and name, or None."""
        key = (query, operation_name)
        with self._lock:
            return self._entries.get(key)

    def record(
        self,
        query: str,
        operation_name: str | None,
        document: DocumentNode,
        executed_name: str | None,
        schema: GraphQLSchema | None = None,
    ) -> None:
        """Keep a query operation that reached execution (parsed, validated, allowed), asked
        for as ``operation_name`` and executed by Strawberry under ``executed_name``; with
        ``schema``, also its root plan (``resolvers.fastpath.root_plan.plan_root``)."""
        root = None if schema is None or not self.root_plans else plan_root(schema, document, executed_name)
        entry = PreparedOperation(document, executed_name, operation_metrics(document, executed_name), root)
        with self._lock:
            self._entries.setdefault((query, operation_name), entry)

    def recorder(self) -> RecordPreparedOperation:
        """A new ``RecordPreparedOperation`` for this cache (an extension factory for the schema)."""
        return RecordPreparedOperation(self)


class RecordPreparedOperation(SchemaExtension):
    """Records each query operation that reaches execution in a ``PreparedOperations``.

    Strawberry calls ``on_execute`` only once the document parsed, validated and its operation
    type was allowed (Strawberry's ``Schema.execute``).
    """

    def __init__(self, prepared: PreparedOperations) -> None:
        self.prepared = prepared

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        # the operationName the request gave (None included): Strawberry keeps it in this
        # attribute (``ExecutionContext.__post_init__``); ``operation_name`` would answer the
        # document's only operation's name instead. Nothing is recorded should it be missing.
        provided = provided_operation_name(context, _MISSING)
        if (
            isinstance(context.query, str)
            and document is not None
            and (provided is None or isinstance(provided, str))
            and context.operation_type is OperationType.QUERY
        ):
            schema = graphql_schema(context.schema)
            self.prepared.record(context.query, provided, document, context.operation_name, schema)
        yield


_MISSING = object()


async def execute_prepared(
    schema: Schema,
    prepared: PreparedOperation,
    *,
    variable_values: dict[str, Any] | None,
    context_value: Any,
    root_value: Any,
    operation_extensions: dict[str, Any] | None,
    mask_errors: Callable[[list[GraphQLError]], list[GraphQLError]],
    planned: Callable[[], None] | None = None,
) -> ExecutionResult:
    """Execute a prepared query as ``Schema.execute`` would (module docstring), skipping parse,
    validation and the extension hooks; by its root plan (``resolvers.fastpath.root_plan``) when it has
    one and the request takes the plain path (``planned`` is then called).

    Raises:
        Exception: Only what graphql-core's ``execute`` itself raises (never a resolver's error,
            which is in the result); the caller then runs the standard path.
    """
    started = time.perf_counter()
    planned_result = None
    if prepared.root is not None:
        planned_result = await run_root_plan(
            prepared.root,
            schema=graphql_schema(schema),
            context_value=context_value,
            root_value=root_value,
            variable_values=variable_values,
            operation_extensions=operation_extensions,
            is_awaitable=optimized_is_awaitable,
        )
        if planned_result is not None and planned is not None:
            planned()
    result: GraphQLExecutionResult
    if planned_result is not None:
        result = planned_result
    else:
        result = await await_maybe(
            execute_function(schema)(
                graphql_schema(schema),
                prepared.document,
                root_value=root_value,
                middleware=None,
                variable_values=variable_values,
                operation_name=prepared.operation_name,
                context_value=context_value,
                is_awaitable=optimized_is_awaitable,
                operation_extensions=operation_extensions,
                **executor_kwargs(schema.execution_context_class),
            )
        )
    errors = result.errors
    if errors:
        process_errors(schema, errors)
        errors = mask_errors(errors)
    prepared.metrics.observe(time.perf_counter() - started, failed=bool(errors))
    return ExecutionResult(data=result.data, errors=errors, extensions={})


def well_formed(operation_name: object, variables: object, extensions: object) -> bool:
    """Whether a request's ``operationName``, ``variables`` and ``extensions`` have the types of
    the GraphQL-over-HTTP spec ("Request Parameters": a string, objects, or absent). The HTTP
    view refuses other requests before this (400); a direct call of ``Schema.execute`` failing
    this goes to Strawberry's pipeline, which answers it as a request error."""
    return (
        (operation_name is None or isinstance(operation_name, str))
        and (variables is None or isinstance(variables, dict))
        and (extensions is None or isinstance(extensions, dict))
    )


def covered_extensions() -> frozenset[type]:
    """Extension classes whose effect a prepared operation keeps (module docstring); exactly
    these classes, not their subclasses, which may add hooks."""
    from strawberry.extensions import (
        AddValidationRules,
        DisableIntrospection,
        MaxTokensLimiter,
        ParserCache,
        ValidationCache,
    )

    from ..errors import ErrorMasking
    from ..metrics import OperationMetrics
    from ..operation_name import OperationNameRequired

    return frozenset(
        {
            AddValidationRules,
            DisableIntrospection,
            MaxTokensLimiter,
            ParserCache,
            ValidationCache,
            ErrorMasking,
            OperationMetrics,
            OperationNameRequired,
        }
    )


def extension_class(factory: object) -> type | None:
    """The class an extension factory builds (a class, or a ``functools.partial`` of one)."""
    while not isinstance(factory, type):
        factory = getattr(factory, "func", None)
        if factory is None:
            return None
    return factory


def all_covered(factories: Iterable[object]) -> bool:
    """Whether every extension factory builds a class whose effect prepared operations keep."""
    covered = covered_extensions()
    for factory in factories:
        cls = extension_class(factory)
        if cls not in covered:
            return False
    return True


__all__ = [
    "PREPARED_CACHE_SIZE",
    "PreparedOperation",
    "PreparedOperations",
    "RecordPreparedOperation",
    "all_covered",
    "execute_prepared",
    "well_formed",
]
