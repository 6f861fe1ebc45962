"""``resolvers.fastpath.root_plan``: which prepared operations get a root plan, and that a plan answers as
graphql-core's executor does, or hands the request back to it.

The whole app's answers are compared with a standard app's in
``tests/server/test_compiled_differential.py``; here a small Strawberry schema shows the edges.
"""

from __future__ import annotations

from typing import Any

import pytest
import strawberry
from graphql import DocumentNode, ExecutionResult, execute, parse
from strawberry.execution.is_awaitable import optimized_is_awaitable

from resolvers.fastpath.compiled import CompiledExecutor
from resolvers.fastpath.root_plan import plan_root, run_root_plan
from resolvers.schema import build_schema


@strawberry.type
class Thing:
    name: str
    size: int | None

    @strawberry.field
    def upper(self) -> str:
        return self.name.upper()


CALLS: list[str] = []
"""Names ``Query.thing`` was called with."""


@strawberry.type
class Query:
    @strawberry.field
    async def thing(self, name: str = "a") -> Thing:
        CALLS.append(name)
        if name == "boom":
            raise ValueError("no such thing")
        return Thing(name=name, size=len(name))

    @strawberry.field
    async def maybe(self, name: str) -> Thing | None:
        if name == "boom":
            raise ValueError("no such thing")
        return None if name == "none" else Thing(name=name, size=None)

    @strawberry.field
    async def helped(self, info: strawberry.Info) -> Thing:
        await info._raw_info.async_helpers.gather([])
        return Thing(name="helped", size=0)

    @strawberry.field
    def things(self) -> list[Thing]:
        return [Thing(name="a", size=1)]


SCHEMA = strawberry.Schema(query=Query, execution_context_class=CompiledExecutor)
GRAPHQL_SCHEMA = SCHEMA._schema
DOCUMENTS: dict[str, DocumentNode] = {}


async def _both(text: str, variables: dict[str, Any] | None = None) -> tuple[ExecutionResult | None, ExecutionResult]:
    """(the root plan's answer, graphql-core's), graphql-core's first so the serializer is compiled."""
    document = DOCUMENTS.setdefault(text, parse(text))  # one document per text, as ParserCache keeps it
    standard = execute(
        GRAPHQL_SCHEMA,
        document,
        variable_values=variables,
        is_awaitable=optimized_is_awaitable,
        executor_class=CompiledExecutor,
    )
    if optimized_is_awaitable(standard):
        standard = await standard
    plan = plan_root(GRAPHQL_SCHEMA, document, None)
    assert plan is not None
    planned = await run_root_plan(
        plan,
        schema=GRAPHQL_SCHEMA,
        context_value=None,
        root_value=None,
        variable_values=variables,
        operation_extensions=None,
        is_awaitable=optimized_is_awaitable,
    )
    assert isinstance(standard, ExecutionResult)
    return planned, standard


@pytest.mark.parametrize(
    ("text", "variables"),
    [
        ("{ thing { name size } }", None),
        ("query($n: String!) { renamed: thing(name: $n) { size name __typename } }", {"n": "abc"}),
        # (a case of a document compiles its serializer for the cases after it, as on a server)
        ("query($n: String!) { thing(name: $n) { name } }", {"n": "ok"}),
        ("query($n: String!) { thing(name: $n) { name } }", {"n": "boom"}),  # non-null: data null
        ("query($n: String!) { maybe(name: $n) { name } }", {"n": "ok"}),
        ("query($n: String!) { maybe(name: $n) { name } }", {"n": "boom"}),  # nullable: {maybe: null}
        ("query($n: String!) { maybe(name: $n) { name size } }", {"n": "x"}),
        ("query($n: String!) { maybe(name: $n) { name size } }", {"n": "none"}),
        ("query($s: Boolean!) { thing { name size @skip(if: $s) } }", {"s": True}),
        ("query($s: Boolean!) { thing { ...F } } fragment F on Thing { name @include(if: $s) }", {"s": False}),
    ],
)
async def test_a_plan_answers_as_graphql_core(text: str, variables: dict[str, Any] | None) -> None:
    planned, standard = await _both(text, variables)
    assert planned is not None
    assert planned.formatted == standard.formatted


async def test_a_selection_without_serializer_is_handed_back_before_the_resolver_runs() -> None:
    # `upper` has a resolver, so the selection never compiles: graphql-core answers every time
    CALLS.clear()
    for _ in range(2):
        planned, standard = await _both('{ thing(name: "b") { name upper } }')
        assert planned is None
        assert standard.data == {"thing": {"name": "b", "upper": "B"}}
    assert CALLS == ["b", "b"]  # graphql-core's calls only


@pytest.mark.parametrize(
    ("text", "variables"),
    [
        ("query($n: String!) { thing(name: $n) { name } }", {}),  # a variable missing: request error
        ("query($n: String!) { thing(name: $n) { name } }", {"n": 5}),  # does not coerce
        ("{ helped { name } }", None),  # the resolver asks for async_helpers
    ],
)
async def test_a_plan_hands_back_what_it_does_not_answer(text: str, variables: dict[str, Any] | None) -> None:
    planned, standard = await _both(text, variables)
    assert planned is None
    assert standard.errors or standard.data  # graphql-core answers it


@pytest.mark.parametrize(
    "text",
    [
        '{ thing { name } maybe(name: "x") { name } }',  # two root fields
        "{ things { name } }",  # a list
        "{ __typename }",
        "{ thing @include(if: true) { name } }",
        "{ ... on Query { thing { name } } }",
        "query Q @deprecated { thing { name } }",
    ],
)
def test_only_a_single_plain_object_field_is_planned(text: str) -> None:
    assert plan_root(GRAPHQL_SCHEMA, parse(text, no_location=False), None) is None


def test_the_operation_is_chosen_by_name() -> None:
    document = parse("query A { thing { name } } query B { things { name } }")
    assert plan_root(GRAPHQL_SCHEMA, document, "A") is not None
    assert plan_root(GRAPHQL_SCHEMA, document, "B") is None
    assert plan_root(GRAPHQL_SCHEMA, document, None) is None  # graphql-core asks for a name
    assert plan_root(GRAPHQL_SCHEMA, document, "C") is None


def test_runsgate_listing_is_planned() -> None:
    schema = build_schema()._schema
    document = parse("query($a: ID!) { suspendedRuns(agentId: $a, first: 2) { edges { cursor } } }")
    plan = plan_root(schema, document, None)
    assert plan is not None
    assert plan.non_null
    assert plan.object_type.name == "SuspendedRunConnection"


class OnlyWhenAllowed(strawberry.BasePermission):
    """Allows a field when the request's context says so (``{"allowed": True}``)."""

    message = "not allowed"

    def has_permission(self, source: Any, info: strawberry.Info, **kwargs: Any) -> bool:
        return bool(info.context["allowed"])


@strawberry.type
class GuardedQuery:
    @strawberry.field(permission_classes=[OnlyWhenAllowed])
    async def thing(self) -> Thing:
        return Thing(name="guarded", size=7)


async def test_a_root_plan_runs_the_field_s_permission_classes() -> None:
    # given a schema with the fast path, whose one root field has a permission class
    from resolvers.fastpath import install
    from resolvers.fastpath.schema import PreparedSchema

    schema = install(extensions=[], mask_errors=lambda errors: errors, query=GuardedQuery)
    assert isinstance(schema, PreparedSchema)
    prepared = schema.prepared_operations
    assert prepared is not None
    query = "{ thing { name size } }"

    # when a request is allowed (through Strawberry's pipeline, which prepares it), then allowed
    # again (its root plan answers), then denied
    first = await schema.execute(query, context_value={"allowed": True})
    second = await schema.execute(query, context_value={"allowed": True})
    planned = prepared.planned
    denied = await schema.execute(query, context_value={"allowed": False})

    # then the root plan answered the denied request too, and denied it as graphql-core does
    assert first.data == second.data == {"thing": {"name": "guarded", "size": 7}}
    assert prepared.planned == planned + 1
    assert denied.data is None
    assert denied.errors is not None
    assert [(e.message, e.path) for e in denied.errors] == [("not allowed", ["thing"])]
    standard = await strawberry.Schema(query=GuardedQuery).execute(query, context_value={"allowed": False})
    assert standard.errors is not None
    assert [e.formatted for e in denied.errors] == [e.formatted for e in standard.errors]
