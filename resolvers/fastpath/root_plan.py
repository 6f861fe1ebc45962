"""Root plans: the one root field of a prepared query, resolved and completed without building
graphql-core's executor (docs/architecture.md "Fast path").

``plan_root`` gives a ``RootPlan`` to a query whose selection is one field of the query type
returning an object (no directives, no ``@defer``/``@stream``); ``run_root_plan`` does for each
request what graphql-core does for that field, with graphql-core's own functions, and hands the
request back whenever it leaves the plain path. The steps: docs/architecture.md "Fast path".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLField,
    GraphQLObjectType,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    is_non_null_type,
    is_object_type,
    located_error,
)
from graphql.execution import ExecutionResult
from graphql.execution.values import get_argument_values, get_variable_values
from graphql.language import DocumentNode
from graphql.pyutils import Path

from ..metrics import COMPILED
from .compiled import compiled_object
from .internals import resolve_info

MAX_COERCION_ERRORS = 50
"""``Executor.build``'s default, which Strawberry keeps."""


class NoExecutor(Exception):
    """Raised by ``RootPlan`` resolve infos when a resolver asks for ``async_helpers``: the request
    is then executed by graphql-core's executor, which has them."""


class _NoAsyncHelpers:
    """Stands for ``GraphQLResolveInfoHelpers`` in a root plan's resolve info."""

    def __getattr__(self, name: str) -> Any:
        raise NoExecutor(f"info.async_helpers.{name} needs graphql-core's executor")


_NO_ASYNC_HELPERS = _NoAsyncHelpers()


@dataclass(frozen=True, slots=True)
class RootPlan:
    """What ``run_root_plan`` needs of a prepared query with a single root field."""

    operation: OperationDefinitionNode
    fragment_definitions: dict[str, FragmentDefinitionNode]
    query_type: GraphQLObjectType
    field_def: GraphQLField
    node: FieldNode
    response_key: str
    path: Path
    object_type: GraphQLObjectType
    non_null: bool


def plan_root(schema: GraphQLSchema, document: DocumentNode, operation_name: str | None) -> RootPlan | None:
    """The ``RootPlan`` of a validated document's operation ``operation_name``, or None when it
    does not qualify (module docstring)."""
    if schema.get_directive("defer") is not None or schema.get_directive("stream") is not None:
        return None
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    fragments = [d for d in document.definitions if isinstance(d, FragmentDefinitionNode)]
    if operation_name is None:
        chosen = operations if len(operations) == 1 else []
    else:
        chosen = [o for o in operations if o.name is not None and o.name.value == operation_name][-1:]
    query_type = schema.query_type
    if not chosen or query_type is None or any(f.variable_definitions for f in fragments):
        return None
    (operation,) = chosen
    selections = operation.selection_set.selections
    if operation.operation is not OperationType.QUERY or operation.directives or len(selections) != 1:
        return None
    node = selections[0]
    if not isinstance(node, FieldNode) or node.directives or node.name.value.startswith("__"):
        return None
    field_def = query_type.fields.get(node.name.value)
    if field_def is None or field_def.resolve is None:
        return None
    non_null = is_non_null_type(field_def.type)
    object_type = field_def.type.of_type if non_null else field_def.type
    if not is_object_type(object_type):
        return None
    response_key = node.alias.value if node.alias else node.name.value
    return RootPlan(
        operation=operation,
        fragment_definitions={f.name.value: f for f in fragments},
        query_type=query_type,
        field_def=field_def,
        node=node,
        response_key=response_key,
        path=Path(None, response_key, query_type.name),
        object_type=object_type,
        non_null=non_null,
    )


async def run_root_plan(
    plan: RootPlan,
    *,
    schema: GraphQLSchema,
    context_value: Any,
    root_value: Any,
    variable_values: dict[str, Any] | None,
    operation_extensions: dict[str, Any] | None,
    is_awaitable: Callable[[Any], bool],
) -> ExecutionResult | None:
    """graphql-core's result for the plan's operation, or None where graphql-core's executor
    must answer it (module docstring). Raises nothing but what the resolver's awaitable raises
    outside ``Exception`` (cancellation)."""
    variables = get_variable_values(
        schema, plan.operation.variable_definitions or (), variable_values or {}, max_errors=MAX_COERCION_ERRORS
    )
    if isinstance(variables, list):
        return None  # request errors: graphql-core reports them
    field_def, node = plan.field_def, plan.node
    # asked before the resolver runs, so that a selection not compiled (yet) costs one resolver call
    compiled = compiled_object(
        plan.object_type, (node,), plan.operation, plan.fragment_definitions, variables.coerced, is_awaitable
    )
    if compiled is None:
        return None
    try:
        args = get_argument_values(field_def, node, variables) if field_def.args or node.arguments else {}
    except Exception:
        return None  # graphql-core locates the error
    info = resolve_info(
        field_name=node.name.value,
        field_nodes=[node],
        return_type=field_def.type,
        parent_type=plan.query_type,
        path=plan.path,
        schema=schema,
        fragments=plan.fragment_definitions,
        root_value=root_value,
        operation=plan.operation,
        variable_values=variables.coerced,
        context=context_value,
        is_awaitable=is_awaitable,
        abort_signal=None,  # graphql-core's abort signal: Strawberry passes none
        async_helpers=_NO_ASYNC_HELPERS,
        operation_extensions=operation_extensions,  # None when there are none, as from Strawberry's executor
    )
    try:
        result = field_def.resolve(root_value, info, **args)  # type: ignore[misc]
        if is_awaitable(result):
            result = await result
    except NoExecutor:
        return None
    except Exception as raw_error:  # Executor.handle_field_error, then execute_operation at the root
        error: GraphQLError = located_error(raw_error, [node], plan.path.as_list())
        return ExecutionResult(None if plan.non_null else {plan.response_key: None}, [error])
    try:
        value = compiled.complete_non_null(result) if plan.non_null else compiled.complete(result)
    except Exception:
        return None  # graphql-core completes it, and reports what it finds
    COMPILED.inc()
    return ExecutionResult({plan.response_key: value}, None)


__all__ = ["NoExecutor", "RootPlan", "plan_root", "run_root_plan"]
