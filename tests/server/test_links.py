"""Deciding from a signed link, over HTTP (issue 45 part 5; SECURITY.md "Signed links").

``GET /links/{token}`` shows the question and a button and never decides; ``POST /links`` (the
form's only field is the token) decides as the token's recipient, with that principal's grants,
through the same gate: scopes, two-person approval, question identity. A second click says who
decided and when; an expired or altered token says so and changes nothing. On the memory store, a
SQLite file and MongoDB.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from runtime.notifying.links import SALT, LinkSigner

from .._auth import ALL, TestKey
from .._graphql import REFUND, REFUND_PROMPT, GraphQLClient, document
from .conftest import Serve, Served

SECRET = "a-link-secret-of-at-least-32-bytes-0123456789"
ALICE = TestKey("alice", "rg_test_alice_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
BOB = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyz")
"""Bob may decide, but lacks ``refunds:approve``."""

CALLS = document(
    """
query Calls($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) {
    toolCalls { toolCallId questionId decision { kind decidedBy } approvals { decidedBy } }
  }
}
"""
)


async def _calls(gql: GraphQLClient, run_id: str) -> list[dict[str, Any]] | None:
    run = (await gql.data(CALLS, agentId=REFUND, runId=run_id))["suspendedRun"]
    return None if run is None else list(run["toolCalls"])


class Page:
    def __init__(self, served: Served) -> None:
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=served.app), base_url="http://test")
        self.gql = served.client()
        self.signer = LinkSigner(SECRET, ttl=3600)

    async def waiting(self) -> tuple[str, dict[str, Any]]:
        run = await self.gql.suspend(REFUND, REFUND_PROMPT)
        calls = await _calls(self.gql, run["runId"])
        assert calls is not None
        return run["runId"], calls[0]

    def token(
        self,
        run_id: str,
        call: dict[str, Any],
        action: str = "approve",
        recipient: str = "key:alice",
        signer: LinkSigner | None = None,
    ) -> str:
        return (signer or self.signer).make(
            recipient=recipient,
            agent_id=REFUND,
            run_id=run_id,
            tool_call_id=call["toolCallId"],
            question_id=call["questionId"],
            action=action,  # type: ignore[arg-type]
        )

    async def click(self, token: str) -> httpx.Response:
        return await self.http.post("/links", data={"token": token})


def _link_made_before_expiry(run_id: str, call: dict[str, Any], *, age: int, jti: str) -> str:
    """A link to approve ``call`` for key:alice in the format made before links carried their own
    expiry (no ``exp``: read with the current TTL), signed ``age`` seconds ago."""

    class Then(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - age

    return URLSafeTimedSerializer(SECRET, salt=SALT, signer=Then).dumps(
        {
            "jti": jti,
            "recipient": "key:alice",
            "agent_id": REFUND,
            "run_id": run_id,
            "tool_call_id": call["toolCallId"],
            "question_id": call["questionId"],
            "action": "approve",
        }
    )


@pytest.fixture
async def page(serve: Serve) -> AsyncIterator[Page]:
    served = await serve(
        keys=[ALICE, BOB], link_secret=SECRET, tool_rules=[{"tool": "issue_refund", "scope": "refunds:approve"}]
    )
    opened = Page(served)
    yield opened
    await opened.http.aclose()


async def test_opening_a_link_shows_the_question_and_decides_nothing(page: Page) -> None:
    run_id, call = await page.waiting()
    token = page.token(run_id, call)

    for _ in range(3):  # a scanner, a preview, the reader
        shown = await page.http.get(f"/links/{token}")
        assert shown.status_code == 200
        assert "issue_refund" in shown.text
        assert "1042" in shown.text
        assert '<form method="post" action="/links">' in shown.text
        assert f'name="token" value="{token}"' in shown.text
        assert "script" not in shown.headers["content-security-policy"]
        assert shown.headers["cache-control"] == "no-store"
        assert shown.headers["referrer-policy"] == "no-referrer"

    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_the_button_decides_as_the_recipient_and_a_second_click_says_who_and_when(page: Page) -> None:
    run_id, call = await page.waiting()
    token = page.token(run_id, call)

    first = await page.click(token)
    second = await page.click(token)

    assert first.status_code == 200, first.text
    assert "approved" in first.text
    events = await page.gql.run_events(REFUND, run_id)
    decisions = [e for e in events if e["type"] == "decision"]
    assert [(e["by"], e["data"]["kind"]) for e in decisions] == [("key:alice", "approved")]
    assert second.status_code == 409
    assert "already approved by <strong>key:alice</strong> at" in second.text
    assert decisions[0]["at"][:19] in second.text
    shown = await page.http.get(f"/links/{token}")
    assert shown.status_code == 409
    assert "key:alice" in shown.text


async def test_two_clicks_at_once_decide_once_and_the_later_says_who_and_when(page: Page) -> None:
    run_id, call = await page.waiting()
    token = page.token(run_id, call)

    answers = await asyncio.gather(page.click(token), page.click(token))

    assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
    later = next(a for a in answers if a.status_code == 409)
    assert "key:alice" in later.text
    assert "Nothing was" in later.text
    events = await page.gql.run_events(REFUND, run_id)
    assert [e["by"] for e in events if e["type"] == "decision"] == ["key:alice"]


async def test_the_answer_names_the_tool_its_arguments_the_run_and_the_outcome(page: Page) -> None:
    run_id, call = await page.waiting()

    answer = await page.click(page.token(run_id, call))

    assert answer.status_code == 200, answer.text
    assert "You approved issue_refund (order_id 1042, amount 49.9)" in answer.text
    assert run_id in answer.text
    assert call["toolCallId"] not in answer.text


async def test_a_decline_link_declines(page: Page) -> None:
    run_id, call = await page.waiting()
    answer = await page.click(page.token(run_id, call, "decline", recipient="key:bob"))
    assert answer.status_code == 200, answer.text
    decisions = [e for e in await page.gql.run_events(REFUND, run_id) if e["type"] == "decision"]
    assert [(e["by"], e["data"]["kind"]) for e in decisions] == [("key:bob", "declined")]


async def test_the_recipients_grants_apply(page: Page) -> None:
    run_id, call = await page.waiting()
    answer = await page.click(page.token(run_id, call, recipient="key:bob"))
    unknown = await page.click(page.token(run_id, call, recipient="key:mallory"))

    assert answer.status_code == 403
    assert "refunds:approve" in answer.text
    assert unknown.status_code == 403
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_a_post_without_a_token_says_so_and_changes_nothing(page: Page) -> None:
    run_id, _ = await page.waiting()
    for body in ({}, {"token": ""}):
        answer = await page.http.post("/links", data=body)
        assert answer.status_code == 400
        assert "no link token" in answer.text
    assert "signed with another secret" in (await page.click("x")).text
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_an_altered_or_expired_link_says_so_and_changes_nothing(page: Page) -> None:
    run_id, call = await page.waiting()
    token = page.token(run_id, call)
    altered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    other_run = page.token("someone-elses-run", call)
    forged = page.token(run_id, call, signer=LinkSigner("another-secret-of-at-least-32-bytes-012345", ttl=3600))
    expired = _link_made_before_expiry(run_id, call, age=30 * 86400, jti="0" * 32)

    for bad in (altered, forged):
        assert (await page.click(bad)).status_code == 400
        assert (await page.http.get(f"/links/{bad}")).status_code == 400
    gone = await page.click(expired)
    assert gone.status_code == 410
    assert "expired" in gone.text
    assert (await page.click(other_run)).status_code == 404
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_a_link_decides_only_the_question_it_names(page: Page) -> None:
    run_id, call = await page.waiting()
    stale = page.token(run_id, {**call, "questionId": "an-earlier-question"})
    shown = await page.http.get(f"/links/{stale}")
    answer = await page.click(stale)
    assert shown.status_code == 409
    assert answer.status_code == 409
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_an_open_link_leads_to_the_inbox(page: Page) -> None:
    run_id, call = await page.waiting()
    opened = await page.http.get(f"/links/{page.token(run_id, call, 'open')}")
    assert opened.status_code == 303
    assert opened.headers["location"].endswith(f"/inbox?agentId={REFUND}&runId={run_id}")


async def test_two_person_approval_holds_through_links(serve: Serve) -> None:
    carol = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz")
    served = await serve(keys=[ALICE, carol], link_secret=SECRET, tool_rules=[{"tool": "issue_refund", "approvals": 2}])
    page = Page(served)
    try:
        run_id, call = await page.waiting()
        first = await page.click(page.token(run_id, call))
        again = await page.click(page.token(run_id, call))
        calls = await _calls(page.gql, run_id)
        assert calls is not None
        assert calls[0]["decision"] is None
        assert [a["decidedBy"] for a in calls[0]["approvals"]] == ["key:alice"]
        last = await page.click(page.token(run_id, call, recipient="key:carol"))
    finally:
        await page.http.aclose()
    assert first.status_code == 200, first.text
    assert again.status_code == 409
    assert last.status_code == 200, last.text


CLAIM = """
mutation($input: ReviewClaimInput!) {
  claimReview(input: $input) { __typename ... on ReviewClaimed { reviewClaim { by since } } }
}"""
QUEUE = "query { reviewQueue { nodes { runId reviewClaim { by since } } } }"


async def test_under_a_required_review_claim_the_button_claims_and_decides_as_one_action(serve: Serve) -> None:
    carol = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
    rules = [{"tool": "issue_refund", "scope": "refunds:approve", "requireReviewClaim": True}]
    served = await serve(keys=[ALICE, carol], link_secret=SECRET, tool_rules=rules)
    page = Page(served)
    try:
        # a question nobody claimed: alice's button claims it for her and approves it
        run_id, call = await page.waiting()
        answer = await page.click(page.token(run_id, call))
        assert answer.status_code == 200, answer.text
        decisions = [e for e in await page.gql.run_events(REFUND, run_id) if e["type"] == "decision"]
        assert [(e["by"], e["data"]["kind"]) for e in decisions] == [("key:alice", "approved")]

        # a question alice claimed herself: her button keeps her claim and declines it
        run_id, call = await page.waiting()
        named = {"agentId": REFUND, "runId": run_id, "toolCallId": call["toolCallId"], "questionId": call["questionId"]}
        alice = served.client(ALICE)
        assert (await alice.data(CLAIM, input=named))["claimReview"]["__typename"] == "ReviewClaimed"
        answer = await page.click(page.token(run_id, call, "decline"))
        assert answer.status_code == 200, answer.text

        # a question carol claims: alice's button says who and since when, and changes nothing
        run_id, call = await page.waiting()
        named = {"agentId": REFUND, "runId": run_id, "toolCallId": call["toolCallId"], "questionId": call["questionId"]}
        by_carol = served.client(carol)
        held = (await by_carol.data(CLAIM, input=named))["claimReview"]["reviewClaim"]
        refused = await page.click(page.token(run_id, call))
        assert refused.status_code == 409, refused.text
        assert "key:carol" in refused.text
        assert held["since"][:19] in refused.text
        calls = await _calls(page.gql, run_id)
        assert calls is not None
        assert calls[0]["decision"] is None
        assert (await by_carol.data(QUEUE))["reviewQueue"]["nodes"] == [{"runId": run_id, "reviewClaim": held}]
    finally:
        await page.http.aclose()


CLAIM_UNTIL = CLAIM.replace("by since", "by since until")


async def test_the_page_warns_of_another_principals_review_claim_and_still_decides_nothing(serve: Serve) -> None:
    carol = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
    rules = [{"tool": "issue_refund", "scope": "refunds:approve", "requireReviewClaim": True}]
    served = await serve(keys=[ALICE, carol], link_secret=SECRET, tool_rules=rules)
    page = Page(served)
    try:
        run_id, call = await page.waiting()
        named = {"agentId": REFUND, "runId": run_id, "toolCallId": call["toolCallId"], "questionId": call["questionId"]}
        token = page.token(run_id, call)
        # given a question nobody claimed: the page shows no warning
        free = await page.http.get(f"/links/{token}")
        assert free.status_code == 200, free.text
        assert "reviewing this question" not in free.text

        # when carol claims it, then alice's page names her, since when and until when
        held = (await served.client(carol).data(CLAIM_UNTIL, input=named))["claimReview"]["reviewClaim"]
        claimed = await page.http.get(f"/links/{token}")
        assert claimed.status_code == 200, claimed.text
        assert 'role="alert"' in claimed.text
        assert "key:carol" in claimed.text
        assert held["since"][:19] in claimed.text
        assert held["until"][:19] in claimed.text
        assert '<button type="submit">Approve</button>' in claimed.text
        # and opening it decided nothing
        calls = await _calls(page.gql, run_id)
        assert calls is not None
        assert calls[0]["decision"] is None
        # alice's button is refused, said as the page said it (not the API's message with its ids)
        clicked = await page.click(token)
        assert clicked.status_code == 409, clicked.text
        assert "<strong>key:carol</strong> has been reviewing this question since" in clicked.text, clicked.text
        assert held["until"][:19] in clicked.text
        assert call["toolCallId"] not in clicked.text, clicked.text
        calls = await _calls(page.gql, run_id)
        assert calls is not None
        assert calls[0]["decision"] is None

        # when alice claims a question herself, then her own page warns of no one
        run_id, call = await page.waiting()
        mine = {"agentId": REFUND, "runId": run_id, "toolCallId": call["toolCallId"], "questionId": call["questionId"]}
        assert (await served.client(ALICE).data(CLAIM, input=mine))["claimReview"]["__typename"] == "ReviewClaimed"
        own = await page.http.get(f"/links/{page.token(run_id, call)}")
        assert own.status_code == 200, own.text
        assert "reviewing this question" not in own.text
    finally:
        await page.http.aclose()


async def test_a_link_of_a_recipient_no_longer_configured_is_refused_alike_on_get_and_post(page: Page) -> None:
    run_id, call = await page.waiting()
    token = page.token(run_id, call, recipient="key:mallory")

    shown = await page.http.get(f"/links/{token}")
    clicked = await page.click(token)

    for answer in (shown, clicked):
        assert answer.status_code == 403, answer.text
        assert "key:mallory is no longer a known principal" in answer.text
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_the_page_after_deciding_names_the_outcome(serve: Serve) -> None:
    carol = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz")
    served = await serve(keys=[ALICE, carol], link_secret=SECRET, tool_rules=[{"tool": "issue_refund", "approvals": 2}])
    page = Page(served)
    try:
        run_id, call = await page.waiting()
        first = await page.click(page.token(run_id, call))
        last = await page.click(page.token(run_id, call, recipient="key:carol"))
        declined_run, declined_call = await page.waiting()
        declined = await page.click(page.token(declined_run, declined_call, "decline"))
    finally:
        await page.http.aclose()

    assert first.status_code == 200, first.text
    assert "Outcome: 1 of 2 approvals given; it still waits for 1 more, by another principal." in first.text
    assert last.status_code == 200, last.text
    assert "Outcome: approved (2 of 2 approvals); the run goes on (RESUMING): the tool runs now." in last.text
    assert declined.status_code == 200, declined.text
    assert "Outcome: declined; the run goes on (RESUMING): the tool does not run." in declined.text


async def test_a_link_expires_by_the_ttl_it_was_made_under_and_an_older_one_by_the_current(page: Page) -> None:
    run_id, call = await page.waiting()
    two_hours_ago = LinkSigner(SECRET, ttl=3600, clock=lambda: time.time() - 7200)
    short_lived = page.token(run_id, call, signer=two_hours_ago)
    made_before = _link_made_before_expiry(run_id, call, age=7200, jti="1" * 32)

    # the server's RUNSGATE_LINK_TTL is 3 days: the link made for 1 hour still expired after it
    expired = await page.http.get(f"/links/{short_lived}")
    assert expired.status_code == 410, expired.text
    assert (await page.click(short_lived)).status_code == 410
    # a link made before links carried their expiry is read with the current TTL, as before
    assert (await page.http.get(f"/links/{made_before}")).status_code == 200
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_a_second_click_on_one_of_two_approvals_says_it_was_given_and_changes_nothing(serve: Serve) -> None:
    # given a refund that needs two approvers, approved once from bob's link
    bob = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyz")
    served = await serve(keys=[ALICE, bob], link_secret=SECRET, tool_rules=[{"tool": "issue_refund", "approvals": 2}])
    page = Page(served)
    try:
        run_id, call = await page.waiting()
        token = page.token(run_id, call, recipient="key:bob")
        first = await page.click(token)
        # when he clicks the same link's button again
        second = await page.click(token)
        events = await page.gql.run_events(REFUND, run_id)
        doc = await served.app.state.store.get(REFUND, run_id)
    finally:
        await page.http.aclose()
    assert first.status_code == 200, first.text
    # then he is told his approval was given, when, and that it waits for another; nothing changed
    given = doc["toolCalls"][0]["approvals"][0]["decidedAt"].isoformat(timespec="seconds").replace("+00:00", "Z")
    assert second.status_code == 409, second.text
    assert "You already approved this question" in second.text
    assert given in second.text
    assert "1 of 2 approvals given" in second.text
    assert "You approved" not in second.text
    assert [e["by"] for e in events if e["type"] == "approval"] == ["key:bob"]
    assert len(doc["toolCalls"][0]["approvals"]) == 1


async def test_a_prior_approver_is_told_so_and_shown_no_approve_button(serve: Serve) -> None:
    carol = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz")
    bob = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyz")
    served = await serve(
        keys=[ALICE, bob, carol], link_secret=SECRET, tool_rules=[{"tool": "issue_refund", "approvals": 2}]
    )
    page = Page(served)
    try:
        run_id, call = await page.waiting()
        first = await page.click(page.token(run_id, call, recipient="key:bob"))
        approve = await page.http.get(f"/links/{page.token(run_id, call, recipient='key:bob')}")
        decline = await page.http.get(f"/links/{page.token(run_id, call, 'decline', recipient='key:bob')}")
        other = await page.http.get(f"/links/{page.token(run_id, call, recipient='key:carol')}")
        doc = await served.app.state.store.get(REFUND, run_id)
        declined = await page.click(page.token(run_id, call, "decline", recipient="key:bob"))
    finally:
        await page.http.aclose()
    assert first.status_code == 200, first.text
    given = doc["toolCalls"][0]["approvals"][0]["decidedAt"].isoformat(timespec="seconds").replace("+00:00", "Z")
    assert approve.status_code == 200, approve.text
    said = approve.text.index("You already approved")
    assert given in approve.text
    assert "waits for another approver" in approve.text
    assert "<button" not in approve.text
    # he may still decline (the gate allows it); the note comes before the button
    assert "You already approved" in decline.text
    assert decline.text.index("You already approved") < decline.text.index(">Decline</button>")
    assert said > 0
    # another approver still gets the button, and no such note
    assert ">Approve</button>" in other.text
    assert "You already approved" not in other.text
    assert declined.status_code == 200, declined.text


async def test_a_recipient_without_runs_decide_decides_nothing_by_link(serve: Serve) -> None:
    reader = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz", ("runs:read", "refunds:approve"))
    served = await serve(
        keys=[ALICE, reader], link_secret=SECRET, tool_rules=[{"tool": "issue_refund", "scope": "refunds:approve"}]
    )
    page = Page(served)
    run_id, call = await page.waiting()
    shown = await page.http.get(f"/links/{page.token(run_id, call, recipient='key:carol')}")
    approved = await page.click(page.token(run_id, call, recipient="key:carol"))
    declined = await page.click(page.token(run_id, call, action="decline", recipient="key:carol"))
    await page.http.aclose()

    assert 'type="submit"' not in shown.text
    assert "runs:decide" in shown.text
    assert (approved.status_code, declined.status_code) == (403, 403)
    assert "runs:decide" in approved.text
    calls = await _calls(page.gql, run_id)
    assert calls is not None
    assert calls[0]["decision"] is None


async def test_a_page_without_a_button_does_not_say_the_recipient_decides(page: Page) -> None:
    run_id, call = await page.waiting()
    refused = await page.http.get(f"/links/{page.token(run_id, call, recipient='key:bob')}")
    allowed = await page.http.get(f"/links/{page.token(run_id, call)}")

    assert "You may not approve it" in refused.text
    assert "<button" not in refused.text
    assert "You decide as" not in refused.text
    assert "You decide as <strong>key:alice</strong>" in allowed.text
