"""Schemathesis (GraphQL mode) against a live secured server on MongoDB.

Schemathesis reads runsgate's schema (the introspection of the code's schema, the same as the
checked-in ``schema.graphql``, whose federation directives it cannot load) and generates, with a fixed seed, a
bounded number of queries and mutations for every root field, each with arguments drawn
from the schema's types (odd strings, huge and negative numbers, missing optionals, nested
inputs). They are sent over HTTP with the full-scope admin key. For every example:

- Schemathesis' ``not_a_server_error`` check passes (no 5xx, and no GraphQL error that
  looks like a server fault). Its ``positive_data_acceptance`` check is left out on purpose:
  a schema-valid id that names nothing (``node(id: "")``) is rightly a ``BAD_USER_INPUT``;
- no error is a masked fault ("Unexpected error.") and every error raised while executing a
  field carries a typed ``extensions.code``;
- nothing was written: the generated ids match no stored run, so every mutation is refused,
  and the database holds the same documents before and after;
- the server logged no traceback.

``test_every_root_field_was_exercised`` then checks that every query field and mutation was
reached, and prints the counts.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import graphql
import pytest
import schemathesis
from graphql import introspection_from_schema
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from resolvers import schema as runsgate_schema

from .._graphql import data
from ._store import store_state
from .conftest import ADMIN, Server

pytestmark = pytest.mark.mongo

SEED = 20261129
MAX_EXAMPLES = 40
"""Per root field (``ROOT_FIELDS``)."""
TYPED_CODES = {"BAD_USER_INPUT", "AGENT_NOT_FOUND", "FORBIDDEN"}
EXAMPLES: Counter[str] = Counter()
"""Examples sent, per root field (``Query.agents``, ``Mutation.startRun``, ...)."""
REJECTED: Counter[str] = Counter()
"""Examples answered with top-level errors, per root field."""


@pytest.fixture(scope="module")
def seeded(mongo_server: Server) -> Server:
    """A few runs so queries return data (listing, nodes, events) while mutations are fuzzed."""
    for agent, prompt in [("refund-agent", "Please refund order 1042"), ("weather-agent", "What's the weather like?")]:
        outcome = data(
            mongo_server.url,
            ADMIN,
            "mutation($i: StartRunInput!) { startRun(input: $i) { __typename } }",
            i={"agentId": agent, "prompt": prompt, "threadId": "fuzz", "resourceId": "tenant-a"},
        )
        assert outcome["startRun"]["__typename"] == "RunOutcome"
    return mongo_server


def _json_node(value: Any) -> graphql.ValueNode:
    """A JSON value as a GraphQL literal (how a JSON scalar is written inside a document)."""
    if value is None:
        return graphql.NullValueNode()
    if isinstance(value, bool):
        return graphql.BooleanValueNode(value=value)
    if isinstance(value, int):
        return graphql.IntValueNode(value=str(value))
    if isinstance(value, float):
        return graphql.FloatValueNode(value=repr(value))
    if isinstance(value, str):
        return graphql.StringValueNode(value=value)
    if isinstance(value, list):
        return graphql.ListValueNode(values=tuple(_json_node(v) for v in value))
    fields = tuple(
        graphql.ObjectFieldNode(name=graphql.NameNode(value=k), value=_json_node(v)) for k, v in value.items()
    )
    return graphql.ObjectValueNode(fields=fields)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.from_regex(r"[_A-Za-z][_0-9A-Za-z]{0,8}", fullmatch=True), children, max_size=4)
    ),
    max_leaves=12,
)
schemathesis.graphql.scalar("JSON", JSON_VALUES.map(_json_node))
REPRESENTATIONS = st.fixed_dictionaries(
    {"__typename": st.sampled_from(["SuspendedRun", "Agent", "RunOutcome", ""]), "runId": st.text(), "id": st.text()}
).map(lambda r: {k: v for k, v in r.items() if k != ("id" if r["__typename"] == "SuspendedRun" else "runId")})
"""Federation ``_Any`` representations: entity-shaped (with random ids and types), or any JSON."""
schemathesis.graphql.scalar("_Any", (REPRESENTATIONS | JSON_VALUES).map(_json_node))

schema = schemathesis.graphql.from_dict(introspection_from_schema(runsgate_schema._schema))
"""Loaded at import, with no server (``schemathesis.pytest.from_fixture`` fails on pytest 9: it
sets ``Item._nodeid``); each call is given the live server's URL and the admin key. Each test
includes its root field explicitly (``schema.include``; filters added to one schema are joined
with "or"), or Schemathesis would leave out the federation ones (``_entities``, ``_service``)."""


ROOT_FIELDS = sorted(
    f"{root.name}.{name}"
    for root in (runsgate_schema._schema.query_type, runsgate_schema._schema.mutation_type)
    if root is not None
    for name in root.fields
)
"""Every root field's label (``Query.agents``, ``Mutation.startRun``, ...), as Schemathesis names its operations."""


def _generated_requests_test(label: str) -> Any:
    """The test of one root field: Schemathesis' own parametrization of the schema narrowed to it.

    One test function per field, each with a name of its own: Schemathesis 4.32 gives the tests
    of one function a single node id under pytest 9.2 (it passes the function's name as
    ``originalname``, from which pytest now builds the id), and pytest-xdist would run only one
    of them (``tests/test_collection.py``)."""

    @schema.include(name=label).parametrize()
    @seed(SEED)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def test(case: Any, seeded: Server) -> None:
        _refused_cleanly_and_wrote_nothing(case, seeded)

    return test


for _label in ROOT_FIELDS:
    globals()[f"test_generated_requests_are_refused_cleanly_and_write_nothing_on_{_label.replace('.', '_')}"] = (
        _generated_requests_test(_label)
    )


def _refused_cleanly_and_wrote_nothing(case: Any, seeded: Server) -> None:
    assert seeded.mongodb_uri is not None
    before = store_state(seeded.mongodb_uri)
    log_mark = seeded.log.stat().st_size

    response = case.call(base_url=f"{seeded.url}/graphql", headers=ADMIN.headers)

    field = case.operation.label
    EXAMPLES[field] += 1
    assert response.status_code < 500, response.text
    body = response.json()
    errors = body.get("errors") or []
    codes = {(error.get("extensions") or {}).get("code") for error in errors}
    if "AGENT_NOT_FOUND" not in codes:
        # Schemathesis judges an error with a path a server fault unless its code is one it
        # knows; AGENT_NOT_FOUND (a fixed code of the API, docs/api.md "Errors") is not, so those
        # answers are judged by the stricter rule below only: every error with a path carries a
        # typed code.
        case.validate_response(response, checks=[not_a_server_error])
    if errors:
        REJECTED[field] += 1
    for error in errors:
        assert error["message"] != "Unexpected error.", (case.body, error)
        if "path" in error:
            assert (error.get("extensions") or {}).get("code") in TYPED_CODES, (case.body, error)
    assert store_state(seeded.mongodb_uri) == before, case.body
    written = _log_since(seeded.log, log_mark)
    assert "Traceback" not in written, written
    assert "unexpected error" not in written, written


def _log_since(log: Path, mark: int) -> str:
    with open(log, encoding="utf-8", errors="replace") as file:
        file.seek(mark)
        return file.read()


def test_every_root_field_was_exercised() -> None:
    expected = {
        "Query._entities",
        "Query._service",
        "Query.agents",
        "Query.node",
        "Query.runEvents",
        "Query.suspendedRun",
        "Query.suspendedRuns",
        "Query.webhookDeliveries",
        "Mutation.approveToolCall",
        "Mutation.declineToolCall",
        "Mutation.resumeRun",
        "Mutation.retryRun",
        "Mutation.startRun",
    }
    print(f"\nschemathesis: seed {SEED}, {sum(EXAMPLES.values())} examples, rejected {sum(REJECTED.values())}")
    for field in sorted(EXAMPLES):
        print(f"  {field}: {EXAMPLES[field]} examples, {REJECTED[field]} with errors")
    assert expected <= set(ROOT_FIELDS), sorted(expected - set(ROOT_FIELDS))
    assert set(ROOT_FIELDS) <= set(EXAMPLES), sorted(set(ROOT_FIELDS) - set(EXAMPLES))
    assert all(EXAMPLES[f] >= 5 for f in ROOT_FIELDS), EXAMPLES
