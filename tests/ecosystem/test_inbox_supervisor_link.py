"""More inbox faults a new user found: a supervisor's questions and a link to a later page.

``inbox-supervisor-link.mjs`` signs the page in against a server with API keys and the demo
agents. It records where the focus goes once a supervisor's call (one card, asking its sub-run's
two refunds in turn) shows its second question, the activity lines of a supervisor's decline and
approval (the decision forwarded to the sub-run is the page's own), and what an inbox link to a
run beyond the queue's first page opens.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._auth import ADMIN, api_keys_json
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-supervisor-link") / "runsgate.log"
    variables = {"RUNSGATE_AUTH": "on", "RUNSGATE_API_KEYS": api_keys_json(ADMIN)}
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-supervisor-link.mjs",
            base_url,
            str(OUTPUT),
            ADMIN.key,
            env={"CHROMIUM_BIN": chromium},
            timeout=600,
        )
    (OUTPUT / "inbox-supervisor-link.json").write_text(json.dumps(found, indent=1))
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def _step(seen: dict[str, Any], name: str) -> None:
    """The script's step ``name`` went to its end."""
    assert name not in seen["errors"], seen["errors"][name]


@pytest.mark.parametrize("keys", ["enter", "shortcut"])
def test_the_focus_follows_a_supervisors_call_to_its_next_question(seen: dict[str, Any], keys: str) -> None:
    _step(seen, f"focus-{keys}")
    focus = seen["focus"][keys]
    assert focus["before"]["focused"], focus
    assert focus["after"]["focused"], focus
    assert (focus["after"]["tag"], focus["after"]["text"]) == ("BUTTON", "Approve"), focus


# the queue's stream tells nothing of a sub-run's question (the queue lists none); each agent's
# events, on ?view=agents, tell the sub-run's decision
@pytest.mark.parametrize("view", ["queue", "agents"])
def test_a_supervisors_decision_is_logged_once(seen: dict[str, Any], view: str) -> None:
    _step(seen, f"decided-{view}")
    decided, runs = seen["decided"][view], seen["runs"][f"decided-{view}"]
    for kind, verb in (("declined", "Decline"), ("approved", "Approval")):
        lines = decided[kind]
        assert any(line.startswith(f"{verb} of issue_refund on run {runs[kind]}: recorded") for line in lines), lines
        # the decision forwarded to the sub-run is this page's own: no "Decision on run ... by"
        assert [line for line in lines if line.startswith("Decision on run")] == [], lines
    assert any('reason: "no thanks"' in line for line in decided["declined"]), decided


def test_a_link_to_a_run_beyond_the_first_page_shows_it_first(seen: dict[str, Any]) -> None:
    _step(seen, "link")
    link, newest = seen["link"], seen["runs"]["link"][12]
    assert link["shown"], link
    assert link["inView"], link
    assert link["focused"], link
    assert (link["tag"], link["text"]) == ("BUTTON", "Approve"), link
    assert link["cards"][0] == newest, link
    assert not [note for note in link["notes"] if "which the link names" in note], link
