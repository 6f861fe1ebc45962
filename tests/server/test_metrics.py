"""``GET /metrics`` of a real server process, scraped with prometheus_client's parser.

A run started and approved shows in the request counter (by operation name and type), the
latency histogram, the decisions counter (``approve``/``recorded``) and the suspended-runs
gauge of its agent (0 -> 1 -> 0). Label values stay bounded and none is a client's choice:
anonymous and unknown operations get fixed labels, and a name neither runsgate's own clients nor
the operator use is counted as ``other`` (issue 42, 4a).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from graphql import OperationDefinitionNode, parse
from pydantic import ValidationError
from starlette.routing import Route

from resolvers import metrics as graphql_metrics
from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

from .._graphql import APPROVE, REFUND, REFUND_PROMPT, START_RUN, TWO_REFUNDS_PROMPT, WEATHER, data, post
from .._servers import ROOT, runsgate_process
from ._process import Sample, sample, scrape

REQUESTS = "runsgate_graphql_requests_total"
ERRORS = "runsgate_graphql_errors_total"
LATENCY_COUNT = "runsgate_graphql_request_duration_seconds_count"
DECISIONS = "runsgate_decisions_total"
SUSPENDED = "runsgate_suspended_runs"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One runsgate process (memory store, demo agents) for the module's tests."""
    log = tmp_path_factory.mktemp("metrics") / "runsgate.log"
    with runsgate_process(log) as url:
        yield url


def _delta(before: dict[Sample, float], after: dict[Sample, float], key: Sample) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.mark.process
def test_metrics_show_a_run_started_and_approved(server: str) -> None:
    # given a server with no refund run yet
    before = scrape(server)
    assert before[sample(SUSPENDED, agent_id=REFUND)] == 0
    assert before[sample("runsgate_store_up")] == 1

    # when a refund run is started (operation StartRun)
    started = data(server, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})["startRun"]
    assert started["status"] == "SUSPENDED"
    middle = scrape(server)

    # then the gauge of its agent is 1, and only its agent's
    assert middle[sample(SUSPENDED, agent_id=REFUND)] == 1
    assert middle[sample(SUSPENDED, agent_id=WEATHER)] == 0

    # when its call is approved (operation Approve)
    call = started["run"]["toolCalls"][0]
    approved = data(
        server, None, APPROVE, input={"agentId": REFUND, "runId": started["runId"], "toolCallId": call["toolCallId"]}
    )
    assert approved["approveToolCall"]["status"] == "COMPLETED"
    after = scrape(server)

    # then one StartRun and one Approve mutation were counted and timed, one approval recorded,
    # and the gauge is back to 0
    assert _delta(before, after, sample(REQUESTS, operation_name="StartRun", operation_type="mutation")) == 1
    assert _delta(before, after, sample(REQUESTS, operation_name="Approve", operation_type="mutation")) == 1
    assert _delta(before, after, sample(LATENCY_COUNT, operation_name="StartRun", operation_type="mutation")) == 1
    assert _delta(before, after, sample(LATENCY_COUNT, operation_name="Approve", operation_type="mutation")) == 1
    assert _delta(before, after, sample(ERRORS, operation_name="Approve", operation_type="mutation")) == 0
    assert _delta(before, after, sample(DECISIONS, kind="approve", outcome="recorded")) == 1
    assert _delta(before, after, sample(DECISIONS, kind="decline", outcome="recorded")) == 0
    assert after[sample(SUSPENDED, agent_id=REFUND)] == 0


@pytest.mark.process
def test_decision_outcomes_are_counted_by_kind(server: str) -> None:
    # given a run with two calls waiting for approval, one of them approved
    started = data(server, None, START_RUN, input={"agentId": REFUND, "prompt": TWO_REFUNDS_PROMPT})["startRun"]
    first, second = (call["toolCallId"] for call in started["run"]["toolCalls"])
    run = {"agentId": REFUND, "runId": started["runId"]}
    before = scrape(server)
    assert data(server, None, APPROVE, input={**run, "toolCallId": first})["approveToolCall"]["status"] == "SUSPENDED"

    # when the same call is approved again, and an unknown run is approved
    again = data(server, None, APPROVE, input={**run, "toolCallId": first})["approveToolCall"]
    unknown = data(server, None, APPROVE, input={**run, "runId": "no-such-run", "toolCallId": first})["approveToolCall"]
    assert again["__typename"] == "ToolCallAlreadyDecided"
    assert unknown["__typename"] == "RunNotFound"
    after = scrape(server)

    # then the decisions counter has one recorded, one conflict and one run_not_found approval
    assert _delta(before, after, sample(DECISIONS, kind="approve", outcome="recorded")) == 1
    assert _delta(before, after, sample(DECISIONS, kind="approve", outcome="conflict")) == 1
    assert _delta(before, after, sample(DECISIONS, kind="approve", outcome="run_not_found")) == 1
    # and the run, still waiting on its second call, is counted in the gauge
    assert after[sample(SUSPENDED, agent_id=REFUND)] >= 1
    assert data(server, None, APPROVE, input={**run, "toolCallId": second})["approveToolCall"]["status"] == "COMPLETED"


@pytest.mark.process
def test_anonymous_and_unknown_operations_get_fixed_labels(server: str) -> None:
    before = scrape(server)

    # when an anonymous query runs, a client names an operation the document lacks,
    # and a document does not parse
    assert post(server, None, "{ agents { id } }").status_code == 200
    named_wrong = post(server, None, "query Real { agents { id } }", operation_name="Invented123")
    broken = post(server, None, "{ agents { id }")
    assert named_wrong.status_code == 200, named_wrong.text  # a request error, JSON for application/json
    assert named_wrong.json() == {
        "errors": [
            {
                "message": "Unknown operation named 'Invented123'.",
                "extensions": {"code": "OPERATION_RESOLUTION_FAILURE"},
            }
        ]
    }
    assert broken.json()["errors"]
    after = scrape(server)

    # then they are counted as anonymous / unknown, never under the client's string
    assert _delta(before, after, sample(REQUESTS, operation_name="anonymous", operation_type="query")) == 1
    assert _delta(before, after, sample(REQUESTS, operation_name="unknown", operation_type="unknown")) == 2
    assert _delta(before, after, sample(ERRORS, operation_name="unknown", operation_type="unknown")) == 2
    assert not [key for key in after if ("operation_name", "Invented123") in key[1]]


def _operation(document: str) -> OperationDefinitionNode:
    definition = parse(document).definitions[0]
    assert isinstance(definition, OperationDefinitionNode)
    return definition


def test_only_known_and_configured_operation_names_are_labels() -> None:
    labels = graphql_metrics.operation_labels
    try:
        # given the operator's names, Op1 and Op2
        graphql_metrics.set_operation_names(["Op1", "Op2"])
        # then a name of runsgate's own clients or of the operator is a label, any other is `other`
        names = [labels(_operation(f"query Op{i} {{ agents {{ id }} }}"))[0] for i in range(4)]
        assert names == ["other", "Op1", "Op2", "other"]
        assert labels(_operation("mutation Op1 { __typename }")) == ("Op1", "mutation")
        assert labels(_operation("query InboxAgents { agents { id } }")) == ("InboxAgents", "query")
        assert labels(_operation(f"query {'Q' * 500} {{ agents {{ id }} }}")) == ("other", "query")
        assert labels(_operation("{ agents { id } }")) == ("anonymous", "query")
        with pytest.raises(ValueError, match="at most 200"):
            graphql_metrics.set_operation_names(f"N{i}" for i in range(201))
    finally:
        graphql_metrics.set_operation_names(())


KNOWN_NAME_SOURCES = [
    ROOT / "README.md",
    ROOT / "docs" / "api.md",
    *sorted((ROOT / "examples").iterdir()),
    *sorted((ROOT / "scripts" / "inbox" / "src").glob("*.js*")),
]
"""Where runsgate's own clients write their operations: the README, the API guide, the examples
and the inbox."""


def test_every_operation_of_runsgates_own_clients_is_a_known_name() -> None:
    named = set()
    for source in KNOWN_NAME_SOURCES:
        text = source.read_text()
        if source.suffix == ".md":  # the code blocks of a page, not its prose
            text = "\n".join(re.findall(r"^```.*?^```", text, re.MULTILINE | re.DOTALL))
        named |= set(re.findall(r"\b(?:query|mutation|subscription)\s+([_A-Za-z]\w*)\s*[({]", text))
    assert named, KNOWN_NAME_SOURCES
    assert named <= graphql_metrics.KNOWN_OPERATION_NAMES, named - graphql_metrics.KNOWN_OPERATION_NAMES


def test_the_operator_names_more_operations_comma_separated_or_as_a_json_list() -> None:
    assert Settings(metrics_operation_names="A, B2").metrics_operation_names == ["A", "B2"]  # type: ignore[arg-type]
    assert Settings(metrics_operation_names='["A"]').metrics_operation_names == ["A"]  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Settings(metrics_operation_names="not a name")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Settings(metrics_operation_names=",".join(f"N{i}" for i in range(201)))  # type: ignore[arg-type]


def test_metrics_can_be_turned_off() -> None:
    # given RUNSGATE_METRICS=false, then the app has no /metrics route; by default it has one
    off = create_app(Settings(agents=DEMO_AGENTS, metrics=False, auth=False))
    on = create_app(Settings(agents=DEMO_AGENTS, auth=False))
    assert "/metrics" not in [route.path for route in off.routes if isinstance(route, Route)]
    assert "/metrics" in [route.path for route in on.routes if isinstance(route, Route)]


@pytest.mark.process
def test_a_client_cannot_take_the_operation_names_of_others_nor_show_its_own(server: str) -> None:
    # given a client that sends more operation names of its own than a process keeps (any
    # principal may: `__typename` needs no scope)
    tag = uuid.uuid4().hex[:8]
    for number in range(graphql_metrics.MAX_OPERATION_NAMES + 5):
        assert post(server, None, f"query Junk{tag}N{number} {{ __typename }}").status_code == 200
    before = scrape(server)

    # when the inbox lists the agents, with its own operation
    assert data(server, None, "query InboxAgents { agents { id name description } }")["agents"]
    after = scrape(server)

    # then it is counted under its name, and none of the client's names is shown: each is `other`
    assert _delta(before, after, sample(REQUESTS, operation_name="InboxAgents", operation_type="query")) == 1
    shown = {dict(labels).get("operation_name", "") for _, labels in after}
    assert not [name for name in shown if name.startswith("Junk")], sorted(shown)
    junk = graphql_metrics.MAX_OPERATION_NAMES + 5
    assert after[sample(REQUESTS, operation_name="other", operation_type="query")] >= junk
