"""The cost model (``resolvers.documents.cost``, docs/api.md "Query cost"): the weights the docs state, the
defaults passing every query runsgate ships, fragments costing what their inlined form costs, and
no nesting too deep for it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    InlineFragmentNode,
    NamedTypeNode,
    NameNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    get_introspection_query,
    get_named_type,
    is_composite_type,
    is_list_type,
    is_non_null_type,
    parse,
    print_ast,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from resolvers.documents.cost import MAX_COST, CostLimits, document_cost, schema_of
from resolvers.documents.weights import FIELD_COSTS
from resolvers.schema import schema
from server.settings import Settings
from server.view.graphiql import GRAPHIQL_EXAMPLE_QUERY

from ..security.test_query_cost import BIG_ANSWER

ROOT = Path(__file__).resolve().parents[2]
GRAPHQL = schema_of(schema)
DEMO = CostLimits(max_page_size=100, agents=3)
"""The default page size, and the demo agents."""
LIMIT = Settings.model_fields["max_query_cost"].default


def cost(document: str, variables: dict[str, Any] | None = None, limits: CostLimits = DEMO) -> int:
    found = document_cost(GRAPHQL, parse(document), None, variables, limits)
    assert found is not None, document
    return found[0]


def readme_documents() -> list[str]:
    """Every ```graphql block of the README, and its curl query."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```graphql\n(.*?)```", readme, re.DOTALL)
    curl = re.search(r"-d '(\{\"query\".*?\})'", readme)
    assert curl is not None
    return [*blocks, json.loads(curl[1])["query"]]


def example_documents() -> dict[str, str]:
    """The documents of ``examples/``: the gql script's constants and the shell script's."""
    from examples import walkthrough_gql

    found = {
        f"walkthrough_gql.{name}": getattr(walkthrough_gql, name)
        for name in ("START_RUN", "SUSPENDED_RUNS", "APPROVE", "DECIDE")
    }
    shell = (ROOT / "examples" / "walkthrough.sh").read_text()
    for name, text in re.findall(r"^([A-Z_]+)='((?:query|mutation) .*?)'$", shell, re.MULTILINE | re.DOTALL):
        found[f"walkthrough.sh {name}"] = text
    assert len(found) == 8, list(found)
    return found


# -- the defaults ---------------------------------------------------------------------------------
def test_the_default_limit_passes_every_query_of_the_readme_graphiql_and_the_examples() -> None:
    documents = {f"README block {i}": text for i, text in enumerate(readme_documents())}
    documents["GraphiQL's example"] = GRAPHIQL_EXAMPLE_QUERY
    documents["GraphiQL's introspection"] = get_introspection_query(descriptions=True)
    documents.update(example_documents())
    two_decisions = {"input": {"decisions": [{}, {}]}}

    costs = {name: cost(text, two_decisions) for name, text in documents.items()}

    assert LIMIT == 10_000
    assert {name: found for name, found in costs.items() if found > LIMIT} == {}
    assert len(costs) == 18


def test_the_examples_of_the_docs_cost_what_the_docs_say() -> None:
    readme = readme_documents()
    assert cost("{ agents { id } }") == 3
    assert cost(readme[1]) == 213  # the listing: 3 + 10 x (1 + 5 x 4)
    assert cost(readme[-1]) == 1_102  # curl: no page size, so 100 runs
    assert cost(GRAPHIQL_EXAMPLE_QUERY) == 112
    assert cost(BIG_ANSWER) == 2_070_101
    # a page size beyond the cap counts as the cap; a variable counts with its value or default
    assert cost('{ suspendedRuns(agentId: "a", first: 5000) { nodes { runId } } }') == 1 + 100
    variable = 'query($n: Int = 7) { suspendedRuns(agentId: "a", first: $n) { nodes { runId } } }'
    assert cost(variable) == 1 + 7
    assert cost(variable, {"n": 2}) == 1 + 2
    # conversation: a point per started KiB of maxBytes, its default 65,536
    assert cost('{ suspendedRun(agentId: "a", runId: "r") { conversation { totalBytes } } }') == 1 + 1 + 64
    assert cost('{ suspendedRun(agentId: "a", runId: "r") { conversation(maxBytes: 1025) { totalBytes } } }') == 4


def test_every_list_of_objects_has_a_size_and_every_connection_a_page() -> None:
    # every entry of the table names a field of the schema
    for name in FIELD_COSTS:
        type_name, field_name = name.split(".")
        assert field_name in GRAPHQL.get_type(type_name).fields, name  # type: ignore[union-attr]
    # every list of objects says how long it is assumed to be
    paged = {name.split(".")[0] for name, rule in FIELD_COSTS.items() if rule.size == "of page"}
    for type_ in GRAPHQL.type_map.values():
        if type_.name.startswith("__") or not hasattr(type_, "fields"):
            continue
        for field_name, field in type_.fields.items():  # type: ignore[union-attr]
            wrapped = field.type.of_type if is_non_null_type(field.type) else field.type
            rule = FIELD_COSTS.get(f"{type_.name}.{field_name}")
            if is_list_type(wrapped) and is_composite_type(get_named_type(field.type)):
                assert rule is not None, f"{type_.name}.{field_name}"
                assert rule.size is not None, f"{type_.name}.{field_name}"
            # and a field answering a type whose lists are of its page sets that page
            if get_named_type(field.type).name in paged:
                assert rule is not None, f"{type_.name}.{field_name}"
                assert rule.page is not None, f"{type_.name}.{field_name}"


# -- the count ------------------------------------------------------------------------------------
def test_a_fragment_bomb_is_costed_at_once() -> None:
    levels = 150
    fragments = ["fragment F0 on Agent { suspendedRuns { totalCount } }"] + [
        f"fragment F{i} on Agent {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels)
    ]
    document = f"query {{ agents {{ ...F{levels - 1} }} }}\n" + "\n".join(fragments)

    assert cost(document) == MAX_COST  # 3 agents x 2^149 x 2 points, counted up to the cap


def test_any_nesting_is_costed_without_recursion() -> None:
    # 5,000 inline fragments one inside the other (a parser refuses that text; a walk of its own
    # stack costs it all the same)
    innermost = SelectionSetNode(selections=(FieldNode(name=NameNode(value="id")),))
    selection = innermost
    for _ in range(5000):
        inline = InlineFragmentNode(type_condition=NamedTypeNode(name=NameNode(value="Agent")), selection_set=selection)
        selection = SelectionSetNode(selections=(inline,))
    agents = FieldNode(name=NameNode(value="agents"), selection_set=selection)
    operation = OperationDefinitionNode(
        operation=OperationType.QUERY, selection_set=SelectionSetNode(selections=(agents,))
    )
    document = DocumentNode(definitions=(operation,))

    assert document_cost(GRAPHQL, document, None, None, DEMO) == (3, False)


# Documents over the schema, as selections of fields, with their arguments and aliases
_FIELDS = {
    "Query": [
        "agents",
        'suspendedRuns(agentId: "a", first: $n)',
        'suspendedRuns(agentId: "a", page: {page: 0, perPage: 3})',
        'suspendedRun(agentId: "a", runId: "r")',
        'runEvents(agentId: "a", runId: "r")',
        "webhookDeliveries(first: 2)",
    ],
    "Agent": ["id", "name", "suspendedRuns(last: $n)"],
    "SuspendedRunConnection": ["totalCount", "nodes", "edges", "pageInfo"],
    "SuspendedRunEdge": ["cursor", "node"],
    "SuspendedRun": ["runId", "toolCalls", "events", "conversation(maxBytes: $bytes)", "conversation", "lastError"],
    "SuspendedToolCall": ["toolName", "args", "decision", "approvals"],
    "Conversation": ["totalBytes", "messages", "cut"],
}


@st.composite
def selection(draw: st.DrawFn, type_name: str, level: int = 0) -> str:
    """Fields of ``type_name``, some aliased, some of them with selections of their own."""
    parts = []
    for index in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(_FIELDS[type_name]))
        name = field.split("(")[0]
        definition = GRAPHQL.get_type(type_name).fields[name]  # type: ignore[union-attr]
        named = get_named_type(definition.type).name
        alias = f"a{level}_{index}: " if draw(st.booleans()) else ""
        if named in _FIELDS and level < 4:
            parts.append(f"{alias}{field} {{ {draw(selection(named, level + 1))} }}")
        elif named not in _FIELDS and not is_composite_type(get_named_type(definition.type)):
            parts.append(f"{alias}{field}")
        else:
            parts.append(f"{alias}__typename")
    return " ".join(parts)


def _fragmented(document: str, draw: st.DrawFn) -> tuple[str, dict[str, tuple[str, str]]]:
    """``document`` with some selection sets moved into named fragments, each spread once or
    twice; and the fragments, name -> (type condition, body)."""
    fragments: dict[str, tuple[str, str]] = {}

    def body_of(node: Any, type_name: str) -> str:
        parts = []
        for field in node.selection_set.selections:
            head = print_ast(FieldNode(alias=field.alias, name=field.name, arguments=field.arguments))
            if field.selection_set is None:
                parts.append(head)
            else:
                named = get_named_type(GRAPHQL.get_type(type_name).fields[field.name.value].type).name  # type: ignore[union-attr]
                parts.append(f"{head} {{ {body_of(field, named)} }}")
        body = " ".join(parts)
        if not draw(st.booleans()):
            return body
        name = f"F{len(fragments)}"
        fragments[name] = (type_name, body)
        return " ".join([f"...{name}"] * draw(st.sampled_from([1, 2])))

    operation = parse(document).definitions[0]
    text = f"query($n: Int, $bytes: Int!) {{ {body_of(operation, 'Query')} }}\n" + "\n".join(
        f"fragment {name} on {type_name} {{ {body} }}" for name, (type_name, body) in fragments.items()
    )
    return text, fragments


def _inlined(text: str, fragments: dict[str, tuple[str, str]]) -> str:
    """``text``'s operation with every spread replaced by an inline fragment of the same fields."""
    operation = text.split("\n")[0]
    while (spread := re.search(r"\.\.\.(F\d+)\b", operation)) is not None:
        type_name, body = fragments[spread[1]]
        operation = operation[: spread.start()] + f"... on {type_name} {{ {body} }}" + operation[spread.end() :]
    return operation


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.data(), st.integers(0, 150), st.integers(1, 3 << 20))
def test_a_document_with_fragments_costs_what_its_inlined_form_costs(data: st.DataObject, n: int, size: int) -> None:
    # given a document over the schema, with page sizes and `maxBytes` from variables
    document = f"query($n: Int, $bytes: Int!) {{ {data.draw(selection('Query'))} }}"
    # when some of its selections become fragments (some spread twice: their fields twice)
    fragmented, fragments = _fragmented(document, data.draw)
    inlined = _inlined(fragmented, fragments)
    variables = {"n": n, "bytes": size}

    # then the document costs what its inlined form does
    assert cost(fragmented, variables) == cost(inlined, variables), (fragmented, inlined)
    if "..." not in fragmented:
        assert cost(fragmented, variables) == cost(document, variables)


def test_a_review_queue_message_costs_its_read_beside_its_objects() -> None:
    # each message of reviewQueueEvents reads its run and checks its questions: 2 points more
    item = "item { toolCall { args } reviewClaim { by } }"
    assert cost(f"subscription {{ reviewQueueEvents {{ id change {item} }} }}") == 1 + 2 + 1 + 1 + 1 + 1
    assert cost("subscription { reviewQueueEvents { id } }") == 3


def test_a_tool_filtered_queue_costs_its_walk_of_the_runs_holding_the_tool() -> None:
    from resolvers.documents.weights import TOOL_WALK

    plain = cost("{ reviewQueue(first: 20) { totalCount nodes { runId } } }")
    literal = '{ reviewQueue(first: 20, filter: {toolNames: ["issue_refund"]}) { totalCount nodes { runId } } }'
    assert cost(literal) == plain + TOOL_WALK
    asked = "query ($f: ReviewQueueFilter) { reviewQueue(first: 20, filter: $f) { totalCount nodes { runId } } }"
    assert cost(asked, {"f": {"toolNames": ["issue_refund"]}}) == plain + TOOL_WALK
    assert cost(asked, {"f": {"unclaimed": True}}) == plain  # the claim filters read the marked runs only
    assert LIMIT // TOOL_WALK < 20  # a request holds few walks
