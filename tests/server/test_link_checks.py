"""The checks a signed link goes through, alike on ``GET /links/{token}`` and ``POST /links``
(docs/api.md "Deciding from an email"), over HTTP: the link, its recipient, the question decided
already, the run gone, then the gate (a grant lacking before an approval given already); and
what the page of an expired link tells its reader to do.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from runtime.notifying.links import LinkSigner

from .._auth import ALL, TestKey
from .._graphql import REFUND
from .conftest import Apps, Serve
from .test_links import ALICE, BOB, SECRET, Page, _calls

FRANK = TestKey("frank", "rg_test_frank_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
CAROL = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
RULES = [{"tool": "issue_refund", "scope": "refunds:approve", "approvals": 2}]


@pytest.fixture
async def page(serve: Serve) -> AsyncIterator[Page]:
    served = await serve(
        keys=[ALICE, BOB], link_secret=SECRET, tool_rules=[{"tool": "issue_refund", "scope": "refunds:approve"}]
    )
    opened = Page(served)
    yield opened
    await opened.http.aclose()


async def test_a_lost_grant_is_answered_before_a_prior_approval_alike_on_get_and_post(
    request: pytest.FixtureRequest,
) -> None:
    # given frank's approval, 1 of the 2 a refund needs, on a SQLite store
    before = Apps(request, "sqlite")
    try:
        page = Page(await before.start(keys=[FRANK, CAROL], link_secret=SECRET, tool_rules=RULES))
        run_id, call = await page.waiting()
        token = page.token(run_id, call, recipient="key:frank")
        assert (await page.click(token)).status_code == 200
        await page.http.aclose()
    finally:
        await before.close()
    # when the server restarts with refunds:approve removed from frank's key
    after = Apps(request, "sqlite")
    try:
        lost = TestKey(FRANK.name, FRANK.key, ALL)
        page = Page(await after.start(keys=[lost, CAROL], link_secret=SECRET, tool_rules=RULES))
        shown = await page.http.get(f"/links/{token}")
        clicked = await page.click(token)
        calls = await _calls(page.gql, run_id)
        await page.http.aclose()
    finally:
        await after.close()
    # then both say first that he lacks the scope (403 on POST), as the docs order the answers
    refusal = "approving &#x27;issue_refund&#x27; needs the scope &#x27;refunds:approve&#x27;"
    assert shown.status_code == 200, shown.text
    assert f"You may not approve it: {refusal}" in shown.text
    assert "<button" not in shown.text
    assert clicked.status_code == 403, clicked.text
    assert refusal in clicked.text
    assert "Already approved" not in clicked.text
    assert calls is not None
    assert [a["decidedBy"] for a in calls[0]["approvals"]] == ["key:frank"]


async def test_a_question_no_longer_asked_is_answered_alike_on_get_and_post(page: Page) -> None:
    run_id, call = await page.waiting()
    stale = page.token(run_id, {**call, "questionId": "an-earlier-question"})

    shown = await page.http.get(f"/links/{stale}")
    clicked = await page.click(stale)

    for answer in (shown, clicked):
        assert answer.status_code == 409, answer.text
        assert "no longer asks this question" in answer.text
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_the_page_of_an_expired_link_says_who_sends_links_and_what_to_do(page: Page) -> None:
    run_id, call = await page.waiting()
    two_hours_ago = LinkSigner(SECRET, ttl=3600, clock=lambda: time.time() - 7200)
    expired = page.token(run_id, call, signer=two_hours_ago)

    shown = await page.http.get(f"/links/{expired}")
    clicked = await page.click(expired)

    for answer in (shown, clicked):
        assert answer.status_code == 410, answer.text
        assert "Ask for a new one" not in answer.text
        assert "sent by email" in answer.text
        assert "reminder" in answer.text
        assert f'href="http://127.0.0.1:4000/inbox?agentId={REFUND}&amp;runId={run_id}"' in answer.text
