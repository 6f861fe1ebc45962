"""The README says what really happens: its ``decideToolCalls`` example answers what the text
after it says, its ``MONGODB_URI`` row agrees with the Deployment example and the settings, and
its two-approver refund is refused a second approval with authentication off and completes with
two keys made as it says."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from graphql import ExecutableDefinitionNode, FieldNode, OperationDefinitionNode, parse, validate

from resolvers import schema
from server.cli.main import main
from server.settings import ConfigError, load_settings

from .._auth import TestKey
from .._graphql import REFUND, GraphQLClient
from .conftest import Serve

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _after(marker: str) -> str:
    """The README from the first line holding ``marker`` on."""
    return README[README.index(marker) :]


@pytest.mark.parametrize("settings", ["memory"], indirect=True)
async def test_the_readmes_decide_tool_calls_example_answers_what_the_readme_says(gql: GraphQLClient) -> None:
    # given the README's bulk example: its run of two refunds, and its mutation
    section = _after("`decideToolCalls` decides many calls at once")
    prompt = re.search(r'\(a run of two refunds: "([^"]+)"\)', section)
    document = re.search(r"```graphql\n(.*?)```", section, re.DOTALL)
    assert prompt, section[:600]
    assert document, section[:600]
    run = await gql.suspend(REFUND, prompt[1])
    calls = [call["toolCallId"] for call in run["toolCalls"]]
    assert len(calls) == 2, run
    questions = {f"QUESTION_{n}": question for n, question in enumerate(await _questions(gql, run["runId"]), 1)}

    # when it is sent with that run's ids
    text = document[1].replace("RUN_ID", run["runId"]).replace("CALL_1", calls[0]).replace("CALL_2", calls[1])
    for placeholder, question in questions.items():
        text = text.replace(placeholder, question)
    results = (await gql.data(text))["decideToolCalls"]["results"]

    # then the answer is what the paragraph after the block says, result by result
    said = section[document.end() : section.index("\n\n", document.end() + 1)]
    statuses = re.findall(r"`status: (\w+)`", said)
    output = re.search(r'`output: "([^`]+)"`', said)
    assert statuses == [r["status"] for r in results], (said, results)
    assert output is not None, said
    assert results[-1]["output"] == output[1]
    assert "in the order of `decisions`" in said


async def _questions(gql: GraphQLClient, run_id: str) -> list[str]:
    """The ``questionId`` of each call of a refund run, in order."""
    query = 'query($runId: ID!) { suspendedRun(agentId: "refund-agent", runId: $runId) { toolCalls { questionId } } }'
    run = (await gql.data(query, runId=run_id))["suspendedRun"]
    return [call["questionId"] for call in run["toolCalls"]]


def test_the_readmes_mongodb_uri_row_agrees_with_the_deployment_example(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    row = next(line for line in README.splitlines() if line.startswith("| `MONGODB_URI` |"))
    example = re.search(r"^(MONGODB_URI=(\S+)) \./dev serve$", README, re.MULTILINE)
    assert example is not None
    monkeypatch.chdir(tmp_path)
    for variable in ("RUNSGATE_STORE", "MONGODB_URI", "RUNSGATE_MONGODB_URI"):
        monkeypatch.delenv(variable, raising=False)

    # the Deployment example sets MONGODB_URI alone, and that names the MongoDB store
    monkeypatch.setenv("MONGODB_URI", example[2])
    assert load_settings().store_url == example[2]
    # the row says so, and says what happens when RUNSGATE_STORE is set too
    assert "alone" in row
    assert "Set with `RUNSGATE_STORE`, both must" not in row
    assert "the same store" in row
    monkeypatch.setenv("RUNSGATE_STORE", example[2])
    assert load_settings().store_url == example[2]
    monkeypatch.setenv("RUNSGATE_STORE", "sqlite:///./runsgate.db")
    with pytest.raises(ConfigError, match="name different stores"):
        load_settings()


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _root_fields_used(script: Path) -> set[str]:
    """The schema's root fields the GraphQL documents of ``script`` select (quoted in ``\"\"\"`` or ``'``)."""
    quoted = r"(?:\"\"\"|')\s*((?:query|mutation|subscription)\b.*?)(?:\"\"\"|')"
    documents = re.findall(quoted, script.read_text(), re.S)
    assert documents, script
    return {
        selection.name.value
        for text in documents
        for operation in parse(text).definitions
        if isinstance(operation, OperationDefinitionNode)
        for selection in operation.selection_set.selections
        if isinstance(selection, FieldNode)
    }


def _root_field_names() -> set[str]:
    graphql = schema._schema  # Strawberry's graphql-core schema
    roots = [graphql.query_type, graphql.mutation_type, graphql.subscription_type]
    return {name for root in roots if root is not None for name in root.fields}


def test_the_readme_says_which_root_fields_the_example_scripts_cover() -> None:
    # given the README's paragraph on the two scripts
    paragraph = _after("Two scripts run")[: _after("Two scripts run").index("```")]
    parts = re.search(r"each calls (.*?); (.*?) are not in them", paragraph, re.S)
    assert parts is not None, paragraph
    roots = _root_field_names()
    said = {name for name in re.findall(r"`(\w+)`", parts[1]) if name in roots}
    not_in = {name for name in re.findall(r"`(\w+)`", parts[2]) if name in roots}

    # then each script selects exactly the root fields it names, and none of those it says are missing
    scripts = [EXAMPLES / "walkthrough_gql.py", EXAMPLES / "walkthrough.sh"]
    for script in scripts:
        assert script.name in README, script
        assert _root_fields_used(script) == said, script
        assert "editedArgs" in script.read_text(), script
    assert not_in, paragraph
    assert not (not_in & said), paragraph


def _paragraph(marker: str) -> str:
    """The README's text from ``marker`` to the end of the paragraph after its first code block."""
    text = _after(marker)
    block = text.index("```", text.index("```") + 3)
    return text[: text.index("\n\n", block)]


APPROVALS_REQUIRED = """
query($runId: ID!) { suspendedRun(agentId: "refund-agent", runId: $runId) { toolCalls { approvalsRequired } } }
"""


def _new_key(name: str, capsys: pytest.CaptureFixture[str]) -> TestKey:
    """A key made by ``runsgate new-key --name NAME`` (its default scopes and resources)."""
    capsys.readouterr()
    assert main(["new-key", "--name", name]) == 0
    printed = re.search(r"^key \(give it to \w+; it is not stored anywhere\): (\S+)$", capsys.readouterr().out, re.M)
    assert printed is not None
    return TestKey(name, printed[1])


@pytest.mark.parametrize("serve", ["memory"], indirect=True)
async def test_the_readmes_two_approver_refund_needs_two_keys(serve: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    # given the README's paragraph: its refund over $500, and the keys it makes
    said = _paragraph("**Two approvers.**")
    refund = re.search(r'"(Please refund order \d+)": \$(\d+)', said)
    assert refund is not None, said
    assert int(refund[2]) > 500
    names = re.findall(r"--name (\w+)", said)
    assert len(names) == 2, said
    assert "`DuplicateApprover`" in said
    assert "`anonymous`" in said

    # with authentication off, everyone is anonymous: the second approval is refused
    app = (await serve(auth=False)).app
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
        anonymous = GraphQLClient(http)
        run = await anonymous.suspend(REFUND, refund[1])
        (call,) = run["toolCalls"]
        needed = (await anonymous.data(APPROVALS_REQUIRED, runId=run["runId"]))["suspendedRun"]["toolCalls"]
        assert needed == [{"approvalsRequired": 2}], needed
        first = await anonymous.approve(REFUND, run["runId"], call["toolCallId"])
        assert first["status"] == "SUSPENDED", first
        second = await anonymous.approve(REFUND, run["runId"], call["toolCallId"])
        assert second["__typename"] == "DuplicateApprover", second

    # with the two keys, it completes once each approved
    keys = [_new_key(name, capsys) for name in names]
    served = await serve(keys=keys)
    first_key, second_key = (served.client(key) for key in keys)
    run = await first_key.suspend(REFUND, refund[1])
    (call,) = run["toolCalls"]
    assert (await first_key.approve(REFUND, run["runId"], call["toolCallId"]))["status"] == "SUSPENDED"
    done = await second_key.approve(REFUND, run["runId"], call["toolCallId"])
    assert done["status"] == "COMPLETED", done


DOCS = [Path(__file__).resolve().parents[2] / "README.md", *sorted((EXAMPLES.parent / "docs").glob("*.md"))]


def _operations(doc: Path) -> list[tuple[int, str]]:
    """The ```graphql blocks of ``doc`` that are operations (not schema excerpts), with their line."""
    text = doc.read_text()
    found = []
    for block in re.finditer(r"```graphql\n(.*?)```", text, re.DOTALL):
        parsed = parse(block[1])
        if all(isinstance(d, ExecutableDefinitionNode) for d in parsed.definitions):
            found.append((text[: block.start()].count("\n") + 1, block[1]))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_graphql_operation_in_the_docs_is_valid_against_the_schema(doc: Path) -> None:
    # given the operations the README and the docs show, to be pasted as they are
    operations = _operations(doc)

    # then each validates against the served schema (placeholder ids are strings)
    invalid = {line: [e.message for e in validate(schema._schema, parse(text))] for line, text in operations}
    assert {line: errors for line, errors in invalid.items() if errors} == {}, doc


def test_the_two_commands_section_says_how_to_pick_the_port_and_its_default() -> None:
    # given the README's first steps, up to its next paragraph of its own
    section = _after("## Two commands")
    first_steps = section[: section.index("**Two approvers.**")]
    # then they say how to serve on another port, and that 4000 is the default, as serve's --help does
    assert "./dev serve --port " in first_steps
    assert re.search(r"4000[^.]*default|default[^.]*4000", first_steps), first_steps
    assert "--port" in (Path(__file__).resolve().parents[2] / "dev").read_text()
