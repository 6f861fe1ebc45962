"""Integers with thousands of digits, as a literal or a variable, and other long literals in the
wrong place, over HTTP.

Python refuses to convert a decimal string longer than ``sys.get_int_max_str_digits()`` (4,300
digits by default) to an ``int``. A client's over-long integer is refused like any other bad
value: an ``Int`` literal gets graphql-core's out-of-range message with the value cut short, no
Python internals, and ``GRAPHQL_VALIDATION_FAILED``; a variable is refused as JSON the server
does not parse (400) without echoing it. Any literal of another type (a string, an enum value, a
float, a list, an object) a validation error echoes is cut short the same way: its beginning,
"..." and its length; so is a long name the schema does not know (a field, an argument, a type, a
variable, a directive, a fragment, an input field).
"""

from __future__ import annotations

import json
import re
import sys

import httpx
import pytest

from server.settings import ApiKeyConfig, Settings

from .._auth import ADMIN

DIGITS = "9" * (sys.get_int_max_str_digits() + 700)
"""An integer Python does not convert from text (5,000 digits with the default limit)."""

OUT_OF_RANGE = "Int cannot represent non 32-bit signed integer value: "
"""graphql-core's message for an ``Int`` literal beyond 32 bits, before the value it echoes."""

INT_LITERALS = {
    "review-queue": "query Q { reviewQueue(first: <n>) { totalCount } }",
    "suspended-runs": 'query Q { suspendedRuns(agentId: "refund-agent", first: <n>) { totalCount } }',
    "page-input": 'query Q { suspendedRuns(agentId: "refund-agent", page: {page: 0, perPage: <n>}) { totalCount } }',
    "negative": "query Q { reviewQueue(first: -<n>) { totalCount } }",
}


@pytest.fixture
def settings() -> Settings:
    """The memory store: these requests are refused before anything reads a store."""
    return Settings(agents="runtime.demo:AGENTS", api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())])


def _leaks_nothing(message: str) -> None:
    assert "int_max_str_digits" not in message, message[:300]
    assert "integer string conversion" not in message, message[:300]
    assert len(message) < 200, message[:300]


@pytest.mark.parametrize("template", INT_LITERALS.values(), ids=INT_LITERALS.keys())
async def test_an_int_literal_of_thousands_of_digits_is_out_of_range(http: httpx.AsyncClient, template: str) -> None:
    # when an Int argument is written with thousands of digits
    response = await http.post("/graphql", json={"query": template.replace("<n>", DIGITS)})

    # then it is refused as any out-of-range Int: graphql-core's message, the value cut short
    errors = response.json()["errors"]
    assert [error["extensions"]["code"] for error in errors] == ["GRAPHQL_VALIDATION_FAILED"], errors
    message = errors[0]["message"]
    assert message.startswith(OUT_OF_RANGE), message[:300]
    assert message[len(OUT_OF_RANGE) :].lstrip("-").startswith("9999999999"), message[:300]
    _leaks_nothing(message)
    assert errors[0]["locations"], errors


async def test_a_long_integer_literal_of_another_scalar_leaks_nothing(http: httpx.AsyncClient) -> None:
    # when a DateTime argument is written as an integer of thousands of digits
    query = "query Q { reviewQueue(filter: {expiresBefore: <n>}) { totalCount } }".replace("<n>", DIGITS)
    response = await http.post("/graphql", json={"query": query})

    # then it is refused, naming the type, without Python's advice or every digit
    errors = response.json()["errors"]
    assert [error["extensions"]["code"] for error in errors] == ["GRAPHQL_VALIDATION_FAILED"], errors
    assert "DateTime" in errors[0]["message"], errors[0]["message"][:300]
    _leaks_nothing(errors[0]["message"])


async def test_a_short_out_of_range_int_literal_keeps_the_whole_message(http: httpx.AsyncClient) -> None:
    # a 32-bit overflow of a few digits keeps graphql-core's whole message (nothing to cut)
    response = await http.post("/graphql", json={"query": INT_LITERALS["review-queue"].replace("<n>", "99999999999")})

    errors = response.json()["errors"]
    assert [error["message"] for error in errors] == [OUT_OF_RANGE + "99999999999"], errors


@pytest.mark.parametrize("method", ["POST", "GET"])
async def test_an_int_variable_of_thousands_of_digits_is_refused_unechoed(http: httpx.AsyncClient, method: str) -> None:
    # when the variable of an Int argument has thousands of digits (the JSON parser meets them first)
    query = "query Q($n: Int) { reviewQueue(first: $n) { totalCount } }"
    variables = json.dumps({"n": 0}).replace("0", DIGITS)
    if method == "POST":
        body = json.dumps({"query": query, "variables": None}).replace("null", variables)
        response = await http.post("/graphql", content=body, headers={"content-type": "application/json"})
    else:
        response = await http.get("/graphql", params={"query": query, "variables": variables})

    # then the request is refused as JSON the server does not parse: 400, no digits, no Python advice
    assert response.status_code == 400, response.text[:300]
    errors = response.json()["errors"]
    assert [error["extensions"]["code"] for error in errors] == ["BAD_REQUEST"], errors
    assert "digits" in errors[0]["message"], errors
    assert "9999999999" not in errors[0]["message"], errors
    _leaks_nothing(errors[0]["message"])


LONG = "x" * 100_000
"""A literal's text of 100,000 characters."""

WRONG_LITERALS = {
    "string-for-int": ('query Q { suspendedRuns(agentId: "refund-agent", first: "<x>") { totalCount } }', "Int "),
    "block-string-for-int": ('query Q { reviewQueue(first: """<x>""") { totalCount } }', "Int "),
    "float-for-int": ("query Q { reviewQueue(first: 1.<0>) { totalCount } }", "Int "),
    "list-for-int": ('query Q { reviewQueue(first: ["<x>"]) { totalCount } }', "Int "),
    "object-for-int": ('query Q { reviewQueue(first: {a: "<x>"}) { totalCount } }', "Int "),
    "unknown-enum-value": ("query Q { webhookDeliveries(status: <x>) { pageInfo { hasNextPage } } }", "Value "),
    "string-for-enum": ('query Q { webhookDeliveries(status: "<x>") { pageInfo { hasNextPage } } }', "Enum "),
    "string-for-boolean": ('query Q { reviewQueue(filter: {escalated: "<x>"}) { totalCount } }', "Boolean "),
    "string-for-directive-if": ('query Q { agents @include(if: "<x>") { id } }', "Boolean "),
    "enum-for-id": ("query Q { suspendedRuns(agentId: <x>) { totalCount } }", "ID "),
    "string-for-datetime": ('query Q { reviewQueue(filter: {expiresBefore: "<x>"}) { totalCount } }', "Expected "),
}
"""A literal of 100,000 characters where its type does not go, and how graphql-core's message begins."""


@pytest.mark.parametrize(("template", "begins"), WRONG_LITERALS.values(), ids=WRONG_LITERALS.keys())
async def test_a_long_literal_in_the_wrong_place_is_cut_short(
    http: httpx.AsyncClient, template: str, begins: str
) -> None:
    # when a literal of 100,000 characters is written where its type does not go
    query = template.replace("<x>", LONG).replace("<0>", "0" * len(LONG))
    response = await http.post("/graphql", json={"query": query})

    # then it is refused by validation, with graphql-core's message, the literal cut short: the
    # whole response is under 2 KB
    assert len(response.content) < 2048, response.text[:300]
    errors = response.json()["errors"]
    assert [error["extensions"]["code"] for error in errors] == ["GRAPHQL_VALIDATION_FAILED"], errors
    message = errors[0]["message"]
    assert message.startswith(begins), message
    assert re.search(r"\.\.\. \(1000\d\d characters\)", message), message
    if "first: [" not in template and "first: {" not in template:  # graphql-core locates neither (copies)
        assert errors[0]["locations"], errors


UNKNOWN_NAMES = {
    "field": ("query Q { <x> }", "Cannot query field "),
    "argument": ("query Q { agents(<x>: 1) { id } }", "Unknown argument "),
    "variable-type": ("query Q($n: <x>) { agents @include(if: $n) { id } }", "Unknown type "),
    "unused-variable": ("query Q($<x>: Int) { agents { id } }", "Variable "),
    "undefined-variable": ("query Q { reviewQueue(first: $<x>) { totalCount } }", "Variable "),
    "directive": ("query Q { agents @<x> { id } }", "Unknown directive "),
    "fragment": ("query Q { agents { ...<x> } }", "Unknown fragment "),
    "input-field": ("query Q { reviewQueue(filter: {<x>: true}) { totalCount } }", "Expected value of type "),
    "unknown-field-beside-a-long-string": (
        'query Q { reviewQueue(filter: {bogus: true, threadId: "<x>"}) { totalCount } }',
        "Expected value of type ",
    ),
}
"""A name of 100,000 characters the schema does not know (or a long literal beside one), and how
graphql-core's message begins."""


@pytest.mark.parametrize(("template", "begins"), UNKNOWN_NAMES.values(), ids=UNKNOWN_NAMES.keys())
async def test_a_long_unknown_name_is_cut_short(http: httpx.AsyncClient, template: str, begins: str) -> None:
    # when a document names, with 100,000 characters, what the schema does not have
    response = await http.post("/graphql", json={"query": template.replace("<x>", LONG)})

    # then it is refused by validation, with graphql-core's message, the name cut short: the whole
    # response is under 2 KB
    assert len(response.content) < 2048, response.text[:300]
    errors = response.json()["errors"]
    assert {error["extensions"]["code"] for error in errors} == {"GRAPHQL_VALIDATION_FAILED"}, errors
    assert errors[0]["message"].startswith(begins), errors
    assert all(re.search(r"\.\.\. \(1\d\d\d\d\d characters\)", error["message"]) for error in errors), errors
