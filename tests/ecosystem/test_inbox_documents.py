"""The inbox's GraphQL documents validate against runsgate's schema.

The page (``scripts/inbox/src/documents.js``) asks for the reviewer-workflow fields
(``editedArgs``, ``expiresAt``, ``approvalsRequired``/``approvals``, ``expiresBefore``,
``decideToolCalls``), the run's ``conversation``, and a decision's ``waitFor`` with the
``runUpdates`` subscription only when its one introspection query finds them, so it also works
against a server without them. ``inbox-documents.mjs`` runs that query with graphql-js against
``schema.graphql`` and validates every document the page would then send. The browser test
(``test_inbox_browser.py``) sends them to a real server.
"""

from __future__ import annotations

import pytest

from .._servers import ROOT
from ._node import run_node_json

pytestmark = pytest.mark.usefixtures("node_tools")


def test_every_inbox_document_validates_against_the_schema_with_every_reviewer_workflow_field() -> None:
    # when the page's feature check and documents are run against runsgate's schema
    seen = run_node_json("inbox-documents.mjs", str(ROOT / "schema.graphql"))

    # then the page detects each of the reviewer-workflow features (edited arguments, deadlines,
    # approvals, bulk) and the conversation, and every document it would send is valid
    assert all(seen["current"]["features"].values()), seen["current"]["features"]
    assert seen["current"]["errors"] == {}
    assert "decideMany" in seen["current"]["documents"]
    # and so are the progress documents (a decision's runUpdates, the run read again)
    assert {"RUN_UPDATES", "RUN_NOW"} <= set(seen["current"]["documents"])
    # and so are the review queue's (its listing, a review claim taken and released)
    assert {"reviewQueue", "CLAIM_REVIEW", "RELEASE_REVIEW"} <= set(seen["current"]["documents"])
    # and so are its live updates (the queue's stream, the end of a run whose progress stopped)
    assert {"REVIEW_QUEUE_EVENTS", "RUN_OUTCOME_EVENTS"} <= set(seen["current"]["documents"])


def test_every_inbox_document_costs_less_than_the_default_limit_even_at_its_largest_page() -> None:
    # given every document the page sends (``texts``), with its page size at the page's default
    # (10 runs) and its largest (100, `?pageSize=100`), and bulk decisions on as many runs
    from graphql import parse

    from resolvers.documents.cost import CostLimits, document_cost, schema_of
    from resolvers.schema import schema
    from server.settings import Settings

    texts = run_node_json("inbox-documents.mjs", str(ROOT / "schema.graphql"))["current"]["texts"]
    graphql = schema_of(schema)
    demo = CostLimits(max_page_size=100, agents=3)
    limit = Settings.model_fields["max_query_cost"].default

    def cost(text: str, page: int) -> int:
        variables = {"first": page, "input": {"decisions": [{}] * page}}
        found = document_cost(graphql, parse(text), None, variables, demo)
        assert found is not None, text
        return found[0]

    # when each is costed (docs/api.md "Query cost")
    costs = {name: (cost(text, 10), cost(text, 100)) for name, text in texts.items()}

    # then each passes the default limit, and the listing costs what docs/api.md says
    assert {name: found for name, found in costs.items() if found[1] > limit} == {}
    assert costs["suspendedRuns"] == (753, 7_503)
    assert len(costs) == 15
