"""The inbox's GraphQL documents validate against runsgate's schema, and against it with issue 18.

The page (``scripts/inbox/src/documents.js``) asks for issue 18's fields (``editedArgs``,
``expiresAt``, ``approvalsRequired``/``approvals``, ``expiresBefore``, ``decideToolCalls``) only
when its one introspection query finds them. ``inbox-documents.mjs`` runs that query with
graphql-js against ``schema.graphql`` and against ``schema.graphql`` extended with those fields
under the names issue 18 fixes, and validates every document the page would then send. The
browser test (``test_inbox_browser.py``) sends them to a real server.
"""

from __future__ import annotations

import pytest

from .._servers import ROOT
from ._node import run_node_json

pytestmark = pytest.mark.usefixtures("node_tools")


def test_every_inbox_document_validates_with_and_without_the_reviewer_workflow_fields() -> None:
    # when the page's feature check and documents are run against both schemas
    seen = run_node_json("inbox-documents.mjs", str(ROOT / "schema.graphql"))

    # then the current schema offers none of issue 18's features, and every document is valid
    assert not any(seen["current"]["features"].values()), seen["current"]["features"]
    assert seen["current"]["errors"] == {}
    assert "decideMany" not in seen["current"]["documents"]
    # and with issue 18's fields, the page detects each of them and its documents stay valid
    assert all(seen["issue18"]["features"].values()), seen["issue18"]["features"]
    assert seen["issue18"]["errors"] == {}
    assert "decideMany" in seen["issue18"]["documents"]
