"""Compiled completion answers byte for byte what graphql-core answers (issue 6 §5).

Two runsgate apps share one MongoDB database (FerretDB, or ``MONGODB_URI``), as two instances
do in production: one with the compiled executor (``resolvers/fastpath/compiled.py``, the default) and one
with ``RUNSGATE_COMPILED_EXECUTION=false`` (graphql-core executes every field). The same request
goes to both through HTTP and the two responses must be equal byte for byte: status, content type
and body (so data, nulls, errors with their messages, paths and locations, and key order).

The database holds runs of every demo agent made through the API (pending, approved, declined
calls, a sub-agent's inner run with ``parentRunId``), generated runs (``runsgate seed``), and
odd snapshots that only a corrupted or hand-edited store would hold (a null in a non-null field,
a string for a ``DateTime``, numbers for strings, a decision without its time, an error without
its message): those are where the compiled serializer must fall back to graphql-core.

Documents:
- every GraphQL query document of the test suite, the benchmark and the examples (string
  constants found in their source, completed with the fragments they spread), with variables
  drawn from the data (run ids, cursors, global ids, filters, pages, unknown agents...);
- generated documents: random selections over the schema's types with aliases, repeated
  fields, ``__typename``, inline and named fragments, ``@skip``/``@include`` with literals and
  variables, under ``suspendedRuns``, ``suspendedRun``, ``node``, ``agents`` and ``_entities``.

Every request goes twice to the compiled app: once through Strawberry's pipeline, and again as a
prepared operation (``resolvers/fastpath/prepared.py``) when it is a query that executed. Both answers
must equal the standard app's.

The compiled path must really have been taken, and have fallen back somewhere: while
``test_every_suite_document`` runs, the ``runsgate_graphql_compiled_completions`` counters move
(only the compiled app has them move), and the compiled app answers requests as prepared
operations and by root plans. No test depends on another having run before it.
"""

from __future__ import annotations

import ast
import base64
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import (
    DocumentNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSyntaxError,
    GraphQLUnionType,
    OperationDefinitionNode,
    OperationType,
    get_named_type,
    is_composite_type,
    is_required_argument,
    parse,
    print_ast,
    validate,
    visit,
)
from graphql.language import Visitor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from resolvers.metrics import COMPILED, COMPILED_FALLBACK
from resolvers.schema import schema as runsgate_schema
from runtime.seed import SeedPlan, seed_store
from server.app import create_app
from server.settings import DEMO_AGENTS, Settings, ToolRuleConfig
from storage import SnapshotDocument

from .._graphql import REFUND, SUPERVISOR, TWO_REFUNDS_PROMPT, WEATHER, WEATHER_PROMPT, GraphQLClient, graphql_schema
from .._servers import with_database

pytestmark = pytest.mark.mongo

ROOT = Path(__file__).resolve().parents[2]
GRAPHQL_SCHEMA = runsgate_schema._schema
ODD = "odd"
"""Thread of the odd snapshots (weather agent)."""


# -- the two apps over one database ------------------------------------------------------------


@dataclass
class Pair:
    """The compiled app, the standard app, and what the data holds (for variables)."""

    compiled: httpx.AsyncClient
    standard: httpx.AsyncClient
    apps: tuple[Starlette, Starlette]
    run_ids: list[str] = field(default_factory=list)
    cursors: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)

    async def both(self, body: dict[str, Any]) -> tuple[httpx.Response, httpx.Response]:
        return await self.compiled.post("/graphql", json=body), await self.standard.post("/graphql", json=body)


def _settings(uri: str, *, compiled: bool) -> Settings:
    return Settings(
        agents=DEMO_AGENTS,
        mongodb_uri=uri,
        auth=False,
        sweep_interval=0,
        max_page_size=50,
        compiled_execution=compiled,
        introspection=True,
        # refunds above $100 get a deadline, so runs with and without expiresAt are listed
        tool_rules=[
            ToolRuleConfig.model_validate(
                {"tool": "issue_refund", "argument": "amount", "above": 100, "expiresAfter": 86400}
            )
        ],
    )


@pytest.fixture(scope="module")
async def pair(mongodb_server: str) -> AsyncIterator[Pair]:
    uri = with_database(mongodb_server)
    apps: list[Starlette] = [create_app(_settings(uri, compiled=True)), create_app(_settings(uri, compiled=False))]
    async with apps[0].router.lifespan_context(apps[0]), apps[1].router.lifespan_context(apps[1]):
        clients = [httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://localhost") for a in apps]
        try:
            found = Pair(*clients, apps=(apps[0], apps[1]))
            await _fill(apps[0], GraphQLClient(clients[0]), found)
            yield found
        finally:
            for client in clients:
                await client.aclose()
            await apps[0].state.store.drop_all()


async def _fill(app: Starlette, gql: GraphQLClient, pair: Pair) -> None:
    """Runs through the API, generated runs, and odd snapshots; remember ids and cursors."""
    single = await gql.suspend(REFUND, "Please refund order 1042", threadId="t-api", resourceId="r-api")
    approved = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT, threadId="t-api", resourceId="r-api")
    declined = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT, threadId="t-api-2")
    await gql.approve(REFUND, approved["runId"], approved["toolCalls"][0]["toolCallId"])
    await gql.decline(REFUND, declined["runId"], declined["toolCalls"][1]["toolCallId"], reason="not eligible")
    weather = await gql.suspend(WEATHER, WEATHER_PROMPT, threadId="t-weather", resourceId="r-api")
    outer = await gql.suspend(SUPERVISOR, "Please refund order 1042")
    store = app.state.store
    await seed_store(store, SeedPlan(runs=30, agents=2, threads=4, resources=2, seed=7))
    pair.run_ids = [single["runId"], approved["runId"], declined["runId"], weather["runId"], outer["runId"]]
    for agent in (REFUND, WEATHER):
        connection = await gql.suspended_runs(agent, first=50)
        pair.run_ids += [edge["node"]["runId"] for edge in connection["edges"][::7]]
        pair.cursors += [edge["cursor"] for edge in connection["edges"][::5]]
    template = await store.get(WEATHER, weather["runId"])
    assert template is not None
    await store.insert_many([(doc, b"[]") for doc in _odd_snapshots(template)])
    pair.threads = ["t-api", "t-weather", "thread-1", ODD, "no-such-thread"]
    pair.resources = ["r-api", "customer-0", "no-such-resource"]


def _odd_snapshots(template: SnapshotDocument) -> list[SnapshotDocument]:
    """Copies of a weather run, each with one value graphql-core cannot simply return."""
    now = datetime.now(UTC)
    odd: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("null-in-non-null", {}, {"requiresApproval": None}),
        ("float-tool-name", {}, {"toolName": 12.5}),
        ("list-args", {}, {"args": ["a", 1, None]}),
        (
            "undated-decision",
            {},
            {"decision": {"kind": "resumed", "decidedAt": None, "decidedBy": None, "reason": None}},
        ),
        ("string-time", {"suspendedAt": "yesterday"}, {}),
        ("int-resource", {"resourceId": 7}, {}),
        ("bool-thread-tool-call-id", {}, {"toolCallId": True}),
        ("error-without-message", {"lastError": {"type": "RuntimeError", "message": None, "at": now}}, {}),
        ("error-with-string-time", {"lastError": {"type": "RuntimeError", "message": "down", "at": "soon"}}, {}),
        ("no-tool-calls-list", {"toolCalls": []}, {}),
    ]
    docs = []
    for index, (name, run_changes, call_changes) in enumerate(odd):
        doc = json.loads(json.dumps(template, default=str))  # a deep copy with the same shape
        doc.update(
            {
                "_id": f"odd-{name}",
                "historyId": f"odd-history-{name}",
                "threadId": ODD,
                "createdAt": now - timedelta(hours=1, seconds=index),
                "suspendedAt": now - timedelta(hours=1, seconds=index),
                "updatedAt": now,
                "toolCalls": [{**call, **call_changes} for call in doc["toolCalls"]],
                "lastError": None,
                "claim": None,
            }
        )
        doc.update(run_changes)
        docs.append(doc)
    return docs


# -- the documents of the test suite -------------------------------------------------------------


def _string_constants() -> set[str]:
    """Every string literal of the tests, the benchmark and the examples, and the value of every
    module-level string name of their modules that the syntax tree alone determines (documents
    built by concatenation or f-strings of other such names, imported ones included). Read with
    ``ast``, nothing imported: the result does not depend on which tests ran before."""
    found: set[str] = set()
    paths = [*ROOT.joinpath("tests").rglob("*.py"), *ROOT.joinpath("bench").rglob("*.py")]
    paths += list(ROOT.joinpath("examples").rglob("*.py"))
    trees: dict[str, ast.Module] = {}
    for path in paths:
        if "node_modules" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
        trees[".".join(path.relative_to(ROOT).with_suffix("").parts)] = tree
    found.update(_module_strings(trees))
    return found


def _module_strings(trees: dict[str, ast.Module]) -> set[str]:
    """The values of the module-level names assigned a string expression (constants, names of
    such strings in the module or imported from another, ``+`` and f-strings of them),
    evaluated until nothing new is found."""
    values: dict[tuple[str, str], str] = {}
    changed = True
    while changed:
        changed = False
        for module, tree in trees.items():
            imported = _imported_names(module, tree)
            for statement in tree.body:
                target = statement.targets[0] if isinstance(statement, ast.Assign) else None
                if isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    target = statement.target
                value = statement.value if target is not None else None  # type: ignore[union-attr]
                if not isinstance(target, ast.Name) or value is None or (module, target.id) in values:
                    continue
                text = _evaluate(value, lambda name, m=module, i=imported: values.get(i.get(name, (m, name))))
                if text is not None:
                    values[(module, target.id)] = text
                    changed = True
    return set(values.values())


def _imported_names(module: str, tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Name -> (module, name) for the ``from X import name`` statements of a module."""
    names: dict[str, tuple[str, str]] = {}
    package = module.rsplit(".", 1)[0]
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module is not None:
            source = statement.module
            if statement.level:
                base = package.rsplit(".", statement.level - 1)[0] if statement.level > 1 else package
                source = f"{base}.{source}"
            for alias in statement.names:
                names[alias.asname or alias.name] = (source, alias.name)
    return names


def _evaluate(node: ast.expr, lookup: Any) -> str | None:
    """The string value of an expression made of string constants, known names, ``+`` and
    f-strings of them; None otherwise."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        found: str | None = lookup(node.id)
        return found
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _evaluate(node.left, lookup), _evaluate(node.right, lookup)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                if part.conversion != -1 or part.format_spec is not None:
                    return None
                part_value = _evaluate(part.value, lookup)
            else:
                part_value = _evaluate(part, lookup)
            if part_value is None:
                return None
            parts.append(part_value)
        return "".join(parts)
    return None


def _suite_documents() -> list[tuple[str, str | None]]:
    """``(document, operation name)`` of every valid query operation found in the suite's
    sources, each document completed with the fragments it spreads but does not define."""
    parsed: list[DocumentNode] = []
    for text in _string_constants():
        if "{" not in text:
            continue
        try:
            parsed.append(parse(text))
        except GraphQLSyntaxError:  # not GraphQL
            continue
    fragments: dict[str, FragmentDefinitionNode] = {}
    for document in parsed:
        for definition in document.definitions:
            if isinstance(definition, FragmentDefinitionNode):
                fragments.setdefault(definition.name.value, definition)
    out: set[tuple[str, str | None]] = set()
    for document in parsed:
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if not operations:
            continue
        text = _with_fragments(document, fragments)
        if text is None or validate(GRAPHQL_SCHEMA, parse(text)):
            continue
        for operation in operations:
            if operation.operation is OperationType.QUERY:
                out.add((text, operation.name.value if operation.name else None))
    return sorted(out, key=lambda item: (item[0], item[1] or ""))


class _Spreads(Visitor):
    """Collects the names of the fragments spread in what it visits."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_fragment_spread(self, node: FragmentSpreadNode, *_: Any) -> None:
        self.names.add(node.name.value)


def _with_fragments(document: DocumentNode, fragments: dict[str, FragmentDefinitionNode]) -> str | None:
    """The document with the definitions of the fragments it spreads but lacks; None when one
    is defined nowhere."""
    defined = {d.name.value for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    added: list[FragmentDefinitionNode] = []
    pending: list[Any] = [document]
    while pending:
        spreads = _Spreads()
        for node in pending:
            visit(node, spreads)
        pending = []
        for name in sorted(spreads.names - defined):
            if name not in fragments:
                return None
            defined.add(name)
            added.append(fragments[name])
            pending.append(fragments[name])
    return print_ast(document) + "".join("\n" + print_ast(f) for f in added)


SUITE = _suite_documents()


def test_the_suite_holds_query_documents() -> None:
    # the extraction finds the documents the suite sends (not a silent empty list)
    texts = "\n".join(text for text, _ in SUITE)
    assert len(SUITE) >= 20, len(SUITE)
    for needle in ("suspendedRuns", "suspendedRun(", "node(", "agents", "_entities", "runEvents"):
        assert needle in texts, needle


# -- variables ------------------------------------------------------------------------------------


def _global_id(run_id: str) -> str:
    return base64.b64encode(f"SuspendedRun:{run_id}".encode()).decode()


def _pool(pair: Pair, name: str, type_name: str) -> list[Any]:
    """Values for a variable, by its name first (the suite's names), else by its type; the
    first is a plain valid value."""
    run_ids = [*pair.run_ids, "odd-null-in-non-null", "odd-string-time", "odd-undated-decision", "no-such-run"]
    sizes = [None, 0, 1, 2, 5, 20, 51]
    cursors = [None, *pair.cursors, "not-a-cursor"]
    by_name: dict[str, list[Any]] = {
        "agentId": [REFUND, WEATHER, SUPERVISOR, "no-such-agent"],
        "runId": run_ids,
        "id": [*map(_global_id, run_ids), "not-a-global-id"],
        "first": sizes,
        "last": sizes,
        "after": cursors,
        "before": cursors,
        "filter": [
            None,
            *({"threadId": thread} for thread in pair.threads),
            *({"resourceId": resource} for resource in pair.resources),
            {"threadId": "thread-1", "resourceId": "customer-0"},
            {"fromDate": "2020-01-01T00:00:00Z", "toDate": "2099-01-01T00:00:00Z"},
            {"fromDate": "2099-01-01T00:00:00Z"},
            {"fromDate": "2099-01-01T00:00:00Z", "toDate": "2020-01-01T00:00:00Z"},
            {"expiresBefore": "2099-01-01T00:00:00Z"},
            {"expiresBefore": "2020-01-01T00:00:00Z"},
            {"expiresBefore": "2099-01-01T00:00:00Z", "threadId": "t-api"},
        ],
        "page": [None, {"page": 0, "perPage": 5}, {"page": 2, "perPage": 3}, {"page": 0, "perPage": 0}],
        "representations": [
            [{"__typename": "SuspendedRun", "runId": run_id} for run_id in run_ids[:3]],
            [{"__typename": "SuspendedRun", "runId": "odd-null-in-non-null"}, {"__typename": "Agent", "id": REFUND}],
            [{"__typename": "SuspendedRun", "runId": "no-such-run"}, {"__typename": "Agent", "id": "nobody"}],
        ],
    }
    by_name |= {"a": by_name["agentId"], "r": by_name["runId"], "reps": by_name["representations"]}
    if name in by_name and not (name == "r" and type_name == "_Any"):
        return by_name[name]
    by_type: dict[str, list[Any]] = {
        "Boolean": [True, False],
        "Int": sizes,
        "String": ["x", *pair.threads],
        "ID": run_ids,
        "DateTime": ["2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z", "yesterday"],
        "_Any": by_name["representations"],
    }
    return by_type.get(type_name, [None])


def _variable_pools(pair: Pair, text: str, operation_name: str | None) -> dict[str, list[Any]]:
    """Variable name -> its pool of values, for the operation's variable definitions."""
    document = parse(text)
    operation = next(
        d
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode) and (d.name.value if d.name else None) == operation_name
    )
    pools = {}
    for definition in operation.variable_definitions or ():
        type_node: Any = definition.type
        while hasattr(type_node, "type"):
            type_node = type_node.type
        name = definition.variable.name.value
        pools[name] = _pool(pair, name, type_node.name.value)
    return pools


def _variables(pair: Pair, text: str, operation_name: str | None) -> st.SearchStrategy[dict[str, Any]]:
    pools = _variable_pools(pair, text, operation_name)
    return st.fixed_dictionaries({name: st.sampled_from(pool) for name, pool in pools.items()})


# -- comparing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compared:
    """How the compiled app answered a request the second time."""

    prepared: bool
    """As a prepared operation (``resolvers/fastpath/prepared.py``)."""
    planned: bool
    """By its root plan (``resolvers/fastpath/root_plan.py``)."""
    errors: bool
    """With errors."""


async def assert_same_response(pair: Pair, body: dict[str, Any]) -> Compared:
    first, standard = await pair.both(body)
    # the same request again: a query that executed once is now a prepared operation
    # (resolvers/fastpath/prepared.py), executed without Strawberry's parse/validate/extension steps
    prepared = getattr(graphql_schema(pair.apps[0]), "prepared_operations", None)
    assert prepared is not None
    executed, planned = prepared.executed, prepared.planned
    again = await pair.compiled.post("/graphql", json=body)
    for compiled in (first, again):
        assert compiled.status_code == standard.status_code, (body, compiled.text, standard.text)
        assert compiled.headers["content-type"] == standard.headers["content-type"]
        assert _timeless(compiled.content) == _timeless(standard.content), (body, compiled.text, standard.text)
    return Compared(prepared.executed > executed, prepared.planned > planned, b'"errors"' in again.content)


_WAITED = re.compile(rb'"waitedSeconds":-?[0-9][0-9.eE+-]*')


def _timeless(content: bytes) -> bytes:
    """``content`` with each ``waitedSeconds`` (the clock's seconds since a question was asked, which
    two requests never read alike) as one mark; every other byte compared as sent."""
    return _WAITED.sub(b'"waitedSeconds":"<clock>"', content)


def _counts() -> tuple[float, float]:
    return COMPILED._value.get(), COMPILED_FALLBACK._value.get()


VARIANTS = 4
"""Variable values per suite document in ``test_every_suite_document``: the ``i``-th value of
every variable's pool (wrapping), for ``i`` in ``range(VARIANTS)``; then ``ODD_VARIANTS``."""
ODD_VARIANTS = [
    {"agentId": WEATHER, "filter": {"threadId": ODD}, "runId": run_id, "id": _global_id(run_id)}
    for run_id in ("odd-null-in-non-null", "odd-string-time", "odd-undated-decision")
]
"""Values pointing at the odd snapshots (the weather agent's thread ``ODD``); other variables
take the first value of their pool."""


async def test_every_suite_document(pair: Pair) -> None:
    # each document with the first values of every variable pool (drawn ones follow)
    counts = _counts()
    compared = []
    for text, operation_name in SUITE:
        pools = _variable_pools(pair, text, operation_name)
        variants = [{name: pool[i % len(pool)] for name, pool in pools.items()} for i in range(VARIANTS)]
        variants += [{name: odd.get(name, pool[0]) for name, pool in pools.items()} for odd in ODD_VARIANTS]
        for variables in variants:
            body = {"query": text, "operationName": operation_name, "variables": variables}
            compared.append(await assert_same_response(pair, body))
    # the fast path was really taken: the compiled app (only; the standard app never builds a
    # CompiledExecutor) compiled objects and fell back on the odd snapshots; it answered
    # requests as prepared operations, some with errors (odd snapshots, bad variables), whose
    # processing (logging, masking) was compared too; and many of them by their root plan,
    # some with a resolver's error (only documents whose selection compiles have one)
    compiled, fallbacks = _counts()
    assert compiled - counts[0] > 100
    assert fallbacks - counts[1] > 0
    assert sum(c.prepared for c in compared) > 250
    assert sum(c.prepared and c.errors for c in compared) > 30
    assert sum(c.planned for c in compared) > 40
    assert sum(c.planned and c.errors for c in compared) > 5
    # the standard app prepares nothing
    assert not hasattr(graphql_schema(pair.apps[1]), "prepared_operations")


SKIPPING = """
query Skipping($agentId: ID!, $skip: Boolean!, $include: Boolean!) {
  suspendedRuns(agentId: $agentId, first: 3) {
    edges {
      node {
        runId @skip(if: $skip)
        status @include(if: $include)
        ... on SuspendedRun @skip(if: $include) { threadId }
        toolCalls { toolName ...Args @include(if: $skip) }
      }
    }
  }
}
fragment Args on SuspendedToolCall { args }
"""


async def test_skip_and_include_follow_each_request_s_variables(pair: Pair) -> None:
    # compiled serializers are reused across requests of one document: the values of the
    # variables its directives read are part of what they are reused for
    for skip, include in [(False, True), (True, False), (False, False), (True, True), (False, True)]:
        body = {"query": SKIPPING, "variables": {"agentId": REFUND, "skip": skip, "include": include}}
        await assert_same_response(pair, body)
        node = (await pair.compiled.post("/graphql", json=body)).json()["data"]["suspendedRuns"]["edges"][0]["node"]
        assert ("runId" in node) is not skip
        assert ("status" in node) is include
        assert ("threadId" in node) is not include
        assert ("args" in node["toolCalls"][0]) is skip


@settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_suite_documents_with_drawn_variables(pair: Pair, data: st.DataObject) -> None:
    text, operation_name = data.draw(st.sampled_from(SUITE), label="document")
    variables = data.draw(_variables(pair, text, operation_name), label="variables")
    await assert_same_response(pair, {"query": text, "operationName": operation_name, "variables": variables})


# -- generated documents --------------------------------------------------------------------------

DIRECTIVES = ["", "", "", " @skip(if: $skip)", " @include(if: $include)", " @include(if: true)", " @skip(if: true)"]


class _Writer:
    """Writes one document: a selection per type, fresh aliases and fragment names."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.fragments: list[str] = []
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def selection(self, type_: GraphQLNamedType, depth: int) -> str:
        """``{ ... }`` for an object, interface or union type."""
        parts: list[str] = []
        if isinstance(type_, GraphQLObjectType | GraphQLInterfaceType):
            fields = {n: f for n, f in type_.fields.items() if not any(map(is_required_argument, f.args.values()))}
            names = self.draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=6))
            parts += [self.field(name, fields[name], depth) for name in names]
        if self.draw(st.integers(0, 4)) == 0:
            parts.append("__typename")
        if isinstance(type_, GraphQLInterfaceType | GraphQLUnionType):
            possible = GRAPHQL_SCHEMA.get_possible_types(type_)
            for target in self.draw(st.lists(st.sampled_from(possible), min_size=1, max_size=2, unique=True)):
                parts.append(f"... on {target.name} {self.selection(target, depth + 1)}")
        elif self.draw(st.integers(0, 3)) == 0 and depth < 4:
            inner = self.selection(type_, depth + 1)
            if self.draw(st.booleans()):
                parts.append(f"... on {type_.name}{self.draw(st.sampled_from(DIRECTIVES))} {inner}")
            else:
                name = self.fresh("F")
                self.fragments.append(f"fragment {name} on {type_.name} {inner}")
                parts.append(f"...{name}{self.draw(st.sampled_from(DIRECTIVES))}")
        return "{ " + " ".join(parts) + " }"

    def field(self, name: str, definition: GraphQLField, depth: int) -> str:
        named = get_named_type(definition.type)
        if is_composite_type(named) and depth >= 4:
            return "__typename"
        alias = self.draw(st.sampled_from(["", "", "", self.fresh("a") + ": "]))
        text = f"{alias}{name}{self.draw(st.sampled_from(DIRECTIVES))}"
        if is_composite_type(named):
            text += " " + self.selection(named, depth + 1)
        return text


ROOTS = {
    "suspendedRuns": (
        "suspendedRuns(agentId: $agentId, first: $first, after: $after, filter: $filter)",
        "SuspendedRunConnection",
    ),
    "suspendedRun": ("suspendedRun(agentId: $agentId, runId: $runId)", "SuspendedRun"),
    "node": ("node(id: $id)", "Node"),
    "agents": ("agents", "Agent"),
    "entities": ("_entities(representations: $representations)", "_Entity"),
}


@st.composite
def generated_documents(draw: st.DrawFn) -> str:
    writer = _Writer(draw)
    roots = draw(st.lists(st.sampled_from(sorted(ROOTS)), min_size=1, max_size=2, unique=True))
    selections = []
    for root in roots:
        call, type_name = ROOTS[root]
        type_ = GRAPHQL_SCHEMA.get_type(type_name)
        assert type_ is not None
        selections.append(f"{writer.fresh('r')}: {call} {writer.selection(type_, 1)}")
    header = (
        "query Generated($agentId: ID!, $runId: ID!, $id: ID!, $first: Int, $after: String, "
        "$filter: SuspendedRunFilter, $representations: [_Any!]!, $skip: Boolean!, $include: Boolean!)"
    )
    used = " ".join(selections) + " ".join(writer.fragments)
    header = _only_used_variables(header, used)
    return header + " { " + " ".join(selections) + " }\n" + "\n".join(writer.fragments)


def _only_used_variables(header: str, body: str) -> str:
    """Drop the variable definitions ``body`` does not use (an unused variable is invalid)."""
    name, _, rest = header.partition("(")
    used = set(re.findall(r"\$(\w+)", body))
    kept = [d for d in rest.rstrip(")").split(", ") if d.split(":")[0].lstrip("$") in used]
    return f"{name}({', '.join(kept)})" if kept else name


@settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
async def test_generated_documents(pair: Pair, data: st.DataObject) -> None:
    text = data.draw(generated_documents(), label="document")
    document = parse(text)
    assert not validate(GRAPHQL_SCHEMA, document), (text, validate(GRAPHQL_SCHEMA, document))
    variables = data.draw(_variables(pair, text, "Generated"), label="variables")
    await assert_same_response(pair, {"query": text, "variables": variables})


def test_generated_headers_declare_only_used_variables() -> None:
    # an unused variable would make every generated document invalid
    header = "query G($agentId: ID!, $skip: Boolean!)"
    assert _only_used_variables(header, "{ a(agentId: $agentId) }") == "query G($agentId: ID!)"
    assert _only_used_variables(header, "{ a @skip(if: $skip) }") == "query G($skip: Boolean!)"
    assert _only_used_variables(header, "{ a }") == "query G"
