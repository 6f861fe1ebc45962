"""Deciding from an email sent through a real SMTP server (issue 45 part 5).

``aiosmtpd`` is the receiving server; the test reads the messages it got. A rule's recipients
get an email when a question starts to wait and when it is escalated, each once; the email's
approve link, fetched over HTTP, shows the question and a button, and the button's POST decides
as the recipient. SMTP without a link secret, or with the public URL at its default, refuses to
start. On the memory store, a SQLite file and MongoDB.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import Principal, ToolApprovalRule
from runtime.notifying.email import EMAIL, EmailOutbox, Recipient
from runtime.notifying.links import LinkSigner
from server.services import Services
from server.settings import DEMO_AGENTS, ConfigError, Settings, load_settings
from storage import utcnow
from storage.memory.store import MemorySnapshotStore
from storage.protocol import DeliveryListing

from .._auth import ALL, TestKey, api_keys_json
from .._graphql import REFUND, REFUND_PROMPT, TWO_REFUNDS_PROMPT, WAIT
from .._smtp import Inbox, smtp_server
from ._cli import serve_with_only
from .conftest import Serve

SECRET = "a-link-secret-of-at-least-32-bytes-0123456789"
ALICE = TestKey("alice", "rg_test_alice_0123456789abcdefghijklmnopqrstuvwxyz", ALL, email="alice@example.com")
BOSS = TestKey("boss", "rg_test_boss_0123456789abcdefghijklmnopqrstuvwxyz", ALL, email="boss@example.com")
RULES = [
    {
        "tool": "issue_refund",
        "escalateAfter": 0.5,
        "recipients": {"waiting": ["key:alice"], "escalated": ["key:boss"]},
    }
]


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    with smtp_server() as served:
        yield served


async def _until(check: Any) -> Any:
    async with asyncio.timeout(WAIT):
        while not (found := check()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return found


def _text(message: Message) -> str:
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode().replace("\r\n", "\n")


async def test_recipients_get_an_email_whose_link_decides_only_through_its_button(
    serve: Serve, smtp: tuple[Inbox, int]
) -> None:
    inbox, port = smtp
    served = await serve(
        tool_rules=RULES,
        keys=[ALICE, BOSS],
        link_secret=SECRET,
        smtp_url=f"smtp://127.0.0.1:{port}",
        public_url="http://test",
        webhook_poll_interval=0.05,
        subscription_lookback=1.0,
    )
    gql = served.client()
    run = await gql.suspend(REFUND, REFUND_PROMPT)

    # alice is told the question waits, the boss that it was escalated, once each
    waiting = (await _until(lambda: inbox.to("alice@example.com")))[0]
    await _until(lambda: inbox.to("boss@example.com"))
    await asyncio.sleep(0.3)  # time for a second email, were there one
    assert len(inbox.to("alice@example.com")) == 1
    assert len(inbox.to("boss@example.com")) == 1
    assert "Escalated" in inbox.to("boss@example.com")[0]["Subject"]
    text = _text(waiting)
    assert "issue_refund" in text
    assert "1042" in text
    links = dict(re.findall(r"^(Approve|Decline|Open in the inbox): (http://test/links/\S+)$", text, re.M))
    assert set(links) == {"Approve", "Decline", "Open in the inbox"}

    # opening the approve link decides nothing; its button does, as alice
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=served.app), base_url="http://test") as http:
        shown = await http.get(links["Approve"].removeprefix("http://test"))
        assert shown.status_code == 200
        assert not [e for e in await gql.run_events(REFUND, run["runId"]) if e["type"] == "decision"]
        token = re.search(r'name="token" value="([^"]+)"', shown.text)
        assert token is not None
        decided = await http.post("/links", data={"token": token.group(1)})
    assert decided.status_code == 200, decided.text
    decisions = [e for e in await gql.run_events(REFUND, run["runId"]) if e["type"] == "decision"]
    assert [(e["by"], e["data"]["kind"]) for e in decisions] == [("key:alice", "approved")]


def test_smtp_needs_a_link_secret_and_a_public_url() -> None:
    with pytest.raises(ConfigError, match=r"RUNSGATE_LINK_SECRET") as no_secret:
        load_settings(
            smtp_url="smtp://mailer:hunter2hunter2@mail.example.com:587", public_url="https://runs.example.com"
        )
    with pytest.raises(ConfigError, match=r"RUNSGATE_PUBLIC_URL is left at its default"):
        load_settings(smtp_url="smtp://mail.example.com", link_secret=SECRET)
    assert "hunter2" not in str(no_secret.value)
    assert "mailer:***@mail.example.com" in str(no_secret.value)
    load_settings(smtp_url="smtp://mail.example.com", link_secret=SECRET, public_url="https://runs.example.com")


async def test_each_call_gets_its_own_subject_and_its_arguments_as_lines(serve: Serve, smtp: tuple[Inbox, int]) -> None:
    inbox, port = smtp
    served = await serve(
        tool_rules=[{"tool": "issue_refund", "recipients": {"waiting": ["key:alice"]}}],
        keys=[ALICE],
        link_secret=SECRET,
        smtp_url=f"smtp://127.0.0.1:{port}",
        public_url="http://test",
        webhook_poll_interval=0.05,
    )
    await served.client().suspend(REFUND, TWO_REFUNDS_PROMPT)

    sent = await _until(lambda: (got := inbox.to("alice@example.com")) and len(got) >= 2 and got)
    subjects = sorted(" ".join(str(message["Subject"]).split()) for message in sent)  # unfolded
    assert len(set(subjects)) == 2, subjects
    assert "issue_refund (order_id 1042, amount 49.9)" in subjects[0]
    assert "issue_refund (order_id 1043, amount 120.0)" in subjects[1]
    texts = sorted(_text(message) for message in sent)
    assert "\norder_id: 1042\namount: 49.9\n" in texts[0]
    assert '"args"' not in texts[0]
    assert "{" not in texts[0]


def test_a_long_argument_is_cut_in_the_email() -> None:
    outbox = _outbox(addresses={"key:alice": "alice@example.com"})
    text = _text(outbox.compose(_message({"note": "x" * 5000, "order_id": 1042})))
    assert "order_id: 1042" in text
    line = next(line for line in text.splitlines() if line.startswith("note: "))
    assert line.endswith("…")
    assert len(line) < 300


@pytest.mark.parametrize(
    ("ttl", "said"),
    [
        (15, "expires after 15 seconds."),
        (1, "expires after 1 second."),
        (90, "expires after 90 seconds."),
        (900, "expires after 15 minutes."),
        (3600, "expires after 1 hour."),
        (5401, "expires after 5401 seconds."),
        (7200, "expires after 2 hours."),
        (5400.5, "expires after 90 minutes."),
        (259_200, "expires after 3 days."),
        (86_400 * 365, "expires after 365 days."),
    ],
)
def test_the_email_says_how_long_its_links_last_in_a_unit_a_person_reads(ttl: float, said: str) -> None:
    outbox = _outbox(addresses={"key:alice": "alice@example.com"}, ttl=ttl)
    text = " ".join(_text(outbox.compose(_message({"order_id": 1042}))).split())
    assert said in text


@pytest.mark.parametrize(
    ("recipient", "expected"),
    [
        ("key:bbo", "RUNSGATE_TOOL_RULES: recipients key:bbo: no API key of RUNSGATE_API_KEYS is named bbo"),
        ("key:bob", "RUNSGATE_TOOL_RULES: recipients key:bob: its RUNSGATE_API_KEYS entry has no email"),
        ("jwt:carol", "RUNSGATE_TOOL_RULES: recipients jwt:carol: no RUNSGATE_RECIPIENTS entry names it"),
    ],
)
def test_smtp_refuses_to_start_when_a_recipient_cannot_be_mailed(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    recipient: str,
    expected: str,
) -> None:
    bob = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyz")
    rules = [{"tool": "issue_refund", "recipients": {"escalated": ["key:alice", recipient]}}]
    status = serve_with_only(
        monkeypatch,
        tmp_path,
        {
            "RUNSGATE_TOOL_RULES": json.dumps(rules),
            "RUNSGATE_API_KEYS": api_keys_json(ALICE, bob),
            "RUNSGATE_SMTP_URL": "smtp://127.0.0.1:25",
            "RUNSGATE_LINK_SECRET": SECRET,
            "RUNSGATE_PUBLIC_URL": "https://runs.example.com",
        },
    )
    assert status == 2
    assert f"runsgate: invalid configuration: {expected}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("smtp://mailer:hunter2hunter2@127.0.0.1:99999", "its port must be a number from 1 to 65535"),
        ("smtp://127.0.0.1:port", "its port must be a number from 1 to 65535"),
        ("smtps://:25", "it names no host"),
    ],
)
def test_smtp_refuses_to_start_with_a_url_it_cannot_connect_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, expected: str
) -> None:
    status = serve_with_only(
        monkeypatch,
        tmp_path,
        {
            "RUNSGATE_SMTP_URL": url,
            "RUNSGATE_LINK_SECRET": SECRET,
            "RUNSGATE_PUBLIC_URL": "https://runs.example.com",
        },
    )
    err = capsys.readouterr().err
    assert status == 2, err
    assert "runsgate: invalid configuration: RUNSGATE_SMTP_URL" in err
    assert expected in err
    assert "hunter2" not in err
    assert "Traceback" not in err


async def test_a_recipient_without_an_address_is_warned_about_once_per_question(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outbox = _outbox(addresses={})
    run = _run({"order_id": 1042})
    with caplog.at_level(logging.WARNING, logger="runtime.notifying.email"):
        for number in range(6):
            await outbox.on_event(_event(f"e{number}", "escalated"), run)  # type: ignore[arg-type]
        await outbox.on_event(_event("e9", "escalated"), _run({"order_id": 1042}, question="q2"))  # type: ignore[arg-type]
    warned = [r.getMessage() for r in caplog.records if "has no address" in r.getMessage()]
    assert len(warned) == 2, warned


async def _anyone(doc: Any, index: int, principal: Principal) -> None:
    """A gate that refuses nobody (what these tests look at is not who is told)."""


def _recipients(addresses: dict[str, str]) -> dict[str, Recipient]:
    return {
        identity: Recipient(
            address, Principal(name=identity.removeprefix("key:"), scopes=frozenset(ALL), credential="key")
        )
        for identity, address in addresses.items()
    }


def _outbox(addresses: dict[str, str], ttl: float = 3600) -> EmailOutbox:
    rule = ToolApprovalRule(tool="issue_refund", recipients={"waiting": ["key:alice"], "escalated": ["key:alice"]})
    return EmailOutbox(
        MemorySnapshotStore(),
        rules=[rule],
        recipients=_recipients(addresses),
        refusal_of=_anyone,
        signer=LinkSigner(SECRET, ttl=ttl),
        public_url="http://test",
        smtp_url="smtp://127.0.0.1:25",
        sender="runsgate@localhost",
        instance_id="test",
    )


def _run(args: dict[str, Any], question: str = "q1") -> dict[str, Any]:
    call = {
        "toolCallId": "c1",
        "questionId": question,
        "toolName": "issue_refund",
        "args": args,
        "requiresApproval": True,
        "suspendPayload": None,
        "decision": None,
    }
    return {"_id": "r1", "agentId": REFUND, "runId": "r1", "resourceId": "t", "parentRunId": None, "toolCalls": [call]}


def _event(event_id: str, kind: str) -> dict[str, Any]:
    return {"_id": event_id, "agentId": REFUND, "runId": "r1", "type": kind, "data": {"toolCallId": "c1"}}


def _message(args: dict[str, Any]) -> Any:
    body = {
        "to": "key:alice",
        "address": "alice@example.com",
        "moment": "waiting",
        "toolCallId": "c1",
        "questionId": "q1",
        "toolName": "issue_refund",
        "shown": {"args": args},
        "approval": True,
    }
    return {"agentId": REFUND, "runId": "r1", "body": json.dumps(body)}


async def test_the_requester_is_not_told_of_a_question_it_may_not_approve(
    serve: Serve, smtp: tuple[Inbox, int]
) -> None:
    inbox, port = smtp
    bob = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyz", ALL, email="bob@example.com")
    everyone = ["key:alice", "key:bob"]
    rules = [
        {
            "tool": "issue_refund",
            "separationOfDuties": True,
            "remindAfter": 0.2,
            "escalateAfter": 0.4,
            "recipients": {"waiting": everyone, "reminded": everyone, "escalated": everyone},
        }
    ]
    served = await serve(
        tool_rules=rules,
        keys=[ALICE, bob],
        link_secret=SECRET,
        smtp_url=f"smtp://127.0.0.1:{port}",
        public_url="http://test",
        webhook_poll_interval=0.05,
        subscription_lookback=1.0,
    )
    run = await served.client(ALICE).suspend(REFUND, REFUND_PROMPT)

    # bob is told three times; alice, who started the run, never (each moment's messages are
    # queued together, so once bob's three are sent alice's would be queued)
    told = await _until(lambda: (got := inbox.to("bob@example.com")) and len(got) >= 3 and got)
    assert sorted(str(message["Subject"]).split(":")[0] for message in told) == [
        "[runsgate] Escalated",
        "[runsgate] Reminder",
        "[runsgate] Waiting for you",
    ]
    store = served.app.state.store
    queued = await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=100))
    emails = [json.loads(d["body"]) for d in queued if d["endpointId"] == EMAIL and d["runId"] == run["runId"]]
    assert sorted(email["moment"] for email in emails) == ["escalated", "reminded", "waiting"]
    assert {email["to"] for email in emails} == {"key:bob"}
    assert inbox.to("alice@example.com") == []


async def test_recipients_without_smtp_are_a_warning_at_start_naming_the_rules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rules = [
        {"name": "refund-mail", "tool": "issue_refund", "recipients": {"waiting": ["key:alice"]}},
        {"tool": "issue_refund", "expiresAfter": 60},
        {"tool": "issue_refund", "recipients": {"escalated": ["key:boss"]}},
    ]
    settings = Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, tool_rules=rules)

    with caplog.at_level(logging.WARNING, logger="runsgate"):
        async with Services(settings):
            pass

    warned = [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "RUNSGATE_SMTP_URL" in r.getMessage()
    ]
    assert warned == [
        "RUNSGATE_SMTP_URL is not set: the recipients of tool rules refund-mail (issue_refund), #3 (issue_refund) "
        "get no email (no email when a question waits, no reminder, no escalation); the queue and webhooks still tell"
    ]


async def test_a_recipient_who_already_approved_is_not_reminded(serve: Serve, smtp: tuple[Inbox, int]) -> None:
    inbox, port = smtp
    everyone = ["key:alice", "key:bob"]
    rule = ToolApprovalRule(tool="issue_refund", approvals=2, recipients={"reminded": everyone, "escalated": everyone})
    gate = (await serve(tool_rules=[{"tool": "issue_refund", "approvals": 2}])).app.state.runs.review_queue
    outbox = EmailOutbox(
        MemorySnapshotStore(),
        rules=[rule],
        recipients=_recipients({"key:alice": "alice@example.com", "key:bob": "bob@example.com"}),
        refusal_of=gate.refusal_of,
        signer=LinkSigner(SECRET, ttl=3600),
        public_url="http://test",
        smtp_url=f"smtp://127.0.0.1:{port}",
        sender="runsgate@localhost",
        instance_id="test",
    )
    run = _run({"order_id": 1042})
    run["toolCalls"][0] |= {"approvalsRequired": 2, "approvals": [{"decidedBy": "key:bob", "decidedAt": utcnow()}]}

    await outbox.on_event(_event("e1", "reminded"), run)  # type: ignore[arg-type]
    await outbox.on_event(_event("e2", "escalated"), run)  # type: ignore[arg-type]
    sent = await outbox.send_once()

    assert sent == 2
    told = await _until(lambda: len(got := inbox.to("alice@example.com")) >= 2 and got)
    assert sorted(str(message["Subject"]).split(":")[0] for message in told) == [
        "[runsgate] Escalated",
        "[runsgate] Reminder",
    ]
    assert inbox.to("bob@example.com") == []


async def test_only_recipients_the_gate_would_let_decide_are_told(serve: Serve, smtp: tuple[Inbox, int]) -> None:
    inbox, port = smtp
    keys = [
        TestKey("alice", ALICE.key, (*ALL, "refunds:approve"), email="alice@example.com"),
        TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyz", ALL, email="bob@example.com"),
        TestKey(
            "carol",
            "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz",
            ("runs:read", "refunds:approve"),
            email="carol@example.com",
        ),
        TestKey(
            "dave",
            "rg_test_dave_0123456789abcdefghijklmnopqrstuvwxyz",
            (*ALL, "refunds:approve"),
            resources=("another-customer",),
            email="dave@example.com",
        ),
    ]
    rules = [
        {
            "tool": "issue_refund",
            "scope": "refunds:approve",
            "recipients": {"waiting": [f"key:{key.name}" for key in keys]},
        }
    ]
    served = await serve(
        tool_rules=rules,
        keys=keys,
        link_secret=SECRET,
        smtp_url=f"smtp://127.0.0.1:{port}",
        public_url="http://test",
        webhook_poll_interval=0.05,
    )
    run = await served.client(keys[0]).suspend(REFUND, REFUND_PROMPT, resourceId="customer-1")

    # alice may approve; bob lacks the rule's scope, carol runs:decide, dave the run's resource
    await _until(lambda: inbox.to("alice@example.com"))
    store = served.app.state.store
    queued = await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=100))
    emails = [json.loads(d["body"]) for d in queued if d["endpointId"] == EMAIL and d["runId"] == run["runId"]]
    assert {email["to"] for email in emails} == {"key:alice"}
    assert inbox.to("bob@example.com") == inbox.to("carol@example.com") == inbox.to("dave@example.com") == []
