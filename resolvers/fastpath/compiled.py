"""Compiled completion: objects whose selected fields are all plain attributes are serialized by
generated code instead of graphql-core's per-field execution (docs/architecture.md "Fast path").

``CompiledExecutor`` is Strawberry's executor with ``collect_and_execute_subfields`` changed: for
a query, an object whose collected fields are ``__typename`` or basic fields of scalars, enums
or such objects is completed by ``_Generator``'s code, giving graphql-core's dict; anything else
falls back to graphql-core for that whole object. What qualifies, what falls back, and
why: docs/architecture.md "Fast path".
"""

from __future__ import annotations

import keyword
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cachetools import LRUCache
from graphql import (
    GraphQLBoolean,
    GraphQLField,
    GraphQLID,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLString,
    OperationType,
    Undefined,
    is_leaf_type,
    is_list_type,
    is_non_null_type,
    is_object_type,
)
from graphql.execution.collect_fields import FieldDetailsList
from graphql.language import FieldNode, OperationDefinitionNode, VariableNode
from graphql.pyutils import Path
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.types.field import StrawberryField

from ..documents.executor import PerEventMemo
from ..metrics import COMPILED, COMPILED_FALLBACK
from .internals import is_basic_resolver

ObjectSerializer = Callable[[Any], dict[str, Any]]
"""Completes one object value (already checked by graphql-core) into its response dict; raises
``_Fallback`` (or anything) where graphql-core would not produce the same dict."""

INERT_TYPES = frozenset({str, int, float, bool, dict, list, tuple, datetime})
"""Value types whose exact instances are neither exceptions nor awaitables (no check needed)."""

SHARED_CACHE_SIZE = 1024
"""Compiled objects kept across requests (least recently used dropped first)."""


class _Fallback(Exception):
    """The compiled serializer met a value that graphql-core completes differently."""


@dataclass(frozen=True, slots=True)
class _CompiledObject:
    """The generated functions of one object type under one selection."""

    serialize: ObjectSerializer
    """The response dict of a value graphql-core already accepted for the type."""
    complete: Callable[[Any], dict[str, Any] | None]
    """``complete_value`` for the nullable type: null stays null, other values are checked."""
    complete_non_null: ObjectSerializer
    """``complete_value`` for the non-null type: null falls back."""


class CompiledExecutor(PerEventMemo):
    """graphql-core's executor, completing qualifying objects of query results directly.

    Pass it as ``execution_context_class`` to a Strawberry schema. Results are identical to
    Strawberry's executor (``StrawberryGraphQLCoreExecutionContext``); see the module docstring for
    what qualifies and when it falls back.

    Attributes:
        compiled_objects: Objects of this operation completed by a compiled serializer.
        fallbacks: Compiled attempts that fell back to graphql-core.
    """

    compiled_objects: int
    fallbacks: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        middleware = self.middleware_manager
        self._compiling = (
            self.operation.operation is OperationType.QUERY
            and not (middleware is not None and middleware.middlewares)
            # incremental delivery (@defer, @stream) splits results: graphql-core's business
            and self.schema.get_directive("defer") is None
            and self.schema.get_directive("stream") is None
        )
        # (object type, id(field details list)) -> (the list, kept alive so its id stays
        # unique, and its compiled object or None when the selection does not qualify)
        self._compiled: dict[tuple[GraphQLObjectType, int], tuple[FieldDetailsList, _CompiledObject | None]] = {}
        self._directive_values: tuple[Any, ...] | None = None
        self.compiled_objects = 0
        self.fallbacks = 0

    def collect_and_execute_subfields(
        self,
        return_type: GraphQLObjectType,
        field_details_list: FieldDetailsList,
        path: Path,
        result: Any,
        position_context: Any,
    ) -> Any:
        if self._compiling:
            compiled = self._shared_compiled(return_type, field_details_list)
            if compiled is not None:
                try:
                    completed = compiled.serialize(result)
                except Exception:  # any surprise: graphql-core completes this object
                    self.fallbacks += 1
                    COMPILED_FALLBACK.inc()
                else:
                    self.compiled_objects += 1
                    COMPILED.inc()
                    return completed
        return super().collect_and_execute_subfields(return_type, field_details_list, path, result, position_context)

    def _shared_compiled(
        self, object_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> _CompiledObject | None:
        """``_compile_object``, reused across requests of the same document.

        What ``collect_subfields`` returns below an object depends only on the object type, the
        field nodes (the same objects for every request of a document, thanks to
        ``ParserCache``), the document's fragments and the values of the variables its
        directives read (``@skip(if: $v)``). Those make the key; the entry keeps the nodes
        alive, so their ids stay unique while it exists. Within a request, the list of field
        details is the same object for every value completed under it (a page's 20 edges), so
        the request's own memo is asked first.
        """
        known = self._compiled.get((object_type, id(field_details_list)))
        if known is not None:
            return known[1]
        nodes = tuple(detail.node for detail in field_details_list)
        if self._directive_values is None:
            self._directive_values = _directive_values(
                self.operation, self.fragment_definitions, self.variable_values.coerced
            )
        key = _shared_key(object_type, nodes, self._directive_values, self.is_awaitable)
        with _LOCK:
            cached = _SHARED.get(key)
        if cached is not None:
            compiled = cached[1]
        else:
            try:
                compiled = self._compile_object(object_type, field_details_list)
            except Exception:
                # e.g. a directive's variable that graphql-core only rejects if it ever collects
                # that nested selection: graphql-core completes the object and raises where it would
                compiled = None
            else:
                with _LOCK:
                    _SHARED[key] = (nodes, compiled)
        self._compiled[(object_type, id(field_details_list))] = (field_details_list, compiled)
        return compiled

    def _compile_object(
        self, object_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> _CompiledObject | None:
        """The compiled object of ``object_type`` under this selection, or None when it does not
        qualify."""
        key = (object_type, id(field_details_list))
        known = self._compiled.get(key)
        if known is not None:
            return known[1]
        grouped_field_set, new_defer_usages, _forbidden = self.collect_subfields(object_type, field_details_list)
        compiled = None
        if not new_defer_usages:
            generator = _Generator(object_type, self.is_awaitable)
            for response_key, details in grouped_field_set.items():
                if not self._add_field(generator, object_type, response_key, details):
                    break
            else:
                compiled = generator.build()
        self._compiled[key] = (field_details_list, compiled)
        return compiled

    def _add_field(
        self, generator: _Generator, parent_type: GraphQLObjectType, response_key: str, details: FieldDetailsList
    ) -> bool:
        """Add one collected field to the generated code; False when it does not qualify."""
        if any(detail.fragment_variable_values is not None for detail in details):
            return False  # experimental fragment arguments: graphql-core's business
        name = details[0].node.name.value
        if name == "__typename":
            generator.constant(response_key, parent_type.name)
            return True
        field_def = self.schema.get_field(parent_type, name)
        if field_def is None or field_def.args or field_def.resolve is None:
            return False
        field = _basic_field(field_def)
        if field is None or not self._compile_below(field_def.type, details):
            return False
        generator.field(response_key, field_def.type, field, field_def.resolve, self._nested(details))
        return True

    def _compile_below(self, type_: GraphQLOutputType, details: FieldDetailsList) -> bool:
        """Whether every type reachable in ``type_`` compiles under this selection."""
        while is_non_null_type(type_) or is_list_type(type_):
            type_ = type_.of_type
        if is_leaf_type(type_):
            return True
        if is_object_type(type_):
            return self._compile_object(type_, details) is not None
        return False  # interfaces and unions: graphql-core resolves the runtime type

    def _nested(self, details: FieldDetailsList) -> Callable[[GraphQLObjectType], _CompiledObject]:
        def nested(object_type: GraphQLObjectType) -> _CompiledObject:
            compiled = self._compile_object(object_type, details)
            assert compiled is not None  # checked by _compile_below
            return compiled

        return nested


class _Generator:
    """Writes the source of one object's functions (``_CompiledObject``), field by field.

    For ``{ runId status }`` on ``SuspendedRun`` the body is::

        def serialize(source):
            v1 = source.run_id
            if v1 is None or v1 is U: raise F
            if type(v1) is not str:
                if type(v1) not in I and (isinstance(v1, Exception) or aw(v1)): raise F
                v1 = k2(v1)
                if v1 is None or v1 is U: raise F
            v3 = source.status
            if v3 is None or v3 is U: raise F
            if type(v3) not in I and (isinstance(v3, Exception) or aw(v3)): raise F
            v3 = k4(v3)
            if v3 is None or v3 is U: raise F
            return {'runId': v1, 'status': v3}

    plus ``complete`` and ``complete_non_null``, which first check the object itself as
    graphql-core would (null, exception, awaitable, ``is_type_of``).

    Names bound in the namespace: ``U`` (``Undefined``), ``F`` (the fallback exception), ``I``
    (``INERT_TYPES``), ``aw`` (the executor's ``is_awaitable``), ``k<i>`` (a leaf type's
    ``coerce_output_value``), ``o<i>`` (a nested compiled object), ``g<i>`` (a resolver that is
    not a plain attribute read). Response keys are GraphQL names and attributes are Python
    identifiers, so the source holds nothing else.
    """

    def __init__(self, object_type: GraphQLObjectType, is_awaitable: Callable[[Any], bool]) -> None:
        self.object_type = object_type
        self.namespace: dict[str, Any] = {
            "U": Undefined,
            "F": _Fallback,
            "I": INERT_TYPES,
            "aw": is_awaitable,
            "is_type_of": object_type.is_type_of,
            "origin": _inert_origin(object_type),
        }
        self.lines: list[str] = []
        self.entries: list[str] = []
        self.count = 0

    def constant(self, response_key: str, value: str) -> None:
        self.entries.append(f"{response_key!r}: {value!r}")

    def field(
        self,
        response_key: str,
        type_: GraphQLOutputType,
        field: StrawberryField,
        resolve: Callable[..., Any],
        nested: Callable[[GraphQLObjectType], _CompiledObject],
    ) -> None:
        """Read and complete one basic field (``_basic_field``); ``resolve`` is its resolver."""
        variable = self._name("v")
        self.lines.append(f"    {variable} = {self._read(field, resolve)}")
        self.lines.extend(self._complete(variable, type_, nested, "    "))
        self.entries.append(f"{response_key!r}: {variable}")

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def _bind(self, prefix: str, value: Any) -> str:
        name = self._name(prefix)
        self.namespace[name] = value
        return name

    def _read(self, field: StrawberryField, resolve: Callable[..., Any]) -> str:
        """``source.<attribute>`` when the basic field reads with the default ``getattr``
        (``StrawberryField.get_result``'s exact effect, without three calls); else a call of its
        resolver, which ignores its info."""
        name = field.python_name
        if field.default_resolver is getattr and name.isidentifier() and not keyword.iskeyword(name):
            return f"source.{name}"
        return f"{self._bind('g', resolve)}(source, None)"

    def _complete(
        self,
        variable: str,
        type_: GraphQLOutputType,
        nested: Callable[[GraphQLObjectType], _CompiledObject],
        indent: str,
    ) -> list[str]:
        """Statements replacing ``variable`` by its completed value (GraphQL spec, "Value
        Completion"), raising ``F`` wherever graphql-core would report an error."""
        if is_non_null_type(type_):
            inner = type_.of_type
            if is_object_type(inner):
                return [f"{indent}{variable} = {self._bind('o', nested(inner).complete_non_null)}({variable})"]
            lines = [f"{indent}if {variable} is None or {variable} is U: raise F"]
            return lines + self._complete_value(variable, inner, nested, indent)
        if is_object_type(type_):
            return [f"{indent}{variable} = {self._bind('o', nested(type_).complete)}({variable})"]
        lines = [f"{indent}if {variable} is None or {variable} is U: {variable} = None", f"{indent}else:"]
        return lines + self._complete_value(variable, type_, nested, indent + "    ")

    def _complete_value(
        self,
        variable: str,
        type_: GraphQLOutputType,
        nested: Callable[[GraphQLObjectType], _CompiledObject],
        indent: str,
    ) -> list[str]:
        """Statements completing a ``variable`` known not to be null, of a nullable ``type_``."""
        if is_list_type(type_):
            item = self._name("x")
            items = self._name("l")
            lines = [
                f"{indent}if type({variable}) is not list: raise F",  # other iterables, awaitables...
                f"{indent}{items} = []",
                f"{indent}for {item} in {variable}:",
            ]
            lines += self._complete(item, type_.of_type, nested, indent + "    ")
            lines += [f"{indent}    {items}.append({item})", f"{indent}{variable} = {items}"]
            return lines
        if is_object_type(type_):  # reached through a list of nullable objects only
            return [f"{indent}{variable} = {self._bind('o', nested(type_).complete)}({variable})"]
        coerce = self._bind("k", type_.coerce_output_value)  # type: ignore[union-attr]
        general = [
            f"{indent}if type({variable}) not in I and (isinstance({variable}, Exception) or aw({variable})): raise F",
            f"{indent}{variable} = {coerce}({variable})",
            f"{indent}if {variable} is None or {variable} is U: raise F",
        ]
        # String and ID return a str as it is, Boolean a bool: skip the call for those.
        native = "str" if type_ is GraphQLString or type_ is GraphQLID else "bool" if type_ is GraphQLBoolean else None
        if native is None:
            return general
        return [f"{indent}if type({variable}) is not {native}:"] + ["    " + line for line in general]

    def build(self) -> _CompiledObject:
        name = self.object_type.name
        check = [
            "    if (type(source) is not origin or '__await__' in source.__dict__)"
            " and (isinstance(source, Exception) or aw(source)): raise F"
        ]
        if self.object_type.is_type_of is not None:
            # Strawberry's generated is_type_of ignores its info argument; one that needs it
            # raises here, and graphql-core then calls it with the real info.
            check.append("    if is_type_of(source, None) is not True: raise F")
        source = "\n".join(
            [
                "def serialize(source):",
                *self.lines,
                "    return {" + ", ".join(self.entries) + "}",
                "def complete(source):",
                "    if source is None or source is U: return None",
                *check,
                "    return serialize(source)",
                "def complete_non_null(source):",
                "    if source is None or source is U: raise F",
                *check,
                "    return serialize(source)",
            ]
        )
        exec(compile(source, f"<compiled {name}>", "exec"), self.namespace)  # source: see the class docstring
        return _CompiledObject(
            serialize=self.namespace["serialize"],
            complete=self.namespace["complete"],
            complete_non_null=self.namespace["complete_non_null"],
        )


def compiled_object(
    object_type: GraphQLObjectType,
    nodes: tuple[FieldNode, ...],
    operation: OperationDefinitionNode,
    fragments: dict[str, Any],
    variables: dict[str, Any],
    is_awaitable: Callable[[Any], bool],
) -> _CompiledObject | None:
    """The compiled object that ``CompiledExecutor`` keeps for ``object_type`` selected by the
    field ``nodes`` of ``operation`` under these coerced ``variables`` and awaitable check (under
    the executor's own key, ``_shared_key``); None when there is none yet, or the selection does
    not qualify. ``resolvers.fastpath.root_plan`` completes a root field with it."""
    key = _shared_key(object_type, nodes, _directive_values(operation, fragments, variables), is_awaitable)
    with _LOCK:
        cached = _SHARED.get(key)
    return None if cached is None else cached[1]


def _shared_key(
    object_type: GraphQLObjectType,
    nodes: tuple[FieldNode, ...],
    directive_values: tuple[Any, ...],
    is_awaitable: Callable[[Any], bool],
) -> tuple[Any, ...]:
    """The key of a compiled object in ``_SHARED`` (``CompiledExecutor._shared_compiled``)."""
    return (object_type, tuple(map(id, nodes)), directive_values, is_awaitable)


def _basic_field(field_def: GraphQLField) -> StrawberryField | None:
    """The ``StrawberryField`` behind ``field_def`` when Strawberry resolves it as a basic field: a
    ``StrawberryField`` with no resolver, no field extension (permission classes are one) and no
    exception handler, whose resolver reads the attribute and ignores ``info``
    (``resolvers.fastpath.internals.is_basic_resolver``)."""
    field = (field_def.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    if isinstance(field, StrawberryField) and field.is_basic_field and is_basic_resolver(field_def.resolve):
        return field
    return None


def _inert_origin(object_type: GraphQLObjectType) -> type | None:
    """The Python class behind a Strawberry object type when its exact instances can be neither
    exceptions nor awaitables unless they hold an ``__await__`` attribute of their own (the
    generated check looks for one in the instance's ``__dict__``); else None."""
    definition = (object_type.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    origin = getattr(definition, "origin", None)
    if (
        isinstance(origin, type)
        and not issubclass(origin, BaseException)
        and not hasattr(origin, "__await__")
        and not hasattr(origin, "__getattr__")
        and origin.__getattribute__ is object.__getattribute__
        and "__slots__" not in vars(origin)
        and any("__dict__" in vars(base) for base in origin.__mro__)
    ):
        return origin
    return None


_LOCK = threading.Lock()  # executors may run in threads (Strawberry's sync views)
_SHARED: LRUCache[tuple[Any, ...], tuple[tuple[FieldNode, ...], _CompiledObject | None]] = LRUCache(SHARED_CACHE_SIZE)

# id(operation) -> (the operation, kept alive, and the names of the variables its directives read)
_DIRECTIVE_VARIABLES: LRUCache[int, tuple[OperationDefinitionNode, tuple[str, ...]]] = LRUCache(SHARED_CACHE_SIZE)


def _directive_values(
    operation: OperationDefinitionNode, fragments: dict[str, Any], variables: dict[str, Any]
) -> tuple[Any, ...]:
    """The names and values of the variables read by any directive of the operation or its
    document's fragments (what ``@skip``/``@include`` decide on)."""
    with _LOCK:
        known = _DIRECTIVE_VARIABLES.get(id(operation))
    if known is None or known[0] is not operation:
        names: set[str] = set()
        for root in (operation, *fragments.values()):
            _collect_directive_variables(root, names)
        known = (operation, tuple(sorted(names)))
        with _LOCK:
            _DIRECTIVE_VARIABLES[id(operation)] = known
    return tuple((name, variables.get(name)) for name in known[1])


def _collect_directive_variables(node: Any, names: set[str]) -> None:
    """Add the names of variables used in directive arguments anywhere below ``node``."""
    for directive in getattr(node, "directives", None) or ():
        for argument in directive.arguments or ():
            _collect_variables(argument.value, names)
    selection_set = getattr(node, "selection_set", None)
    if selection_set is not None:
        for selection in selection_set.selections:
            _collect_directive_variables(selection, names)


def _collect_variables(value: Any, names: set[str]) -> None:
    if isinstance(value, VariableNode):
        names.add(value.name.value)
    for child in getattr(value, "values", None) or ():  # lists
        _collect_variables(child, names)
    for field in getattr(value, "fields", None) or ():  # objects
        _collect_variables(field.value, names)


__all__ = ["CompiledExecutor", "compiled_object"]
