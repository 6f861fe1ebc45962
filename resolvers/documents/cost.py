"""A document's cost before it runs (docs/api.md "Query cost"): points for each object it may
answer, multiplied by the page sizes and list sizes it asks for, and by the bytes of
``conversation(maxBytes)``, with the values of its variables. ``document_cost`` computes it in
time linear in the document (each fragment once, without recursion); ``QueryCost`` refuses a
document over ``RequestLimits.max_query_cost`` at Strawberry's validation step (``QUERY_TOO_COSTLY``)
and reports the cost in ``extensions.cost``; the prepared path asks ``operation_cost`` too. What
each field costs is ``resolvers.documents.weights``' table, which also bounds integer arguments
(``maxBytes``): one outside its range, as a literal or a variable, refuses the request there too,
once, with ``BAD_USER_INPUT`` (nothing runs).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final
from weakref import WeakKeyDictionary

from cachetools import LRUCache
from graphql import (
    GraphQLArgument,
    GraphQLError,
    GraphQLObjectType,
    GraphQLSchema,
    Undefined,
    build_schema,
    get_named_type,
    get_operation_ast,
    is_composite_type,
    is_list_type,
    is_non_null_type,
    value_from_ast_untyped,
)
from graphql.language import (
    DocumentNode,
    FieldNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
)
from strawberry.extensions import SchemaExtension

from ..context import RequestLimits
from .arguments import Arguments, out_of_range
from .fragments import dependency_order, fragment_definitions
from .weights import AGENTS, FIELD_COSTS, JSON_VALUE, KIB, OBJECT, OF_PAGE_SIZE, PAGE, FieldCost

CODE: Final = "QUERY_TOO_COSTLY"
"""The ``extensions.code`` of a document refused for its cost."""

MAX_COST: Final = 2**53 - 1
"""Costs are counted up to this (the largest integer a JSON client reads exactly), then stay there."""


@dataclass(frozen=True)
class CostLimits:
    """What a cost depends on beside the document and its variables."""

    max_page_size: int
    """The page size of a connection that asks for none (``RUNSGATE_MAX_PAGE_SIZE``), and its cap."""
    agents: int
    """The registered agents (the length of ``agents``)."""


@dataclass(frozen=True)
class Cost:
    """A document's cost, and the limit it was held to; ``refused``: the refusal of an argument
    outside its range (``weights.ArgumentRange``), when one is."""

    requested: int
    maximum: int
    refused: GraphQLError | None = None

    @property
    def over(self) -> bool:
        """Whether the document may not run: its cost passes the maximum, or an argument is
        outside its range (``refusal`` says which)."""
        return self.requested > self.maximum or self.refused is not None

    def report(self) -> dict[str, int]:
        """``extensions.cost`` of the answer (Shopify's names)."""
        return {"requestedQueryCost": self.requested, "maximumAvailable": self.maximum}

    def refusal(self) -> GraphQLError:
        """The request error refusing the document: ``refused``, else ``QUERY_TOO_COSTLY``."""
        if self.refused is not None:
            return self.refused
        return GraphQLError(
            f"The query's cost, {self.requested}, is over the limit of {self.maximum} (RUNSGATE_MAX_QUERY_COST): "
            "ask for fewer runs per page, fewer aliases or a smaller `maxBytes` (docs/api.md, Query cost).",
            extensions={"code": CODE, **self.report()},
        )


def _capped(value: int) -> int:
    return value if value < MAX_COST else MAX_COST


def _count(value: Any, cap: int) -> int:
    """A page size or a byte count as a request gives it, within ``0`` to ``cap`` (values the
    resolvers refuse cost what they would at the bound)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return -1
    return max(0, min(value, cap))


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


class _Walk:
    """One computation of ``document_cost``."""

    def __init__(self, schema: GraphQLSchema, values: Arguments, limits: CostLimits) -> None:
        self.schema = schema
        self.values = values
        self.limits = limits

    def page(self, rule: FieldCost, field: FieldNode) -> int:
        if rule.page == PAGE:
            asked = self.values.argument(field, "page")
            if isinstance(asked, dict) and (per_page := _count(asked.get("perPage"), self.limits.max_page_size)) >= 0:
                return per_page
            for name in ("first", "last"):
                if (size := _count(self.values.argument(field, name), self.limits.max_page_size)) >= 0:
                    return size
            return self.limits.max_page_size
        if isinstance(rule.page, tuple):
            listed = _at(self.values.argument(field, rule.page[0]), rule.page[1:])
            return len(listed) if isinstance(listed, list) else 1
        return 0

    def size(self, rule: FieldCost, field: FieldNode) -> int:
        if isinstance(rule.size, int):
            return rule.size
        if rule.size == AGENTS:
            return self.limits.agents
        if isinstance(rule.size, tuple):
            listed = _at(self.values.argument(field, rule.size[0]), rule.size[1:])
            return len(listed) if isinstance(listed, list) else 1
        return 1

    def own_points(self, rule: FieldCost, field: FieldNode, default_bytes: Any, page: int) -> int:
        points = rule.points + rule.points_per_page * page
        if rule.per_kib is not None:
            given = self.values.argument(field, rule.per_kib)
            size = _count(default_bytes if given is None else given, MAX_COST)
            points += -(-max(size, 0) // KIB)
        if rule.points_if_given is not None:
            path, more = rule.points_if_given
            if _at(self.values.argument(field, path[0]), path[1:]) is not None:
                points += more
        return points

    def selection_set(self, parent: Any, selection_set: SelectionSetNode, fragments: Mapping[str, _Sum]) -> _Sum:
        """The cost of ``selection_set`` on type ``parent``, each field below it once (an
        explicit stack, not recursion), a spread adding its fragment's sum."""
        root = _Frame(parent, iter(selection_set.selections))
        stack = [root]
        while stack:
            frame = stack[-1]
            for selection in frame.selections:
                if isinstance(selection, FieldNode):
                    child = self.field(frame, selection)
                    if child is not None:
                        stack.append(child)
                        break
                elif isinstance(selection, InlineFragmentNode):
                    condition = selection.type_condition
                    kind = frame.parent if condition is None else self.schema.get_type(condition.name.value)
                    stack.append(_Frame(kind, iter(selection.selection_set.selections), into=frame))
                    break
                elif isinstance(selection, FragmentSpreadNode):
                    known = fragments.get(selection.name.value)
                    if known is not None:
                        frame.add(known.fixed, known.paged, known.refused)
            else:
                stack.pop()
                if frame.into is not None:
                    frame.finish()
        return _Sum(root.fixed, root.paged, root.refused)

    def field(self, frame: _Frame, node: FieldNode) -> _Frame | None:
        """Add a leaf field's cost to ``frame``; for a field with a selection, the frame that
        computes it (its cost is added when that frame ends)."""
        name = node.name.value
        fields = getattr(frame.parent, "fields", None)
        if name.startswith("__") or fields is None or name not in fields:
            return None  # __typename, introspection (bounded by the schema), or an unknown field
        definition = fields[name]
        rule = FIELD_COSTS.get(f"{frame.parent.name}.{name}", FieldCost())
        refused = out_of_range(self.values, node, rule.ranges) if rule.ranges else None
        named = get_named_type(definition.type)
        if not is_composite_type(named) or node.selection_set is None:
            frame.add(JSON_VALUE if named.name == "JSON" else rule.points, 0, refused)
            return None
        page = self.page(rule, node)
        default_bytes = _default(definition.args[rule.per_kib]) if rule.per_kib in definition.args else None
        child = _Frame(
            named,
            iter(node.selection_set.selections),
            into=frame,
            field=_FieldItem(
                points=OBJECT + self.own_points(rule, node, default_bytes, page),
                page=page,
                size=self.size(rule, node) if _is_list(definition.type) else 1,
                of_page=rule.size == OF_PAGE_SIZE,
            ),
        )
        child.refused = refused
        return child


@dataclass(frozen=True)
class _Sum:
    """The cost of a selection set: ``fixed``, plus ``paged`` for each item of the page of the
    field it belongs to (a connection's ``nodes`` and ``edges``); ``refused``: the refusal of an
    argument in it outside its range (the first found)."""

    fixed: int
    paged: int
    refused: GraphQLError | None = None


@dataclass(frozen=True)
class _FieldItem:
    points: int
    page: int
    size: int
    of_page: bool


class _Frame:
    """A selection set being summed: a field's, or an inline fragment's (``field`` None)."""

    __slots__ = ("field", "fixed", "into", "paged", "parent", "refused", "selections")

    def __init__(
        self,
        parent: Any,
        selections: Iterator[Any],
        *,
        into: _Frame | None = None,
        field: _FieldItem | None = None,
    ) -> None:
        self.parent = parent
        self.selections = selections
        self.into = into
        self.field = field
        self.fixed = 0
        self.paged = 0
        self.refused: GraphQLError | None = None

    def add(self, fixed: int, paged: int, refused: GraphQLError | None = None) -> None:
        self.fixed = _capped(self.fixed + fixed)
        self.paged = _capped(self.paged + paged)
        if self.refused is None:
            self.refused = refused

    def finish(self) -> None:
        """Add this selection's cost to the frame it belongs to."""
        assert self.into is not None
        item = self.field
        if item is None:  # an inline fragment: its fields are its parent's
            self.into.add(self.fixed, self.paged, self.refused)
            return
        each = _capped(item.points + self.fixed + item.page * self.paged)
        total = _capped(item.size * each)
        if item.of_page:
            self.into.add(0, total, self.refused)
        else:
            self.into.add(total, 0, self.refused)


def _default(argument: GraphQLArgument) -> Any:
    """An argument's default value as the schema states it (None without one)."""
    if argument.default_value is not Undefined:
        return argument.default_value
    default = getattr(argument, "default", None)
    literal = getattr(default, "literal", Undefined)
    if literal is not Undefined and literal is not None:
        return value_from_ast_untyped(literal)
    value = getattr(default, "value", None)
    return None if value is Undefined else value


def _is_list(type_: Any) -> bool:
    while is_non_null_type(type_):
        type_ = type_.of_type
    return is_list_type(type_)


def _root_type(schema: GraphQLSchema, operation: OperationDefinitionNode) -> GraphQLObjectType | None:
    if operation.operation is OperationType.MUTATION:
        return schema.mutation_type
    if operation.operation is OperationType.SUBSCRIPTION:
        return schema.subscription_type
    return schema.query_type


def document_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
    limits: CostLimits,
) -> tuple[int, bool] | None:
    """The cost of the operation ``operation_name`` names in ``document`` (docs/api.md "Query
    cost"), for these variables: ``(cost, varied)``, ``varied`` telling whether a variable was
    read. A subscription costs what each of its answers may. Time linear in the document: each
    fragment is summed once, in dependency order, and reused at every spread.

    Returns:
        None when the document has no such operation (a request error of its own).
    """
    found = _document_sum(schema, document, operation_name, variables, limits)
    return None if found is None else (found[0].fixed, found[1])


def _document_sum(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
    limits: CostLimits,
) -> tuple[_Sum, bool] | None:
    """``document_cost``'s sum (its ``fixed`` the cost, with any argument refused), and ``varied``."""
    operation = get_operation_ast(document, operation_name)
    root = None if operation is None else _root_type(schema, operation)
    if operation is None or root is None:
        return None
    walk = _Walk(schema, Arguments(operation, variables), limits)
    definitions = fragment_definitions(document)
    fragments: dict[str, _Sum] = {}
    for name in dependency_order(definitions):
        fragment = definitions[name]
        parent = schema.get_type(fragment.type_condition.name.value)
        fragments[name] = walk.selection_set(parent, fragment.selection_set, fragments)
    total = walk.selection_set(root, operation.selection_set, fragments)
    return _Sum(_capped(total.fixed), 0, total.refused), walk.values.varied


_CACHE_SIZE: Final = 256
_LOCK = threading.Lock()
# (id(document), operation name, limits) -> (the document, kept alive so its id stays unique, its sum)
_FIXED: LRUCache[tuple[int, str | None, CostLimits], tuple[DocumentNode, _Sum]] = LRUCache(_CACHE_SIZE)


def operation_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
    limits: CostLimits,
    maximum: int,
) -> Cost | None:
    """``document_cost`` held to ``maximum``, with the refusal of an argument outside its range:
    computed once per document and operation when no variable changes it, else for each
    request's variables. None: no such operation."""
    key = (id(document), operation_name, limits)
    with _LOCK:
        known = _FIXED.get(key)
    if known is not None and known[0] is document:
        return Cost(known[1].fixed, maximum, known[1].refused)
    found = _document_sum(schema, document, operation_name, variables, limits)
    if found is None:
        return None
    total, varied = found
    if not varied:
        with _LOCK:
            _FIXED[key] = (document, total)
    return Cost(total.fixed, maximum, total.refused)


_SCHEMAS: WeakKeyDictionary[Any, GraphQLSchema] = WeakKeyDictionary()


def schema_of(schema: Any) -> GraphQLSchema:
    """The types, fields and arguments of a Strawberry schema as graphql-core's, built once per
    schema from the SDL it prints (``as_str``, public), which states all a cost depends on."""
    with _LOCK:
        known = _SCHEMAS.get(schema)
    if known is None:
        known = build_schema(schema.as_str(), assume_valid_sdl=True)
        with _LOCK:
            _SCHEMAS[schema] = known
    return known


def context_limits(context: Any) -> tuple[CostLimits, int] | None:
    """The cost limits of a request's ``Context``, and its ``max_query_cost`` (``Context.limits``); None for another
    context (a schema executed outside the server), whose documents are not costed."""
    limits = getattr(context, "limits", None)
    agents = getattr(context, "agents", None)
    if not isinstance(limits, RequestLimits) or agents is None:
        return None
    return CostLimits(max_page_size=limits.max_page_size, agents=len(agents)), limits.max_query_cost


_ABORTED: Final = "Validation aborted."
"""graphql-core's whole message when it stops validating a document: its overlapping-fields rule
spent its budget (``server.http.limits.OVERLAP_CHECK_BUDGET``), or fragments nest too deeply."""


def _too_complex() -> GraphQLError:
    return GraphQLError(
        "Validation aborted: the document is too complex to check. Too many fields share a response name, "
        "or too many fragments are spread in one selection set, to check that they merge; or its fragments "
        "nest too deeply. Select each field once."
    )


class QueryCost(SchemaExtension):
    """Refuse, at validation, a document whose cost passes ``RequestLimits.max_query_cost``: a request
    error (no ``data``) with ``QUERY_TOO_COSTLY``, ``requestedQueryCost`` and
    ``maximumAvailable``, or one with an argument outside its range (``BAD_USER_INPUT``,
    ``extensions.argument``); and report the cost of every document that validated in the answer's
    ``extensions.cost``, put in the execution context's ``extensions_results`` as it is found
    (Strawberry's asynchronous execution and subscriptions answer them with the extensions'
    results). Over HTTP and WebSocket alike (Strawberry's validation step); the prepared path
    computes the same (``resolvers.fastpath.prepared``). A document graphql-core gave up
    validating (``Validation aborted.``) is told why."""

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        limits = context_limits(context.context)
        # ValidationCache, before this in the schema's extensions, has validated the document
        errors = context.pre_execution_errors
        if errors and any(error.message == _ABORTED for error in errors):
            context.pre_execution_errors = [_too_complex() if error.message == _ABORTED else error for error in errors]
        if errors is not None and not errors and document is not None and limits is not None:
            schema = schema_of(context.schema)
            cost = operation_cost(schema, document, context.operation_name, context.variables, *limits)
            if cost is not None:
                context.extensions_results["cost"] = cost.report()
                if cost.over:
                    context.pre_execution_errors = [cost.refusal()]
        yield


__all__ = [
    "CODE",
    "MAX_COST",
    "Cost",
    "CostLimits",
    "QueryCost",
    "context_limits",
    "document_cost",
    "operation_cost",
    "schema_of",
]
