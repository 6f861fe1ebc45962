"""Prepared mutations answer what the standard path answers (issues 43 and 44).

The mutation half of ``test_compiled_differential.py``: every mutation document of the test
suite, the benchmark and the examples (found as that module finds the queries) is sent, in each
case its root field has, to a compiled app (``resolvers/fastpath``, mutations served as prepared
operations) and to a standard app (``RUNSGATE_COMPILED_EXECUTION=false``), through HTTP, with
authentication on. The first send of a document to the compiled app goes through Strawberry's
pipeline and prepares it; every later one must be executed as a prepared operation (checked by
the schema's ``prepared_operations.executed``). All answers must equal the standard app's.

A mutation changes what it decides, so the apps do not share a store (each has its own memory
store) and never decide the same run: before each send, the case builds the state it needs
(suspended runs, a decided call, a first request with an idempotency key) on the app it is
sent to, by the same requests. Run ids, call ids, question ids, event ids, global ids and keys
are random, and times are the clock's, so the answers are compared with each such token replaced
by a mark numbered in order of first appearance in its answer (``normalized``): the same id
twice stays the same mark, and every other byte (status, content type, key order, messages,
codes, paths, locations, nulls) is compared as sent.

Cases: a decision recorded (approve, decline, resume, decide many, start), and the refusals an
unknown run or agent, an already decided call, a question no longer pending, input that fails
the tool's checks or the schema's (a request error), a key without ``runs:decide`` (FORBIDDEN),
and an idempotency key's replay get.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from graphql import FieldNode, GraphQLSyntaxError, OperationDefinitionNode, OperationType, parse, validate
from starlette.applications import Starlette

from server.app import create_app
from server.settings import DEMO_AGENTS, ApiKeyConfig, Settings

from .._auth import ADMIN, TestKey
from .._graphql import (
    APPROVE,
    REFUND,
    REFUND_PROMPT,
    START_RUN,
    TWO_REFUNDS_PROMPT,
    WEATHER,
    WEATHER_PROMPT,
    graphql_schema,
)
from .test_compiled_differential import GRAPHQL_SCHEMA, _string_constants, _with_fragments

READER = TestKey("test-reader", "rg_test_reader_0123456789abcdefghijklmnopqrstuvwxyz", scopes=("runs:read",))
"""A key that may read every run and decide none (``FORBIDDEN``)."""

CALLS = "query Calls($a: ID!, $r: ID!) { suspendedRun(agentId: $a, runId: $r) { toolCalls { toolCallId questionId } } }"


# -- the suite's mutation documents ---------------------------------------------------------------


def _suite_mutations() -> list[tuple[str, str | None, str]]:
    """``(document, operation name, root field)`` of every valid mutation operation of the suite
    whose selection is one root field (completed with the fragments it spreads)."""
    parsed = []
    for text in _string_constants():
        if "mutation" not in text:
            continue
        try:
            parsed.append(parse(text))
        except GraphQLSyntaxError:
            continue
    fragments = {d.name.value: d for doc in parsed for d in doc.definitions if d.kind == "fragment_definition"}
    found: set[tuple[str, str | None, str]] = set()
    for document in parsed:
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        text = _with_fragments(document, fragments)  # type: ignore[arg-type]
        if not operations or text is None or validate(GRAPHQL_SCHEMA, parse(text)):
            continue
        for operation in operations:
            fields = [s for s in operation.selection_set.selections if isinstance(s, FieldNode)]
            if operation.operation is OperationType.MUTATION and len(fields) == 1:
                found.add((text, operation.name.value if operation.name else None, fields[0].name.value))
    return sorted(found, key=lambda item: (item[2], item[0], item[1] or ""))


MUTATIONS = _suite_mutations()


# -- the two apps -----------------------------------------------------------------------------------


@dataclass
class Subject:
    """One app and its client (authenticated as ``ADMIN``)."""

    app: Starlette
    http: httpx.AsyncClient

    async def post(self, document: str, variables: dict[str, Any], key: TestKey = ADMIN) -> httpx.Response:
        return await self.http.post("/graphql", json={"query": document, "variables": variables}, headers=key.headers)

    async def data(self, document: str, **variables: Any) -> dict[str, Any]:
        response = await self.post(document, variables)
        body = response.json()
        assert "errors" not in body, body
        return body["data"]  # type: ignore[no-any-return]

    async def suspend(self, agent_id: str, prompt: str) -> list[tuple[str, str, str]]:
        """A new run that suspends: ``(runId, toolCallId, questionId)`` of each pending call."""
        started = await self.data(START_RUN, input={"agentId": agent_id, "prompt": prompt})
        run_id = started["startRun"]["runId"]
        calls = (await self.data(CALLS, a=agent_id, r=run_id))["suspendedRun"]["toolCalls"]
        return [(run_id, call["toolCallId"], call["questionId"]) for call in calls]

    def executed(self) -> int:
        prepared = getattr(graphql_schema(self.app), "prepared_operations", None)
        return -1 if prepared is None else prepared.executed


@pytest.fixture(scope="module")
async def apps() -> AsyncIterator[tuple[Subject, Subject]]:
    made = []
    for compiled in (True, False):
        settings = Settings(
            agents=DEMO_AGENTS,
            mongodb_uri=None,
            compiled_execution=compiled,
            api_keys=[ApiKeyConfig.model_validate(key.entry()) for key in (ADMIN, READER)],
        )
        made.append(create_app(settings))
    async with made[0].router.lifespan_context(made[0]), made[1].router.lifespan_context(made[1]):
        clients = [httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://localhost") for a in made]
        try:
            yield Subject(made[0], clients[0]), Subject(made[1], clients[1])
        finally:
            for client in clients:
                await client.aclose()


# -- cases ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """What a case sends: the mutation's ``input`` (and the names some documents take apart)."""

    input: dict[str, Any]
    key: TestKey = ADMIN


Case = Callable[[Subject], Awaitable[Sent]]


def _decision(run: tuple[str, str, str], **fields: Any) -> dict[str, Any]:
    return {"agentId": REFUND, "runId": run[0], "toolCallId": run[1], **fields}


async def approve(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    return Sent(_decision(call))


async def approve_unknown_run(s: Subject) -> Sent:
    return Sent(_decision(("no-such-run", "c_none", "")))


async def approve_decided(s: Subject) -> Sent:
    first, _ = await s.suspend(REFUND, TWO_REFUNDS_PROMPT)
    await s.data(APPROVE, input=_decision(first))
    return Sent(_decision(first))


async def approve_stale_question(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    await s.data(APPROVE, input=_decision(call, questionId=call[2]))
    return Sent(_decision(call, questionId=call[2]))


async def approve_bad_arguments(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    return Sent(_decision(call, editedArgs={"order_id": "not a number", "amount": -1}))


async def approve_bad_input(s: Subject) -> Sent:
    return Sent({"agentId": REFUND, "runId": "r"})  # no toolCallId: the variable does not coerce


async def approve_forbidden(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    return Sent(_decision(call), key=READER)


async def approve_replayed(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    key = f"key-{uuid.uuid4().hex}"
    await s.data(APPROVE, input=_decision(call, idempotencyKey=key))
    return Sent(_decision(call, idempotencyKey=key))


async def decline(s: Subject) -> Sent:
    first, _ = await s.suspend(REFUND, TWO_REFUNDS_PROMPT)
    return Sent(_decision(first, reason="not eligible"))


async def resume(s: Subject) -> Sent:
    [call] = await s.suspend(WEATHER, WEATHER_PROMPT)
    return Sent({"agentId": WEATHER, "runId": call[0], "toolCallId": call[1], "resumeData": {"name": "Paris"}})


async def resume_invalid(s: Subject) -> Sent:
    [call] = await s.suspend(WEATHER, WEATHER_PROMPT)
    return Sent({"agentId": WEATHER, "runId": call[0], "resumeData": {"city": 5}})


async def resume_unknown_run(s: Subject) -> Sent:
    return Sent({"agentId": WEATHER, "runId": "no-such-run", "resumeData": {"name": "Paris"}})


async def decide_many(s: Subject) -> Sent:
    first, second = await s.suspend(REFUND, TWO_REFUNDS_PROMPT)
    decisions = [
        {"runId": first[0], "toolCallId": first[1], "kind": "APPROVED"},
        {"runId": "no-such-run", "toolCallId": "c_none", "kind": "APPROVED"},
        {"runId": second[0], "toolCallId": second[1], "kind": "DECLINED", "reason": "twice"},
    ]
    return Sent({"agentId": REFUND, "decisions": decisions})


async def decide_many_forbidden(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    return Sent(
        {"agentId": REFUND, "decisions": [{"runId": call[0], "toolCallId": call[1], "kind": "APPROVED"}]}, READER
    )


async def start(s: Subject) -> Sent:
    return Sent({"agentId": REFUND, "prompt": REFUND_PROMPT})


async def start_unknown_agent(s: Subject) -> Sent:
    return Sent({"agentId": "no-such-agent", "prompt": REFUND_PROMPT})


async def start_too_long(s: Subject) -> Sent:
    return Sent({"agentId": REFUND, "prompt": "x" * (32 * 1024 + 1)})


async def start_replayed(s: Subject) -> Sent:
    key = f"key-{uuid.uuid4().hex}"
    await s.data(START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT, "idempotencyKey": key})
    return Sent({"agentId": REFUND, "prompt": REFUND_PROMPT, "idempotencyKey": key})


async def claim(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    return Sent({"agentId": REFUND, "runId": call[0], "toolCallId": call[1], "questionId": call[2]})


async def claim_forbidden(s: Subject) -> Sent:
    return Sent((await claim(s)).input, READER)


async def claim_unknown_run(s: Subject) -> Sent:
    return Sent({"agentId": REFUND, "runId": "no-such-run", "toolCallId": "c_none", "questionId": "q"})


async def retry_suspended(s: Subject) -> Sent:
    [call] = await s.suspend(REFUND, REFUND_PROMPT)
    return Sent({"agentId": REFUND, "runId": call[0]})


async def retry_unknown_run(s: Subject) -> Sent:
    return Sent({"agentId": REFUND, "runId": "no-such-run"})


async def as_written(s: Subject) -> Sent:
    return Sent({})


CASES: dict[str, list[Case]] = {
    "approveToolCall": [
        approve,
        approve_unknown_run,
        approve_decided,
        approve_stale_question,
        approve_bad_arguments,
        approve_bad_input,
        approve_forbidden,
        approve_replayed,
    ],
    "declineToolCall": [decline, approve_unknown_run, approve_decided, approve_forbidden, approve_bad_input],
    "resumeRun": [resume, resume_invalid, resume_unknown_run],
    "decideToolCalls": [decide_many, decide_many_forbidden],
    "startRun": [start, start_unknown_agent, start_too_long, start_replayed],
    "claimReview": [claim, claim_forbidden, claim_unknown_run, approve_unknown_run],
    "releaseReview": [claim, claim_unknown_run],
    "retryRun": [retry_suspended, retry_unknown_run],
    "__typename": [as_written],
}
"""The cases of each root field; a document whose variables a case cannot fill is sent as written."""


def _operation(text: str, operation_name: str | None) -> OperationDefinitionNode:
    return next(
        d
        for d in parse(text).definitions
        if isinstance(d, OperationDefinitionNode) and (d.name.value if d.name else None) == operation_name
    )


def _variables(text: str, operation_name: str | None, sent: Sent) -> dict[str, Any] | None:
    """The document's variables for what a case sends: ``input`` (or ``i``) whole, else its
    fields by name (``key`` for ``idempotencyKey``); None when one has no value."""
    operation = _operation(text, operation_name)
    values = {**sent.input, "input": sent.input, "i": sent.input, "key": sent.input.get("idempotencyKey")}
    variables: dict[str, Any] = {}
    for definition in operation.variable_definitions or ():
        name = definition.variable.name.value
        if values.get(name) is None:
            return None
        variables[name] = values[name]
    return variables


# -- comparing ----------------------------------------------------------------------------------------

_TOKENS = re.compile(
    rb"(?<![0-9a-f])[0-9a-f]{24,32}(?![0-9a-f])"  # run, question, model call ids, a call id's hex, keys
    rb"|\b[0-9]{20}-[0-9a-f]{12}\b"  # event ids
    rb"|\bU3VzcGVuZGVkUnVu[A-Za-z0-9+/=]+"  # global ids: base64 of "SuspendedRun:<id>"
    rb"|\bvm-[0-9]+-[0-9a-f]+\b"  # instance ids
)
_TIMES = re.compile(rb"\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z")
_WAITED = re.compile(rb'"waitedSeconds":-?[0-9][0-9.eE+-]*')


def normalized(response: httpx.Response) -> tuple[int, str | None, bytes]:
    """Status, content type and body, the body's random tokens marked in order of first
    appearance (module docstring) and its times and waits as one mark each."""
    marks: dict[bytes, bytes] = {}

    def mark(match: re.Match[bytes]) -> bytes:
        return marks.setdefault(match.group(0), b"<id%d>" % len(marks))

    body = _TIMES.sub(b"<time>", response.content)
    body = _WAITED.sub(b'"waitedSeconds":"<clock>"', body)
    return response.status_code, response.headers.get("content-type"), _TOKENS.sub(mark, body)


async def test_the_suite_holds_every_kind_of_mutation() -> None:
    roots = {root for _, _, root in MUTATIONS}
    assert len(MUTATIONS) >= 40, len(MUTATIONS)
    assert {"startRun", "approveToolCall", "declineToolCall", "resumeRun", "decideToolCalls"} <= roots


async def _send(
    subject: Subject, text: str, operation_name: str | None, case: Case
) -> tuple[httpx.Response, bool] | None:
    """Build the case's state on ``subject``, then send the document with its variables: the
    response, and whether it was executed as a prepared operation (None, nothing sent, when the
    case cannot fill them)."""
    made = await case(subject)
    variables = _variables(text, operation_name, made)
    if variables is None:
        return None
    body = {"query": text, "operationName": operation_name, "variables": variables}
    executed = subject.executed()
    response = await subject.http.post("/graphql", json=body, headers=made.key.headers)
    return response, subject.executed() == executed + 1


async def test_every_suite_mutation_answers_as_the_standard_path(apps: tuple[Subject, Subject]) -> None:
    compiled, standard = apps
    sent = errors = 0
    codes: set[str] = set()
    for text, operation_name, root in MUTATIONS:
        first = True  # the compiled app's first send prepares the document (Strawberry's pipeline)
        written = not _operation(text, operation_name).variable_definitions  # a document of literals only
        for case in [as_written] if written else CASES[root]:
            compiled_answers = []
            for _ in range(2 if first else 1):
                found = await _send(compiled, text, operation_name, case)
                if found is None:
                    break
                # every send after the first is a prepared operation
                assert found[1] is not first, (root, case.__name__, text)
                first = False
                compiled_answers.append(normalized(found[0]))
            if not compiled_answers:
                continue
            standard_found = await _send(standard, text, operation_name, case)
            assert standard_found is not None
            expected = normalized(standard_found[0])
            for answer in compiled_answers:
                assert answer == expected, (root, case.__name__, text, answer, expected)
            sent += 1
            errors += b'"errors"' in expected[2]
            codes.update(code.decode() for code in re.findall(rb'"code":"([A-Z_]+)"', expected[2]))
    # the cases were really sent, and refused for each reason they stand for
    assert sent > 150, sent
    assert errors > 20, errors
    refusals = {
        "RUN_NOT_FOUND",
        "AGENT_NOT_FOUND",
        "TOOL_CALL_ALREADY_DECIDED",
        "QUESTION_NOT_PENDING",
        "INVALID_TOOL_ARGUMENTS",
        "INVALID_RESUME_DATA",
        "FORBIDDEN",
        "BAD_USER_INPUT",
    }
    assert refusals <= codes, refusals - codes
