"""Deciding from an email sent through a real SMTP server (issue 45 part 5).

``aiosmtpd`` is the receiving server; the test reads the messages it got. A rule's recipients
get an email when a question starts to wait and when it is escalated, each once; the email's
approve link, fetched over HTTP, shows the question and a button, and the button's POST decides
as the recipient. SMTP without a link secret, or with the public URL at its default, refuses to
start. On the memory store, a SQLite file and MongoDB.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from email.message import Message
from typing import Any

import httpx
import pytest

from server.settings import ConfigError, load_settings

from .._auth import ALL, TestKey
from .._graphql import REFUND, REFUND_PROMPT, WAIT
from .._smtp import Inbox, smtp_server
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
