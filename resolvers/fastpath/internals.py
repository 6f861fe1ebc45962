"""Every private name of Strawberry and graphql-core that runsgate uses, in this one module.

They are reached only through the functions below (``tests/resolvers/test_fastpath_seam.py``
keeps it so); ``missing()`` checks them against the installed versions, and
``resolvers.fastpath.install`` builds the standard schema after one WARNING if one is missing.
The names, and what each is for: docs/architecture.md "Fast path".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

RESOLVE_INFO_FIELDS = (
    "field_name",
    "field_nodes",
    "return_type",
    "parent_type",
    "path",
    "schema",
    "fragments",
    "root_value",
    "operation",
    "variable_values",
    "context",
    "is_awaitable",
    "abort_signal",
    "async_helpers",
    "operation_extensions",
)
"""The fields of Strawberry's resolve info, in order (``resolve_info`` passes them by name)."""

_RESOLVE_INFO_CLASS = ("strawberry.schema.schema", "_OperationContextAwareGraphQLResolveInfo")
_EXECUTOR_KWARGS = ("strawberry.schema._graphql_core", "execution_context_class_kwargs")
_BASIC_RESOLVER_NAME = "_get_basic_result"
_BASIC_RESOLVER_MARK = "_is_default"

_found: dict[str, Any] = {}


def _resolve() -> list[str]:
    """Look the private classes and functions up again; the names not found (what was found
    before is kept: ``install`` uses none of it when anything is missing)."""
    problems: list[str] = []
    for key, (module, name) in (("info", _RESOLVE_INFO_CLASS), ("executor_kwargs", _EXECUTOR_KWARGS)):
        try:
            _found[key] = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            problems.append(f"{module}.{name}")
    return problems


def missing() -> list[str]:
    """The private names the fast path needs that the installed Strawberry and graphql-core lack
    or changed (empty when all are there as expected)."""
    problems = _resolve()
    info_class = _found.get("info")
    if info_class is not None and tuple(getattr(info_class, "_fields", ())) != RESOLVE_INFO_FIELDS:
        problems.append(f"the fields of {'.'.join(_RESOLVE_INFO_CLASS)}")
    from strawberry.asgi import GraphQL
    from strawberry.schema import Schema
    from strawberry.types import ExecutionContext

    for owner, name in (
        (Schema, "_get_execute_function"),
        (Schema, "_process_errors"),
        (GraphQL, "_get_stream_transport_from_headers"),
        (GraphQL, "_handle_errors"),
    ):
        if not callable(getattr(owner, name, None)):
            problems.append(f"{owner.__qualname__}.{name}")
    context = ExecutionContext(query=None, schema=None, allowed_operations=(), provided_operation_name="x")  # type: ignore[arg-type]
    if getattr(context, "_provided_operation_name", None) != "x":
        problems.append("ExecutionContext._provided_operation_name")
    if not _basic_resolver_marked():
        problems.append(f"the {_BASIC_RESOLVER_MARK} mark of Strawberry's {_BASIC_RESOLVER_NAME}")
    return problems


def _basic_resolver_marked() -> bool:
    """Whether a field without a resolver of a tiny schema gets Strawberry's basic resolver."""
    import strawberry

    probe = strawberry.type(type("Probe", (), {"__annotations__": {"value": int}}))
    query = strawberry.type(type("ProbeQuery", (), {"__annotations__": {"probe": probe}}))
    graphql = graphql_schema(strawberry.Schema(query=query))
    probe_type = graphql.get_type("Probe")
    field = probe_type.fields.get("value") if probe_type is not None else None
    return field is not None and is_basic_resolver(field.resolve)


def graphql_schema(schema: Any) -> Any:
    """The ``GraphQLSchema`` of a Strawberry schema."""
    return schema._schema


def execute_function(schema: Any) -> Callable[..., Any]:
    """graphql-core's execute function that the Strawberry schema's configuration chooses."""
    return schema._get_execute_function()  # type: ignore[no-any-return]


def process_errors(schema: Any, errors: list[Any]) -> None:
    """The schema's processing of a result's errors, as its standard path runs it."""
    schema._process_errors(errors)


def executor_kwargs(executor_class: type | None) -> dict[str, Any]:
    """The keyword arguments by which Strawberry hands its executor class to graphql-core."""
    return _found["executor_kwargs"](executor_class)  # type: ignore[no-any-return]


def provided_operation_name(context: Any, default: Any) -> Any:
    """The ``operationName`` the request of an ``ExecutionContext`` gave (``default`` if unknown)."""
    return getattr(context, "_provided_operation_name", default)


def resolve_info(**fields: Any) -> Any:
    """Strawberry's resolve info holding ``fields`` (every name of ``RESOLVE_INFO_FIELDS``)."""
    return _found["info"](**fields)


def is_basic_resolver(resolve: object) -> bool:
    """Whether a GraphQL field's resolver is Strawberry's attribute-reading resolver of a field
    without a resolver of its own (it ignores its ``info``)."""
    return (
        getattr(resolve, _BASIC_RESOLVER_MARK, False) is True
        and getattr(resolve, "__name__", None) == _BASIC_RESOLVER_NAME
    )


def stream_transport(view: Any, headers: Mapping[str, str]) -> object | None:
    """The streaming transport a request's headers ask the view for, or None."""
    return view._get_stream_transport_from_headers(headers)  # type: ignore[no-any-return]


def handle_errors(view: Any, errors: list[Any], response_data: Any) -> None:
    """The view's hook for the errors of a response (as Strawberry's ``run`` calls it)."""
    view._handle_errors(errors, response_data)


_resolve()

__all__ = [
    "RESOLVE_INFO_FIELDS",
    "execute_function",
    "executor_kwargs",
    "graphql_schema",
    "handle_errors",
    "is_basic_resolver",
    "missing",
    "process_errors",
    "provided_operation_name",
    "resolve_info",
    "stream_transport",
]
