"""Variables inside a ``JSON`` literal (issue 14, part 3), over HTTP on every store.

A ``JSON`` input written as a literal may hold variables anywhere (objects, lists, nested). They
are read as graphql-js's ``valueFromASTUntyped`` reads them: a variable given is its value; an
omitted one drops its object key, and is ``null`` in a list. An omitted variable is a client's
choice, never an "Unexpected error.".
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.settings import ApiKeyConfig, Settings

from .._auth import ADMIN
from .._graphql import WEATHER, WEATHER_PROMPT, GraphQLClient, document
from .._json_agent import JSON_ECHO


@pytest.fixture(params=["memory", "sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
def settings(request: pytest.FixtureRequest) -> Settings:
    """The demo agents and ``json-echo`` (``tests._json_agent``), on each store."""
    uri = request.getfixturevalue("mongodb_uri") if request.param == "mongo" else None
    store = f"sqlite:///{request.getfixturevalue('sqlite_path')}" if request.param == "sqlite" else None
    return Settings(
        store=store,
        mongodb_uri=uri,
        agents="tests._json_agent:AGENTS",
        api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())],
    )


def _resume(agent_id: str, run_id: str, declared: str, resume_data: str) -> str:
    """A ``resumeRun`` whose ``resumeData`` is the literal ``resume_data``, with variables ``declared``."""
    return document(
        f"mutation Resume({declared}) {{ resumeRun(input: {{agentId: {json.dumps(agent_id)}, "
        f"runId: {json.dumps(run_id)}, resumeData: {resume_data}}}) "
        "{ __typename ...UserErrorFields ... on RunOutcome { status output } } }"
    )


async def _asking_run(gql: GraphQLClient) -> str:
    """A ``json-echo`` run waiting for any JSON (no schema); its runId."""
    run = await gql.suspend(JSON_ECHO, json.dumps({"ask": {"payload": {"question": "anything?"}}}))
    run_id: str = run["runId"]
    return run_id


async def test_the_reported_omitted_variable_in_resume_data_drops_the_key(gql: GraphQLClient) -> None:
    # given the weather run waiting for {name}
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when resumed with {name: $n} and no variables
    body = await gql.execute(_resume(WEATHER, run["runId"], "$n: String", "{name: $n}"))

    # then the key is dropped: the data {} misses `name`, a typed error, and the run still waits
    assert "errors" not in body, body
    answer = body["data"]["resumeRun"]
    assert answer["__typename"] == "InvalidResumeData", answer
    assert [p["path"] for p in answer["problems"]] == [[]]
    assert "'name' is a required property" in answer["problems"][0]["message"]
    listed = await gql.suspended_run(WEATHER, run["runId"])
    assert listed is not None
    assert listed["toolCalls"][0]["decision"] is None


async def test_a_variable_given_inside_resume_data_is_its_value(gql: GraphQLClient) -> None:
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)

    body = await gql.execute(_resume(WEATHER, run["runId"], "$n: String", "{name: $n}"), n="Paris")

    assert "errors" not in body, body
    answer = body["data"]["resumeRun"]
    assert answer["status"] == "COMPLETED", answer
    assert "The weather in Paris" in answer["output"]


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"n": "x", "o": {"$k": [1, 2**70]}},
            {
                "a": "x",
                "list": ["x", 1, {"$k": [1, 2**70]}],
                "deep": {"in": [{"n": "x", "keep": True}], "o": {"$k": [1, 2**70]}},
            },
        ),
        ({}, {"list": [None, 1, None], "deep": {"in": [{"keep": True}]}}),
        ({"n": None}, {"a": None, "list": [None, 1, None], "deep": {"in": [{"n": None, "keep": True}]}}),
    ],
    ids=["given", "omitted", "null"],
)
async def test_variables_anywhere_in_a_json_literal(
    gql: GraphQLClient, variables: dict[str, Any], expected: dict[str, Any]
) -> None:
    # given a run waiting for any JSON
    run_id = await _asking_run(gql)

    # when resumed with a literal holding variables in an object, a list and nested
    literal = "{a: $n, list: [$n, 1, $o], deep: {in: [{n: $n, keep: true}], o: $o}}"
    body = await gql.execute(_resume(JSON_ECHO, run_id, "$n: String, $o: JSON", literal), **variables)

    # then the tool got exactly the value graphql-js's valueFromASTUntyped gives
    assert "errors" not in body, body
    answer = body["data"]["resumeRun"]
    assert answer["status"] == "COMPLETED", answer
    assert answer["output"] == {"answered": expected}


async def test_an_enum_variable_inside_a_json_literal_is_its_name(gql: GraphQLClient) -> None:
    run_id = await _asking_run(gql)

    body = await gql.execute(_resume(JSON_ECHO, run_id, "$s: RunStatus", "{status: [$s]}"), s="FAILED")

    assert "errors" not in body, body
    assert body["data"]["resumeRun"]["output"] == {"answered": {"status": ["FAILED"]}}


@pytest.mark.parametrize("literal", ["{x: 1e400}", "[-1e999]", "{x: " + "9" * 5000 + "}"])
async def test_a_number_json_cannot_hold_is_a_request_error(gql: GraphQLClient, literal: str) -> None:
    run_id = await _asking_run(gql)

    body = await gql.execute(_resume(JSON_ECHO, run_id, "$n: String", f"{{a: $n, b: {literal}}}"))

    assert "data" not in body or body["data"] is None
    assert len(body["errors"]) == 1
    assert "Unexpected error" not in body["errors"][0]["message"]
    assert "JSON" in body["errors"][0]["message"], body["errors"]
    assert (await gql.suspended_run(JSON_ECHO, run_id)) is not None
