"""``CompiledExecutor`` answers exactly what Strawberry's executor answers, whatever the values.

``resolvers/fastpath/compiled.py`` completes the objects of query results whose selected fields are plain
attributes with generated code. Where graphql-core would do anything but coerce a value with its
type's ``coerce_output_value`` (report a null in a non-null field, raise an exception found as a
value, await an awaitable, iterate a tuple or a generator, report a value a scalar rejects or
coerces to null, check an object's ``is_type_of``...), it must hand the whole object back to
graphql-core; everywhere else it must produce the very value graphql-core produces (a ``str``
subclass, ``1.5`` for a ``String``, ``True`` for an ``Int``, ``"red"`` for an enum are coerced by
both the same way). This module checks that claim differentially, on a small standalone schema
shaped like runsgate's (the runsgate schema reads a store, whose values are well-formed):

- ``Record``: non-null and nullable ``String``, ``ID``, ``Int``, ``Float``, ``Boolean``, an enum, a
  ``DateTime`` scalar mapped from ``datetime`` (its serializer raises on anything else), ``Tag``
  (a scalar serializing ``""`` to null), ``JSON``, a nullable object, a non-null list of non-null
  objects, a nullable list of nullable objects, lists of scalars, a non-null ``Leaf`` (a type
  implementing the ``Node`` interface, so Strawberry gives it an ``is_type_of``), an
  interface-typed field and a field with a resolver (neither is ever compiled);
- ``Query`` fields whose resolvers (sync and async) return the objects drawn for the example.

The schema is built twice, with ``CompiledExecutor`` (subclassed to count what it did) and with
Strawberry's default executor. Each document is executed by both, on objects built from one drawn
description (built once per executor, as a coroutine can be awaited only once; attributes read
the same every time). The responses must have equal ``data``, equal errors (message, locations,
path) and the same JSON text, so key order and ``1``/``1.0``/``true`` are compared too.

- ``test_adversarial_value``: a table of fixed cases, each one adversarial value in a valid
  ``Record`` under a document selecting every compilable field: same response, and the compiled
  executor fell back (values graphql-core reports or awaits/iterates) or compiled (values it
  coerces); the Prometheus counters agree with the executors' own.
- ``test_random_documents_and_values``: hypothesis draws documents (random subsets of fields,
  aliases, repeated fields, ``__typename``, inline and named fragments, ``@skip``/``@include`` with
  literals and variables, one of them nullable) and object graphs whose values are mostly valid
  but, at a rate drawn per example, adversarial. Each document runs with two sets of variables
  (compiled serializers are cached across requests of a document, keyed by the variables its
  directives read). Over the run, objects must have been compiled and attempts must have fallen
  back.
- Resolver fields, mutations and schemas whose extensions wrap resolvers (graphql-core
  middleware) are left to graphql-core.
- ``Differences found and fixed`` (end of the module): cases where the two executors once
  answered differently, found while writing this module, kept as regression tests.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import re
from collections import Counter
from collections.abc import Coroutine, Generator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from functools import cache, partial
from types import SimpleNamespace
from typing import Any, ClassVar, NewType

import pytest
import strawberry
from graphql import GraphQLError, GraphQLObjectType, Undefined, parse, validate
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from strawberry.extensions import FieldExtension, ParserCache, SchemaExtension
from strawberry.scalars import JSON
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.types.execution import ExecutionContext, ExecutionResult
from strawberry.types.field import StrawberryField
from strawberry.types.scalar import ScalarDefinition

from resolvers.fastpath.compiled import CompiledExecutor
from resolvers.metrics import COMPILED, COMPILED_FALLBACK
from resolvers.scalars import DateTime  # runsgate's: its serializer raises on anything but a datetime

# -- the schema -----------------------------------------------------------------------------------


def serialize_tag(value: Any) -> Any:
    """An empty tag serializes to null, which graphql-core reports as an error."""
    return value or None


Tag = NewType("Tag", str)
SCALAR_MAP: dict[object, ScalarDefinition] = {
    datetime: DateTime,
    Tag: strawberry.scalar(name="Tag", serialize=serialize_tag, parse_value=str),
}
"""``StrawberryConfig.scalar_map`` of the test schemas (runsgate maps ``datetime`` this way)."""


@strawberry.enum
class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Hue(enum.Enum):
    """Not in the schema: a Python enum with one of ``Color``'s values, for ``Color`` fields."""

    RED = "red"


@strawberry.interface
class Node:
    id: strawberry.ID


@strawberry.type
class Leaf(Node):
    label: str | None = strawberry.field(name="title")
    rank: int


@strawberry.type
class Branch(Node):
    size: float


@strawberry.type
class Item:
    name: str
    count: int | None
    tag: Tag | None
    leaf: Leaf | None

    @strawberry.field
    async def shout(self) -> str | None:
        """A resolver field (async): an ``Item`` selecting it is left to graphql-core."""
        return self.name.upper() if type(self.name) is str else None


@strawberry.type
class Record:
    text: str
    text_opt: str | None
    ident: strawberry.ID
    ident_opt: strawberry.ID | None
    number: int
    number_opt: int | None
    ratio: float
    ratio_opt: float | None
    flag: bool
    flag_opt: bool | None
    color: Color
    color_opt: Color | None
    at: datetime
    at_opt: datetime | None
    tag: Tag
    payload: JSON
    payload_opt: JSON | None
    child: Item | None
    items: list[Item]
    maybe_items: list[Item | None] | None
    words: list[str]
    numbers: list[int | None] | None
    leaf: Leaf
    node: Node | None

    @strawberry.field
    def computed(self) -> str:
        """A resolver field: a ``Record`` selecting it is left to graphql-core."""
        return f"computed from a {type(self.text).__name__}"


def _root(info: strawberry.Info, name: str) -> Any:
    return getattr(info.root_value, name)


@strawberry.type
class Query:
    @strawberry.field
    def record(self, info: strawberry.Info) -> Record:
        return _root(info, "record")  # type: ignore[no-any-return]

    @strawberry.field
    def record_opt(self, info: strawberry.Info) -> Record | None:
        return _root(info, "record_opt")  # type: ignore[no-any-return]

    @strawberry.field
    async def record_async(self, info: strawberry.Info) -> Record | None:
        return _root(info, "record_async")  # type: ignore[no-any-return]

    @strawberry.field
    def records(self, info: strawberry.Info) -> list[Record]:
        return _root(info, "records")  # type: ignore[no-any-return]

    @strawberry.field
    async def maybe_records(self, info: strawberry.Info) -> list[Record | None] | None:
        return _root(info, "maybe_records")  # type: ignore[no-any-return]

    @strawberry.field
    def item(self, info: strawberry.Info) -> Item:
        return _root(info, "item")  # type: ignore[no-any-return]

    @strawberry.field
    def leaf(self, info: strawberry.Info) -> Leaf | None:
        return _root(info, "leaf")  # type: ignore[no-any-return]

    @strawberry.field
    def node(self, info: strawberry.Info) -> Node | None:
        return _root(info, "node")  # type: ignore[no-any-return]


@strawberry.type
class Mutation:
    @strawberry.mutation
    def touch(self, info: strawberry.Info) -> Record:
        return _root(info, "record")  # type: ignore[no-any-return]


class RecordingExecutor(CompiledExecutor):
    """``CompiledExecutor`` keeping each instance, so a test can read its counters after a run."""

    instances: ClassVar[list[RecordingExecutor]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        RecordingExecutor.instances.append(self)


class QuietSchema(strawberry.Schema):
    """Errors are compared here, not logged (a traceback for each would only slow the run)."""

    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        pass


class PassThrough(SchemaExtension):
    """A schema extension implementing ``resolve``: Strawberry passes it to graphql-core as middleware."""

    def resolve(self, _next: Any, root: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
        return _next(root, info, *args, **kwargs)


def build_schema(compiled: bool, *extensions: Any, config: StrawberryConfig | None = None) -> QuietSchema:
    """The test schema, with ``RecordingExecutor`` or with Strawberry's default executor.

    ``ParserCache`` (as runsgate has it) gives both schemas the same ``DocumentNode`` for the same
    text, which is what the compiled executor's cross-request cache is keyed by.
    """
    return QuietSchema(
        query=Query,
        mutation=Mutation,
        types=[Leaf, Branch],
        execution_context_class=RecordingExecutor if compiled else None,
        config=config or StrawberryConfig(scalar_map=SCALAR_MAP),
        extensions=[partial(ParserCache, maxsize=512), *extensions],
    )


COMPILED_SCHEMA = build_schema(True)
STANDARD_SCHEMA = build_schema(False)
GRAPHQL_SCHEMA = STANDARD_SCHEMA._schema


def _strawberry_field(type_name: str, field_name: str) -> StrawberryField:
    type_ = GRAPHQL_SCHEMA.type_map[type_name]
    assert isinstance(type_, GraphQLObjectType)
    definition = type_.fields[field_name].extensions[GraphQLCoreConverter.DEFINITION_BACKREF]
    assert isinstance(definition, StrawberryField)
    return definition


COMPOSITE = ("Query", "Record", "Item", "Leaf", "Branch", "Node")
FIELDS: dict[str, dict[str, str]] = {
    name: {key: str(value.type) for key, value in GRAPHQL_SCHEMA.type_map[name].fields.items()}  # type: ignore[attr-defined]
    for name in COMPOSITE
}
"""GraphQL field name -> SDL type (``[Item!]!``...), per composite type."""
ATTRIBUTES: dict[str, dict[str, str]] = {
    name: {
        _strawberry_field(name, key).python_name: type_
        for key, type_ in FIELDS[name].items()
        if _strawberry_field(name, key).base_resolver is None
    }
    for name in ("Record", "Item", "Leaf", "Branch")
}
"""Python attribute -> SDL type of each field without a resolver (what a drawn object holds)."""
ROOT_ATTRIBUTES = {key: _strawberry_field("Query", key).python_name for key in FIELDS["Query"]}
CLASSES: dict[str, type] = {"Record": Record, "Item": Item, "Leaf": Leaf, "Branch": Branch, "Node": Node}
CONDITIONS = {
    "Query": ["Query"],
    "Record": ["Record"],
    "Item": ["Item"],
    "Leaf": ["Leaf", "Node"],
    "Branch": ["Branch", "Node"],
    "Node": ["Node", "Leaf", "Branch"],
}
"""Type conditions a fragment may have inside a selection on each type."""


def named_type(sdl: str) -> str:
    return sdl.strip("[]!")


# -- descriptions of values, and the objects built from them ------------------------------------


class Text(str):
    """A ``str`` subclass: graphql-core returns it as it is, the compiled fast path must not care."""


class Count(int):
    """An ``int`` subclass."""


class Moment(datetime):
    """A ``datetime`` subclass."""


class Words(list[Any]):
    """A ``list`` subclass."""


class Stringy:
    """Not a builtin: graphql-core's ``String`` serializes it with ``str()``."""

    def __str__(self) -> str:
        return "stringy"


class Later:
    """An awaitable that is not a coroutine (nothing to warn about when nobody awaits it)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        yield from ()
        return self.value


class Broken(Exception):
    """An exception used as a field value."""


@dataclass(frozen=True)
class Make:
    """An instance of ``cls`` (a Strawberry type) with these attribute values (descriptions)."""

    cls: type
    attrs: tuple[tuple[str, Any], ...]

    def with_attr(self, name: str, value: Any) -> Make:
        assert name in dict(self.attrs), name
        return replace(self, attrs=tuple((key, value if key == name else old) for key, old in self.attrs))


@dataclass(frozen=True)
class Duck:
    """A ``SimpleNamespace`` with these attributes: the right attributes, the wrong class."""

    attrs: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Coro:
    """A coroutine returning ``value``."""

    value: Any


@dataclass(frozen=True)
class Wait:
    """A ``Later`` (non-coroutine awaitable) returning ``value``."""

    value: Any


@dataclass(frozen=True)
class Err:
    """An exception instance as the value (a fresh one for each build)."""

    cls: type[Exception]
    message: str


@dataclass(frozen=True)
class Tup:
    """A tuple instead of a list."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Gen:
    """A generator instead of a list."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Sub:
    """A ``Words`` (``list`` subclass) instead of a list."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Cast:
    """``strawberry.cast(cls, <make>)``: an object Strawberry's ``is_type_of`` reads as a ``cls``."""

    cls: type
    make: Make


@dataclass(frozen=True)
class AwaitAttr:
    """An instance of the right class whose instance dict holds an ``__await__``."""

    make: Make


async def _resolved(value: Any) -> Any:
    return value


@dataclass
class Builder:
    """Builds objects from descriptions, keeping the coroutines it made to close the unawaited."""

    coroutines: list[Coroutine[Any, Any, Any]] = field(default_factory=list)

    def build(self, spec: Any) -> Any:
        if isinstance(spec, Make):
            return spec.cls(**{key: self.build(value) for key, value in spec.attrs})
        if isinstance(spec, Duck):
            return SimpleNamespace(**{key: self.build(value) for key, value in spec.attrs})
        if isinstance(spec, list):
            return [self.build(item) for item in spec]
        if isinstance(spec, Coro):
            coroutine = _resolved(self.build(spec.value))
            self.coroutines.append(coroutine)
            return coroutine
        if isinstance(spec, Wait):
            return Later(self.build(spec.value))
        if isinstance(spec, Err):
            return spec.cls(spec.message)
        if isinstance(spec, Tup):
            return tuple(self.build(item) for item in spec.items)
        if isinstance(spec, Gen):
            return (self.build(item) for item in spec.items)
        if isinstance(spec, Sub):
            return Words(self.build(item) for item in spec.items)
        if isinstance(spec, Cast):
            return strawberry.cast(spec.cls, self.build(spec.make))
        if isinstance(spec, AwaitAttr):
            value = self.build(spec.make)
            value.__await__ = Later(None).__await__
            return value
        return spec  # plain values, shared by both builds (immutable, or JSON never mutated)

    async def close(self) -> None:
        """Close the coroutines nobody awaited (a field not selected, or left after an error), so
        no "coroutine ... was never awaited" warning (an error under this repo's pytest config)."""
        for _ in range(3):
            await asyncio.sleep(0)  # let graphql-core's background settling run first
        for coroutine in self.coroutines:
            if inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED:
                coroutine.close()


# -- running both executors -----------------------------------------------------------------------


@dataclass
class Outcome:
    """One response of each executor, and what the compiled executor did."""

    compiled: ExecutionResult
    standard: ExecutionResult
    compiled_objects: int
    fallbacks: int

    def assert_same(self) -> None:
        assert self.compiled.data == self.standard.data
        assert _errors(self.compiled) == _errors(self.standard)
        assert json.dumps(self.compiled.data) == json.dumps(self.standard.data)
        assert json.dumps(_errors(self.compiled)) == json.dumps(_errors(self.standard))


def _errors(result: ExecutionResult) -> list[dict[str, Any]]:
    return [dict(error.formatted) for error in result.errors or []]


async def run_both(
    document: str,
    root: dict[str, Any],
    variables: dict[str, Any] | None = None,
    *,
    compiled_schema: strawberry.Schema = COMPILED_SCHEMA,
    standard_schema: strawberry.Schema = STANDARD_SCHEMA,
    context: Any = None,
    operation_name: str | None = None,
) -> Outcome:
    """Execute ``document`` with both schemas, each on objects freshly built from ``root``
    (root field python name -> description)."""
    results: list[ExecutionResult] = []
    RecordingExecutor.instances.clear()
    for schema in (compiled_schema, standard_schema):
        builder = Builder()
        root_value = SimpleNamespace(**{key: builder.build(value) for key, value in root.items()})
        try:
            results.append(
                await schema.execute(
                    document,
                    variable_values=variables,
                    root_value=root_value,
                    context_value=context,
                    operation_name=operation_name,
                )
            )
        finally:
            await builder.close()
    executors = list(RecordingExecutor.instances)
    RecordingExecutor.instances.clear()
    return Outcome(
        compiled=results[0],
        standard=results[1],
        compiled_objects=sum(executor.compiled_objects for executor in executors),
        fallbacks=sum(executor.fallbacks for executor in executors),
    )


# -- fixed cases: one adversarial value each ------------------------------------------------------

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def valid_leaf(id_: str = "l1") -> Make:
    return Make(Leaf, (("id", id_), ("label", "a leaf"), ("rank", 3)))


def valid_item(name: str = "i1") -> Make:
    return Make(Item, (("name", name), ("count", 2), ("tag", "t"), ("leaf", valid_leaf())))


def valid_record() -> Make:
    return Make(
        Record,
        (
            ("text", "hello"),
            ("text_opt", None),
            ("ident", "r1"),
            ("ident_opt", 7),
            ("number", 42),
            ("number_opt", -1),
            ("ratio", 0.5),
            ("ratio_opt", 3),
            ("flag", True),
            ("flag_opt", None),
            ("color", Color.RED),
            ("color_opt", "green"),
            ("at", T0),
            ("at_opt", None),
            ("tag", "x"),
            ("payload", {"b": [1, None, "two"], "a": {}}),
            ("payload_opt", None),
            ("child", valid_item("child")),
            ("items", [valid_item("i1"), valid_item("i2")]),
            ("maybe_items", [None, valid_item("i3")]),
            ("words", ["a", "b"]),
            ("numbers", [1, None, 3]),
            ("leaf", valid_leaf()),
            ("node", Make(Branch, (("id", "b1"), ("size", 1.5)))),
        ),
    )


LEAF_SELECTION = "{ id title rank __typename }"
ITEM_SELECTION = f"{{ name count tag leaf {LEAF_SELECTION} }}"
RECORD_SELECTION = f"""{{
    __typename text textOpt ident identOpt number numberOpt ratio ratioOpt flag flagOpt
    color colorOpt at atOpt tag payload payloadOpt
    child {ITEM_SELECTION} items {ITEM_SELECTION} maybeItems {ITEM_SELECTION}
    words numbers leaf {LEAF_SELECTION}
}}"""
EVERY_FIELD = f"{{ record {RECORD_SELECTION} recordOpt {RECORD_SELECTION} }}"
"""Every compilable field of ``Record``, twice: under a non-null and under a nullable root field."""


@dataclass(frozen=True)
class Case:
    """A valid ``Record`` whose ``attribute`` is set to ``value`` (a description, which may hold
    the adversarial value further down: in an item, a leaf...)."""

    id: str
    attribute: str
    value: Any
    falls_back: bool = True
    """True: the compiled executor must fall back at least once. False: graphql-core coerces the
    value without any error, and the objects must compile without any fallback."""


def _in_child(name: str, value: Any) -> Any:
    return valid_item("child").with_attr(name, value)


def _in_first_item(name: str, value: Any) -> list[Any]:
    return [valid_item("i1").with_attr(name, value), valid_item("i2")]


FALLBACK_CASES = [
    # Values graphql-core reports as errors, or reaches another way (awaiting, iterating): the
    # compiled serializer must hand the object back to graphql-core.
    Case("none-in-non-null-string", "text", None),
    Case("none-in-non-null-enum", "color", None),
    Case("none-in-non-null-object", "leaf", None),
    Case("none-in-non-null-list", "items", None),
    Case("undefined-in-non-null", "number", Undefined),
    Case("exception-in-non-null", "text", Err(ValueError, "broken text")),
    Case("exception-in-nullable", "text_opt", Err(Broken, "broken optional text")),
    Case("graphql-error-as-value", "number_opt", Err(GraphQLError, "a GraphQLError value")),
    Case("exception-as-object", "child", Err(ValueError, "broken child")),
    Case("exception-as-list", "words", Err(ValueError, "broken words")),
    Case("exception-list-item", "words", ["a", Err(ValueError, "broken word")]),
    Case("coroutine-scalar", "text", Coro("from a coroutine")),
    Case("coroutine-none-in-non-null", "number", Coro(None)),
    Case("awaitable-scalar", "number", Wait(5)),
    Case("coroutine-object", "child", Coro(valid_item("late"))),
    Case("awaitable-object", "leaf", Wait(valid_leaf("late"))),
    Case("coroutine-list", "words", Coro(["late"])),
    Case("coroutine-list-item", "numbers", [1, Coro(2)]),
    Case("awaitable-list-item-object", "maybe_items", [Wait(valid_item("late"))]),
    Case("tuple-for-list", "words", Tup(("a", "b"))),
    Case("tuple-for-object-list", "items", Tup((valid_item(),))),
    Case("generator-for-list", "numbers", Gen((1, 2))),
    Case("list-subclass", "words", Sub(("a",))),
    Case("str-for-list", "words", "ab"),
    Case("dict-for-list", "words", {"a": 1}),
    Case("none-in-non-null-list-item", "items", [valid_item(), None]),
    Case("none-in-non-null-scalar-item", "words", ["a", None]),
    Case("bytes-for-string", "text", b"bytes"),
    Case("nan-for-string", "text_opt", float("nan")),
    Case("float-for-id", "ident", 1.5),
    Case("bool-for-id", "ident", False),
    Case("int-too-large", "number", 2**31),
    Case("int-too-small", "number_opt", -(2**31) - 1),
    Case("float-for-int", "number", 3.5),
    Case("nan-for-float", "ratio", float("nan")),
    Case("inf-for-float", "ratio_opt", float("inf")),
    Case("huge-int-for-float", "ratio", 10**400),
    Case("str-for-boolean", "flag_opt", "true"),
    Case("enum-name-for-enum", "color", "GREEN"),
    Case("unknown-value-for-enum", "color_opt", "blue"),
    Case("other-python-enum", "color", Hue.RED),
    Case("date-for-datetime", "at", date(2026, 3, 1)),
    Case("str-for-datetime", "at_opt", "2026-03-01T09:30:00Z"),
    Case("empty-tag-serializes-to-null", "tag", ""),
    Case("none-for-non-null-json", "payload", None),
    Case("wrong-class-for-leaf", "leaf", valid_item()),
    Case("other-node-for-leaf", "leaf", Make(Branch, (("id", "b"), ("size", 2.0)))),
    Case("interface-instance-for-leaf", "leaf", Make(Node, (("id", "n"),))),
    Case("duck-for-leaf", "leaf", Duck(valid_leaf().attrs)),
    Case("leaf-cast-to-branch", "leaf", Cast(Branch, valid_leaf())),
    Case("wrong-class-for-item", "child", valid_leaf()),
    Case("dict-for-item", "child", {"name": "a dict"}),
    Case("wrong-class-list-item", "maybe_items", [valid_leaf()]),
    Case("nested-none-in-non-null", "child", _in_child("name", None)),
    Case("nested-exception", "child", _in_child("count", Err(ValueError, "broken count"))),
    Case("nested-coroutine", "items", _in_first_item("tag", Coro("late"))),
    Case("nested-wrong-leaf", "items", _in_first_item("leaf", valid_item())),
    Case("nested-huge-int", "maybe_items", [valid_item().with_attr("count", 2**40)]),
    Case("deep-none-in-non-null", "items", _in_first_item("leaf", valid_leaf().with_attr("rank", None))),
    # Found while writing this module (see ``Differences found and fixed``).
    Case("await-attribute-on-instance", "leaf", AwaitAttr(valid_leaf())),
]
ACCEPTED_CASES = [
    # Values graphql-core accepts and coerces (or passes through) without any error: the compiled
    # serializer calls the same coercion, so it compiles them and must answer the same.
    Case("valid", "text", "hello"),
    Case("undefined-in-nullable", "text_opt", Undefined),
    Case("str-subclass", "text", Text("subclassed")),
    Case("str-subclass-id", "ident", Text("subclassed")),
    Case("int-for-string", "text", 7),
    Case("float-for-string", "text", 1.5),
    Case("bool-for-string", "text", True),
    Case("object-for-string", "text", Stringy()),
    Case("enum-for-string", "text", Color.GREEN),
    Case("huge-int-for-id", "ident_opt", 2**70),
    Case("bool-for-int", "number", True),
    Case("integral-float-for-int", "number", 3.0),
    Case("numeric-str-for-int", "number", "12"),
    Case("int-subclass", "number", Count(4)),
    Case("str-for-float", "ratio", "1.5"),
    Case("bool-for-float", "ratio", False),
    Case("int-for-boolean", "flag", 1),
    Case("enum-raw-value", "color", "green"),
    Case("naive-datetime", "at", datetime(2026, 3, 1, 9, 30)),
    Case("datetime-subclass", "at", Moment(2026, 3, 1, tzinfo=UTC)),
    Case("int-for-tag", "tag", 5),
    Case("tuple-for-json", "payload", ("a", 1)),
    Case("str-subclass-json", "payload_opt", Text("json")),
    Case("duck-for-item", "child", Duck(valid_item().attrs)),
]
CASES = FALLBACK_CASES + [replace(case, falls_back=False) for case in ACCEPTED_CASES]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_adversarial_value(case: Case) -> None:
    """Each value gives the same response from both executors; the compiled executor fell back on
    it (so graphql-core reported it), or compiled the object when graphql-core accepts it."""
    record = valid_record().with_attr(case.attribute, case.value)
    before = COMPILED._value.get(), COMPILED_FALLBACK._value.get()
    outcome = await run_both(EVERY_FIELD, {"record": record, "record_opt": record})
    outcome.assert_same()
    assert (COMPILED._value.get() - before[0], COMPILED_FALLBACK._value.get() - before[1]) == (
        outcome.compiled_objects,
        outcome.fallbacks,
    ), "the Prometheus counters count what the executors did"
    if case.falls_back:
        assert outcome.fallbacks > 0, "the compiled serializer accepted a value graphql-core treats differently"
    else:
        assert outcome.fallbacks == 0
        assert outcome.compiled_objects > 0


async def test_valid_values_compile_every_object() -> None:
    """With valid values every ``Record`` (and so every object below it) compiles, once per root
    field, and the responses are still identical; ``execute_sync`` agrees as well."""
    record = valid_record()
    outcome = await run_both(EVERY_FIELD, {"record": record, "record_opt": record})
    outcome.assert_same()
    assert outcome.standard.errors is None
    assert (outcome.compiled_objects, outcome.fallbacks) == (2, 0)

    builder = Builder()
    root = SimpleNamespace(record=builder.build(record), record_opt=builder.build(record))
    compiled = COMPILED_SCHEMA.execute_sync(EVERY_FIELD, root_value=root)
    standard = STANDARD_SCHEMA.execute_sync(EVERY_FIELD, root_value=root)
    assert json.dumps(compiled.data) == json.dumps(standard.data)
    assert compiled.errors is None


async def test_resolver_fields_are_left_to_graphql_core() -> None:
    """An object selecting a resolver field (``Record.computed``, the async ``Item.shout``) is
    completed by graphql-core; objects below it still compile, and an interface-typed field's
    object does once graphql-core resolved its type."""
    document = """{
      record { computed text leaf { id } node { id ... on Branch { size } } child { shout name } }
    }"""
    outcome = await run_both(document, {"record": valid_record()})
    outcome.assert_same()
    assert outcome.standard.errors is None
    assert (outcome.compiled_objects, outcome.fallbacks) == (2, 0)  # leaf, node (Branch)


async def test_cached_serializers_follow_the_variables() -> None:
    """Compiled serializers are kept across requests of a document, keyed by the values of the
    variables its directives read: alternating values and operations (sharing a fragment) must
    never get a serializer compiled for other values."""
    document = """
      query A($p: Boolean!) { record { ...R } }
      query B($p: Boolean!, $q: Boolean!) { record { text ...R @include(if: $q) } }
      fragment R on Record {
        text @skip(if: $p) child @include(if: $p) { name count @skip(if: $p) } items { name @include(if: $p) }
      }
    """
    root = {"record": valid_record()}
    shapes = set()
    for operation, p, q in [("A", True, True), ("A", False, True), ("B", True, False), ("B", True, True)] * 2:
        outcome = await run_both(document, root, {"p": p, "q": q}, operation_name=operation)
        outcome.assert_same()
        assert outcome.standard.errors is None
        assert outcome.compiled_objects == 1
        shapes.add(json.dumps(outcome.standard.data))
    assert len(shapes) == 4


async def test_mutations_are_not_compiled() -> None:
    """A mutation's result is never compiled, while the same selection in a query is."""
    root = {"record": valid_record()}
    mutation = await run_both(f"mutation {{ touch {RECORD_SELECTION} }}", root)
    mutation.assert_same()
    assert (mutation.compiled_objects, mutation.fallbacks) == (0, 0)
    query = await run_both(f"{{ record {RECORD_SELECTION} }}", root)
    query.assert_same()
    assert query.compiled_objects > 0


async def test_resolver_middleware_turns_compilation_off() -> None:
    """With a schema extension implementing ``resolve`` (graphql-core middleware, which must see
    every field) nothing is compiled, while the same request compiles without it."""
    document = f"{{ record {RECORD_SELECTION} }}"
    for number in (42, 2**31):  # valid, then an Int graphql-core reports
        root = {"record": valid_record().with_attr("number", number)}
        outcome = await run_both(
            document,
            root,
            compiled_schema=build_schema(True, PassThrough),
            standard_schema=build_schema(False, PassThrough),
        )
        outcome.assert_same()
        assert (outcome.compiled_objects, outcome.fallbacks) == (0, 0)
        without = await run_both(document, root)
        without.assert_same()
        assert json.dumps(without.standard.data) == json.dumps(outcome.standard.data)
        assert without.compiled_objects + without.fallbacks > 0


# -- random documents and values ------------------------------------------------------------------

DIRECTIVES = [
    *[""] * 8,
    " @skip(if: false)",
    " @skip(if: true)",
    " @include(if: true)",
    " @include(if: false)",
    " @skip(if: $p)",
    " @include(if: $p)",
    " @include(if: $q)",
    " @skip(if: $r)",
    " @include(if: $r)",
]
VARIABLES = {"p": "$p: Boolean!", "q": "$q: Boolean!", "r": "$r: Boolean = false"}
SELECTION_KINDS = ["field"] * 6 + ["typename", "inline", "spread"]


@dataclass
class Draft:
    """What a document being drawn needs: its fragments, variables and selected root fields."""

    fragments: list[str] = field(default_factory=list)
    variables: set[str] = field(default_factory=set)
    root_fields: set[str] = field(default_factory=set)


def _directive(draw: st.DrawFn, draft: Draft, depth: int) -> str:
    """Mostly none; ``$r`` (which may be null) only in selections two levels down or more, as a
    null there is a field error graphql-core raises only when it completes that level."""
    directive = draw(st.sampled_from(DIRECTIVES if depth < 2 else DIRECTIVES[:-2]))
    draft.variables.update(re.findall(r"\$(\w+)", directive))
    return directive


def _selection(draw: st.DrawFn, draft: Draft, type_name: str, depth: int) -> str:
    """1 to 4 selections on ``type_name``; at depth 0 only leaf fields and ``__typename``."""
    return " ".join(_selection_item(draw, draft, type_name, depth) for _ in range(draw(st.integers(1, 4))))


def _selection_item(draw: st.DrawFn, draft: Draft, type_name: str, depth: int) -> str:
    kind = draw(st.sampled_from(SELECTION_KINDS))
    if kind in ("inline", "spread") and depth > 0:
        condition = draw(st.sampled_from(CONDITIONS[type_name]))
        directive = _directive(draw, draft, depth)
        if kind == "inline":
            on = draw(st.sampled_from([f" on {condition}", ""])) if condition == type_name else f" on {condition}"
            return f"...{on}{directive} {{ {_selection(draw, draft, condition, depth - 1)} }}"
        name = f"F{len(draft.fragments)}"
        draft.fragments.append("")  # reserved: fragments spread inside this one come after it
        body = _selection(draw, draft, condition, depth - 1)
        draft.fragments[int(name[1:])] = f"fragment {name} on {condition} {{ {body} }}"
        return f"...{name}{directive}"
    fields = [name for name, sdl in FIELDS[type_name].items() if depth > 0 or named_type(sdl) not in COMPOSITE]
    if kind != "field" or not fields:
        alias = draw(st.sampled_from(["", "", "kind: ", "typename2: "]))
        return f"{alias}__typename{_directive(draw, draft, depth)}"
    name = draw(st.sampled_from(fields))
    if type_name == "Query":
        draft.root_fields.add(name)
    alias = draw(st.sampled_from(["", "", f"{name}1: ", f"{name}2: "]))  # one alias, one field
    text = f"{alias}{name}{_directive(draw, draft, depth)}"
    inner = named_type(FIELDS[type_name][name])
    if inner in COMPOSITE:
        text += f" {{ {_selection(draw, draft, inner, depth - 1)} }}"
    return text


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, Draft]:
    """A valid query document (checked by the test) and what it uses."""
    draft = Draft()
    body = _selection(draw, draft, "Query", 3)
    if draft.variables:
        header = "query Q(" + ", ".join(VARIABLES[name] for name in sorted(draft.variables)) + ") "
    else:
        header = draw(st.sampled_from(["", "query Q "]))
    return "\n".join([f"{header}{{ {body} }}", *draft.fragments]), draft


def variable_values() -> st.SearchStrategy[dict[str, Any]]:
    """``$p`` and ``$q`` always; ``$r`` (nullable, defaulting to false) omitted, a bool or, most
    often, null: an error graphql-core raises only where it collects a selection using ``$r``."""
    r = st.sampled_from([None, None, False, True, Undefined])
    return st.builds(
        lambda p, q, r: {"p": p, "q": q} | ({} if r is Undefined else {"r": r}), st.booleans(), st.booleans(), r
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=4,
)
VALID_SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "String": st.text(max_size=4) | st.sampled_from(["", "é", "a\nb"]),
    "ID": st.text(max_size=3) | st.integers(-3, 3),
    "Int": st.integers(-(2**31), 2**31 - 1),
    "Float": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-3, 3),
    "Boolean": st.booleans(),
    "Color": st.sampled_from([Color.RED, Color.GREEN, "red", "green"]),
    "DateTime": st.datetimes(timezones=st.just(UTC)),
    "Tag": st.text(min_size=1, max_size=3),
    "JSON": JSON_VALUES,
}
ODD_SCALARS: dict[str, list[Any]] = {
    "String": [Text("sub"), 7, 1.5, True, b"x", float("inf"), Stringy(), Color.RED, ["a"]],
    "ID": [Text("sub"), 1.5, True, 2**70, Count(3)],
    "Int": [2**31, -(2**31) - 1, 2**70, True, 3.0, 3.5, "12", "x", Count(4), float("inf")],
    "Float": [float("nan"), float("inf"), "1.5", True, 10**400, Count(2)],
    "Boolean": [0, 1, 2, "true", 1.0],
    "Color": ["RED", "blue", Hue.RED, 0],
    "DateTime": [datetime(2026, 1, 1), Moment(2026, 1, 1, tzinfo=UTC), date(2026, 1, 1), "2026-01-01T00:00:00Z", 0],
    "Tag": ["", 5, Text("sub")],
    "JSON": [("a", 1), Text("sub")],
}


def _weighted(*options: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each drawn ``weight`` times in ``sum(weights)``."""
    table = [strategy for weight, strategy in options for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(table.__getitem__)


@cache
def value_of(sdl: str, chaos: int) -> st.SearchStrategy[Any]:
    """Descriptions of values for a field of type ``sdl``: valid ones (null one time in five when
    nullable) and, ``chaos`` times in 100, adversarial ones (a null in a non-null field too)."""
    nullable = sdl.removesuffix("!")
    present = _present(nullable, chaos)
    if chaos == 0:  # (no adversarial strategy built: wrong-class objects are drawn at 0)
        return present if sdl.endswith("!") else _weighted((1, st.none()), (4, present))
    if sdl.endswith("!"):
        return _weighted((100 - chaos, present), (chaos, st.none() | _odd(nullable, chaos)))
    return _weighted((20, st.none()), (80 - chaos, present), (chaos, _odd(nullable, chaos)))


@cache
def _present(sdl: str, chaos: int) -> st.SearchStrategy[Any]:
    """A valid, non-null value of the nullable type ``sdl``."""
    if sdl.startswith("["):
        return st.lists(value_of(sdl[1:-1], chaos), max_size=2)
    if sdl in VALID_SCALARS:
        return VALID_SCALARS[sdl]
    if sdl == "Node":
        return _make("Leaf", chaos) | _make("Branch", chaos)
    return _make(sdl, chaos)


@cache
def _make(type_name: str, chaos: int) -> st.SearchStrategy[Make]:
    attributes = {name: value_of(sdl, chaos) for name, sdl in ATTRIBUTES[type_name].items()}
    return st.fixed_dictionaries(attributes).map(lambda values: Make(CLASSES[type_name], tuple(values.items())))


@cache
def _odd(sdl: str, chaos: int) -> st.SearchStrategy[Any]:
    """Non-null values graphql-core completes differently from a valid one (or completes the same
    way, through another path: tuples, subclasses, raw enum values...)."""
    present = _present(sdl, chaos)
    universal = st.one_of(
        st.builds(Err, st.sampled_from([ValueError, Broken]), st.sampled_from(["boom", "bang"])),
        present.map(Coro),
        present.map(Wait),
    )
    if sdl.startswith("["):
        items = st.lists(value_of(sdl[1:-1], chaos), max_size=2).map(tuple)
        odd = st.one_of(items.map(Tup), items.map(Gen), items.map(Sub), st.just("ab"))
    elif sdl in ODD_SCALARS:
        odd = st.sampled_from(ODD_SCALARS[sdl])
    else:
        wrong = [name for name in ("Record", "Item", "Leaf", "Branch") if name != sdl and name != "Record"]
        odd = st.one_of(
            *[_make(name, 0) for name in wrong],
            _make(sdl if sdl in ("Item", "Leaf", "Branch") else "Leaf", 0).map(lambda made: Duck(made.attrs)),
            st.just({"name": "a dict"}),
        )
    return universal | odd


def test_random_documents_and_values() -> None:
    """Random documents over random, partly adversarial, object graphs: identical responses.

    The hypothesis test runs inside this (synchronous) test, each example in its own event loop,
    so that the totals over the whole run can be asserted once it is over: objects were compiled,
    and compiled attempts fell back.
    """
    totals: Counter[str] = Counter()

    @settings(
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=150,
        # No shrinking: each example runs four executions on a whole object graph, and shrinking
        # one takes minutes. A failure prints the example as drawn; add Phase.shrink to minimize it.
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def example(data: st.DataObject) -> None:
        document, draft = data.draw(documents(), label="document")
        assert validate(GRAPHQL_SCHEMA, parse(document)) == [], document
        chaos = data.draw(st.sampled_from([0, 3, 10, 25, 50]), label="chaos")
        root = {
            ROOT_ATTRIBUTES[name]: data.draw(value_of(FIELDS["Query"][name], chaos), label=name)
            for name in sorted(draft.root_fields)
        }
        for variables in (data.draw(variable_values(), label="variables"), data.draw(variable_values())):
            outcome = asyncio.run(run_both(document, root, variables))
            outcome.assert_same()
            totals["examples"] += 1
            totals["compiled"] += outcome.compiled_objects
            totals["fallbacks"] += outcome.fallbacks
            totals["examples compiling"] += outcome.compiled_objects > 0
            totals["examples falling back"] += outcome.fallbacks > 0

    example()
    print(totals)
    assert totals["examples compiling"] > 0, totals
    assert totals["examples falling back"] > 0, totals


# -- Differences found and fixed -------------------------------------------------------------------
# Cases where the two executors answered differently, found while writing this module, and fixed
# in resolvers/fastpath/compiled.py; kept as regression tests. Besides the tests below:
# test_adversarial_value[await-attribute-on-instance] (an exact instance of the type's class
# holding an ``__await__`` attribute is awaitable to graphql-core, which awaits it and reports the
# failure; the compiled check once skipped every exact instance, it now looks in the instance's
# ``__dict__``), and test_random_documents_and_values, which draws the null ``$r`` of the first
# test below.


async def test_null_directive_variable_below_a_compiled_object() -> None:
    """``@include(if: $r)`` with ``$r: Boolean = false`` passed as null is a field error
    graphql-core raises when it collects the selection holding the directive, i.e. only when it
    completes ``child`` (not at all when ``child`` is null). The compiled executor collects the
    selections of nested objects up front, while compiling ``record``; an exception there now
    leaves ``record`` to graphql-core."""
    document = "query Q($r: Boolean = false) { record { text child { name @include(if: $r) } } }"
    for child in (None, valid_item()):
        outcome = await run_both(document, {"record": valid_record().with_attr("child", child)}, {"r": None})
        outcome.assert_same()


class Localized(FieldExtension):
    """A field extension using the request (falling back to a default without one)."""

    def resolve(self, next_: Any, source: Any, info: strawberry.Info, **kwargs: Any) -> Any:
        value = next_(source, info, **kwargs)
        try:
            locale = info.context["locale"]
        except (AttributeError, KeyError, TypeError):
            locale = "en"
        return f"{value} ({locale})"


@strawberry.type
class Greeting:
    text: str = strawberry.field(extensions=[Localized()])


@strawberry.type
class GreetingQuery:
    @strawberry.field
    def greeting(self) -> Greeting:
        return Greeting(text="hello")


async def test_field_extensions_see_the_request() -> None:
    """A field without a resolver but with a field extension is marked ``_is_default`` by
    Strawberry too; compiled, its resolver would be called with ``info=None`` and the extension
    would get an ``Info`` without the request. Only Strawberry's basic resolver is compiled."""
    document = "{ greeting { text } }"
    context = {"locale": "fr"}
    compiled = strawberry.Schema(query=GreetingQuery, execution_context_class=CompiledExecutor)
    standard = strawberry.Schema(query=GreetingQuery)
    outcome = await run_both(document, {}, compiled_schema=compiled, standard_schema=standard, context=context)
    assert outcome.standard.data == {"greeting": {"text": "hello (fr)"}}
    outcome.assert_same()


INCREMENTAL = StrawberryConfig(scalar_map=SCALAR_MAP, enable_experimental_incremental_execution=True)


async def _incremental_frames(schema: strawberry.Schema, document: str) -> list[Any]:
    builder = Builder()
    root = SimpleNamespace(record=builder.build(valid_record()))
    result: Any = await schema.execute(document, root_value=root)
    if not hasattr(result, "initial_result"):
        return [{"data": result.data, "errors": _errors(result)}]
    frames: list[Any] = [result.initial_result.formatted]
    async for frame in result.subsequent_results:
        frames.append(frame.formatted)
    return frames


@pytest.mark.parametrize(
    "document",
    [
        "{ record { text child { name } ... @defer { child { count } } } }",
        "{ record { text words @stream(initialCount: 1) } }",
    ],
    ids=["defer-below-a-compiled-object", "stream"],
)
async def test_incremental_delivery(document: str) -> None:
    """With ``enable_experimental_incremental_execution``: fields deferred by an enclosing
    ``@defer`` (their field details carry a defer usage, but no new one is collected below the
    object) and ``@stream`` lists are delivered later by graphql-core; a compiled serializer would
    put them in the initial payload, so a schema with those directives is never compiled."""
    compiled = await _incremental_frames(build_schema(True, config=INCREMENTAL), document)
    standard = await _incremental_frames(build_schema(False, config=INCREMENTAL), document)
    assert len(standard) == 2
    assert json.dumps(compiled) == json.dumps(standard)
