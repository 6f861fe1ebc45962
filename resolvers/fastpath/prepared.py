"""Prepared operations: a query or mutation document that already parsed and validated is
executed directly, without Strawberry's per-request extension pipeline (docs/architecture.md
"Fast path").

``PreparedOperations`` keeps, per text and ``operationName``, each query or mutation operation
that reached execution once (``RecordPreparedOperation``); ``execute_prepared`` runs it again with
the schema's executor, then the error processing, masking and metrics of the standard path, in its
order (a query's root plan first, when it has one). Only when every extension is covered
(``all_covered``). The steps, the cases left to Strawberry, and the rule that an operation with
effects runs at most once (``PreparedSchema.execute``): docs/architecture.md "Fast path".
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache
from graphql import ExecutionResult as GraphQLExecutionResult
from graphql import GraphQLError, GraphQLSchema, located_error
from graphql.language import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)
from strawberry.execution.is_awaitable import optimized_is_awaitable
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType
from strawberry.utils.await_maybe import await_maybe

from ..documents.cost import context_limits, operation_cost, schema_of
from ..metrics import OperationLabels, operation_metrics
from .internals import execute_function, executor_kwargs, graphql_schema, process_errors, provided_operation_name
from .root_plan import RootPlan, plan_root, run_root_plan

if TYPE_CHECKING:
    from strawberry.schema import Schema

PREPARED_CACHE_SIZE = 256
"""Prepared operations kept (least recently used dropped first), as many as ``ParserCache``."""


@dataclass(frozen=True, slots=True)
class Execution:
    """What executing an operation needs of a Strawberry schema, through ``internals``: its
    ``GraphQLSchema``, graphql-core's execute function and the executor's keyword arguments."""

    graphql: GraphQLSchema
    execute: Callable[..., Any]
    executor_kwargs: dict[str, Any]

    @classmethod
    def of(cls, schema: Schema) -> Execution:
        """Looked up for ``schema`` (fixed once it is built)."""
        kwargs = executor_kwargs(schema.execution_context_class)
        return cls(graphql_schema(schema), execute_function(schema), kwargs)


class ExecutionBegan(Exception):
    """A fault of ``execute_prepared`` once the operation's execution began (a resolver may have
    run); the fault itself is its ``__cause__``, ``elapsed`` the seconds since it started,
    ``extensions`` the result's extensions (the cost)."""

    def __init__(self, message: str, elapsed: float, extensions: dict[str, Any]) -> None:
        super().__init__(message)
        self.elapsed = elapsed
        self.extensions = extensions


@dataclass(frozen=True, slots=True)
class PreparedOperation:
    """A query or mutation operation of a document that parsed and validated: what a request
    needs to run it."""

    document: DocumentNode
    operation_name: str | None
    """The name Strawberry executes the document under: the request's ``operationName``, or
    the name of the document's first operation when it gave none (``ExecutionContext.operation_name``)."""
    metrics: OperationLabels
    """The operation's label values and metric children (``resolvers.metrics.operation_metrics``)."""
    root: RootPlan | None = None
    """Its root plan (``resolvers.fastpath.root_plan``): a query's single root field that qualifies."""
    operation_type: OperationType = OperationType.QUERY
    """``QUERY`` or ``MUTATION``; a mutation has effects, so it runs at most once (``PreparedSchema.execute``)."""
    first_field: FieldNode | None = None
    """The operation's first root field in the document, where ``fault_result`` locates a fault."""


class PreparedOperations:
    """An LRU of ``PreparedOperation`` keyed by ``(query text, operationName)``.

    Args:
        mask_errors: ``ErrorMasking``'s error processing (errors in, errors to answer out).
        maxsize: Entries kept.
        root_plans: Plan the root field of each recorded query (``resolvers.fastpath.root_plan``).

    Attributes:
        executed: Requests executed as prepared operations (``execute_prepared``).
        planned: Those of them answered by their root plan (``resolvers.fastpath.root_plan``).
        execution: What ``execute_prepared`` calls of the schema served (``bind``).
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
        self.execution: Execution | None = None

    def bind(self, schema: Schema) -> None:
        """Serve ``schema``: look up once what ``execute_prepared`` calls of it (``Execution``)."""
        self.execution = Execution.of(schema)

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
        operation_type: OperationType = OperationType.QUERY,
    ) -> None:
        """Keep a query or mutation operation that reached execution (parsed, validated, allowed),
        asked for as ``operation_name`` and executed by Strawberry under ``executed_name``; with
        ``schema``, also a query's root plan (``resolvers.fastpath.root_plan.plan_root``)."""
        plans = schema is not None and self.root_plans and operation_type is OperationType.QUERY
        root = plan_root(schema, document, executed_name) if plans and schema is not None else None
        metrics = operation_metrics(document, executed_name)
        first = first_root_field(document, executed_name)
        entry = PreparedOperation(document, executed_name, metrics, root, operation_type, first)
        with self._lock:
            self._entries.setdefault((query, operation_name), entry)

    def recorder(self) -> RecordPreparedOperation:
        """A new ``RecordPreparedOperation`` for this cache (an extension factory for the schema)."""
        return RecordPreparedOperation(self)


class RecordPreparedOperation(SchemaExtension):
    """Records each query or mutation operation that reached execution in a ``PreparedOperations``, as the
    operation ends (``on_operation``, the hook entered with the extension's making).

    Reached execution: validated without an error (the validation's list of errors is empty:
    ``ValidationCache``'s or Strawberry's, set only once the document parsed and its operation
    type was allowed, and cleared by no extension; an error of execution is set on the context
    only after this hook, by ``Schema.execute``'s handling of the result)."""

    def __init__(self, prepared: PreparedOperations) -> None:
        self.prepared = prepared

    def on_operation(self) -> Iterator[None]:
        yield
        context = self.execution_context
        document = context.graphql_document
        errors = context.pre_execution_errors
        if errors is None or errors or document is None:
            return  # not parsed, not validated, or refused
        operation_type = context.operation_type
        if operation_type in (OperationType.QUERY, OperationType.MUTATION):  # HTTP serves no subscription
            # the operationName the request gave (None included): Strawberry keeps it in this
            # attribute (``ExecutionContext.__post_init__``); ``operation_name`` would answer the
            # document's only operation's name instead. Nothing is recorded should it be missing.
            provided = provided_operation_name(context, _MISSING)
            if isinstance(context.query, str) and (provided is None or isinstance(provided, str)):
                schema = graphql_schema(context.schema)
                self.prepared.record(context.query, provided, document, context.operation_name, schema, operation_type)


_MISSING = object()


async def execute_prepared(
    schema: Schema,
    operations: PreparedOperations,
    prepared: PreparedOperation,
    *,
    variable_values: dict[str, Any] | None,
    context_value: Any,
    root_value: Any,
    operation_extensions: dict[str, Any] | None,
) -> ExecutionResult | None:
    """Execute a prepared operation of ``operations`` as ``Schema.execute`` would (module
    docstring), skipping parse, validation and the extension hooks; a query by its root plan
    (``resolvers.fastpath.root_plan``) when it has one and the request takes the plain path.
    The result's extensions hold the cost as ``QueryCost`` reports it (``resolvers.documents.cost``).

    Returns:
        None, before executing anything, when the operation costs more than the request's limits
        allow: Strawberry's pipeline then refuses it.

    Raises:
        ExecutionBegan: From any exception once execution began, i.e. from the call of the root
            plan or of graphql-core's ``execute`` on (never a resolver's error, which is in the
            result). Before, the cost's own exceptions.
    """
    limits = context_limits(context_value)  # else QueryCost reads no limits: no cost reported
    cost = (
        None
        if limits is None
        else operation_cost(schema_of(schema), prepared.document, prepared.operation_name, variable_values, *limits)
    )
    if cost is not None and cost.over:
        return None
    extensions = {} if cost is None else {"cost": cost.report()}
    execution = operations.execution or Execution.of(schema)
    operations.executed += 1
    started = time.perf_counter()
    try:
        planned_result = None
        if prepared.root is not None:
            planned_result = await run_root_plan(
                prepared.root,
                schema=execution.graphql,
                context_value=context_value,
                root_value=root_value,
                variable_values=variable_values,
                operation_extensions=operation_extensions,
                is_awaitable=optimized_is_awaitable,
            )
            if planned_result is not None:
                operations.planned += 1
        result: GraphQLExecutionResult
        if planned_result is not None:
            result = planned_result
        else:
            result = await await_maybe(
                execution.execute(
                    execution.graphql,
                    prepared.document,
                    root_value=root_value,
                    middleware=None,
                    variable_values=variable_values,
                    operation_name=prepared.operation_name,
                    context_value=context_value,
                    is_awaitable=optimized_is_awaitable,
                    operation_extensions=operation_extensions,
                    **execution.executor_kwargs,
                )
            )
        errors = result.errors
        if errors:
            process_errors(schema, errors)
            errors = operations.mask_errors(errors)
        prepared.metrics.observe(time.perf_counter() - started, failed=bool(errors))
        return ExecutionResult(data=result.data, errors=errors, extensions=extensions)
    except Exception as fault:
        elapsed = time.perf_counter() - started
        message = f"prepared operation {prepared.operation_name!r} failed"
        raise ExecutionBegan(message, elapsed, extensions) from fault


def fault_result(
    schema: Schema, operations: PreparedOperations, prepared: PreparedOperation, began: ExecutionBegan
) -> ExecutionResult:
    """The answer to the fault of ``began`` (raised by ``execute_prepared`` once the operation's
    execution began), as the standard path answers a resolver's unexpected exception: located at
    the operation's first root field (so not a request error), through the schema's error
    processing and ``operations.mask_errors`` (which log it with its traceback and answer
    "Unexpected error."), with ``data`` null and ``began.extensions``; counted as a failed operation."""
    node = prepared.first_field
    path = None if node is None else [(node.alias or node.name).value]
    fault = began.__cause__ if isinstance(began.__cause__, Exception) else began
    errors: list[GraphQLError] = [located_error(fault, None if node is None else [node], path)]
    process_errors(schema, errors)
    errors = operations.mask_errors(errors)
    with contextlib.suppress(Exception):  # the fault may be the metrics' own: the answer must not fail on it
        prepared.metrics.observe(began.elapsed, failed=True)
    return ExecutionResult(data=None, errors=errors, extensions=began.extensions)


def first_root_field(document: DocumentNode, operation_name: str | None) -> FieldNode | None:
    """The first field, in the document's order, of the root selection of the operation
    ``operation_name`` (the only one when None), looking into fragments; None if there is none."""
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    for operation in operations:
        if operation_name is None or (operation.name is not None and operation.name.value == operation_name):
            return _first_field(operation.selection_set, fragments, set())
    return None


def _first_field(
    selection_set: SelectionSetNode, fragments: dict[str, FragmentDefinitionNode], seen: set[str]
) -> FieldNode | None:
    for selection in selection_set.selections:
        if isinstance(selection, FieldNode):
            return selection
        inner = None
        if isinstance(selection, InlineFragmentNode):
            inner = selection.selection_set
        elif isinstance(selection, FragmentSpreadNode) and selection.name.value not in seen:
            seen.add(selection.name.value)
            fragment = fragments.get(selection.name.value)
            inner = None if fragment is None else fragment.selection_set
        found = None if inner is None else _first_field(inner, fragments, seen)
        if found is not None:
            return found
    return None


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

    from ..documents.cost import QueryCost
    from ..documents.operation_name import OperationNameRequired
    from ..errors import ErrorMasking
    from ..metrics import OperationMetrics

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
            QueryCost,
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
    "Execution",
    "ExecutionBegan",
    "PreparedOperation",
    "PreparedOperations",
    "RecordPreparedOperation",
    "all_covered",
    "execute_prepared",
    "fault_result",
    "first_root_field",
    "well_formed",
]
