"""Email to a rule's recipients, sent once across instances (issue 45 part 5; docs/api.md
"Deciding from an email").

``EmailOutbox.on_event`` (the ``DeadlineNotifier``'s hook) queues one message per recipient the
gate lets approve (or resume) the question with its grants (``DecisionGate.refusal_of``, as the
queue lists it) in ``webhook_deliveries`` (endpoint ``EMAIL``, insert-if-absent by id) when a
question starts to wait, is reminded, is escalated. ``send_once`` leases the due messages, as
webhook deliveries are leased, and sends each through the SMTP server (``aiosmtplib``) with one
signed link per action (``LinkSigner``); a failed attempt is retried on ``RetryPolicy``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any
from urllib.parse import unquote, urlsplit

import aiosmtplib

from storage import EventDocument, SnapshotDocument, SnapshotStore, WebhookDeliveryDocument, pending_delivery, utcnow
from storage.protocol import DeliveryLease
from storage.url_credentials import masked

from .._cancel import in_rounds
from ..access import Principal, ToolApprovalRule
from ..deciding.rules import covering, owner
from ..errors import RunsgateError
from ..running.deferred import question_id
from ..webhooks.messages import RetryPolicy, inbox_url
from .links import LinkAction, LinkSigner
from .schedule import Moment, notices_for
from .summary import argument_lines, call_summary, duration_text

logger = logging.getLogger(__name__)

EMAIL = "runsgate-email"
"""The endpoint id of the email outbox in ``webhook_deliveries``."""

SUBJECTS: dict[Moment, str] = {"waiting": "Waiting for you", "reminded": "Reminder", "escalated": "Escalated"}

Refusal = Callable[[SnapshotDocument, int, Principal], Awaitable[RunsgateError | None]]
"""Why a principal may not approve (or resume) call ``index`` of a run (``DecisionGate.refusal_of``)."""


@dataclass(frozen=True)
class Recipient:
    """A principal told by email: its ``address`` and the ``principal`` its links decide as."""

    address: str
    principal: Principal


class EmailOutbox:
    """Queues and sends the emails of waiting questions (module docstring).

    Args:
        store: The shared store.
        rules: The tool rules (their ``recipients``).
        recipients: Principal identity -> its address and grants (API keys with an ``email``,
            ``RUNSGATE_RECIPIENTS``).
        refusal_of: The gate's refusal of a question to a principal: one it refuses is not told.
        signer: Makes the links.
        public_url: Base URL of the links and the inbox (``RUNSGATE_PUBLIC_URL``).
        smtp_url: ``smtp://[user:password@]host[:port]`` or ``smtps://...``.
        sender: The ``From`` address.
        instance_id: This instance's id in leases.
        poll_interval: Seconds between two looks for due messages.
        retry: When a failed attempt is tried again.
        timeout: Seconds one SMTP conversation may take.
    """

    def __init__(
        self,
        store: SnapshotStore,
        *,
        rules: Sequence[ToolApprovalRule],
        recipients: Mapping[str, Recipient],
        refusal_of: Refusal,
        signer: LinkSigner,
        public_url: str,
        smtp_url: str,
        sender: str,
        instance_id: str,
        poll_interval: float = 1.0,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._store = store
        self._rules = tuple(rules)
        self._recipients = dict(recipients)
        self._refusal_of = refusal_of
        self._signer = signer
        self._public_url = public_url.rstrip("/")
        parts = urlsplit(smtp_url)
        self._smtp: dict[str, Any] = {
            "hostname": parts.hostname or "localhost",
            "port": parts.port or (465 if parts.scheme == "smtps" else 25),
            "username": unquote(parts.username) if parts.username else None,
            "password": unquote(parts.password) if parts.password else None,
            "use_tls": parts.scheme == "smtps",
            "timeout": timeout,
        }
        self._where = masked(smtp_url)
        self._sender = sender
        self._instance_id = instance_id
        self._poll_interval = poll_interval
        self._retry = retry or RetryPolicy()
        self._lease = timedelta(seconds=2 * timeout + 10)
        self._unaddressed: set[tuple[str, str, str, str]] = set()
        """(identity, agent, run, question) already warned about: one warning each, not one per scan."""

    # -- queue -----------------------------------------------------------------------------------
    async def on_event(self, event: EventDocument, run: SnapshotDocument | None) -> None:
        """Queue the messages ``event`` (``suspended``, ``reminded``, ``escalated``) calls for."""
        if run is None:
            return
        moment: Moment = "waiting" if event["type"] == "suspended" else event["type"]  # type: ignore[assignment]
        named = set(event["data"].get("toolCallIds") or [event["data"].get("toolCallId")])
        now = utcnow()
        messages: list[WebhookDeliveryDocument] = []
        for index, call in enumerate(run["toolCalls"]):
            if call["decision"] is not None or call["toolCallId"] not in named:
                continue
            rules = covering(self._rules, owner(run["agentId"], call))
            for identity in notices_for(rules, call["toolName"], call["args"]).told(moment):
                recipient = self._recipients.get(identity)
                if recipient is None:
                    self._warn_unaddressed(identity, moment, run, question_id(call))
                    continue
                if await self._refusal_of(run, index, recipient.principal) is not None:
                    continue  # its links could only be refused, and it may not be shown the run
                body = {
                    "to": identity,
                    "address": recipient.address,
                    "moment": moment,
                    "toolCallId": call["toolCallId"],
                    "questionId": question_id(call),
                    "toolName": call["toolName"],
                    "shown": {"args": call["args"]}
                    if call["requiresApproval"]
                    else {"suspendPayload": call["suspendPayload"]},
                    "approval": call["requiresApproval"],
                }
                messages.append(self._message(event, run, f"{index}-{identity}", body, now))
        if messages:
            await self._store.add_webhook_deliveries(messages)

    def _warn_unaddressed(self, identity: str, moment: Moment, run: SnapshotDocument, question: str) -> None:
        """Warn once per recipient and question that ``identity`` has no address (the start-time
        check refuses such recipients when it can; this is for rules it did not see)."""
        seen = (identity, run["agentId"], run["_id"], question)
        if seen in self._unaddressed:
            return
        if len(self._unaddressed) >= 10_000:  # a bound on a long-lived process's memory
            self._unaddressed.clear()
        self._unaddressed.add(seen)
        logger.warning("email: %s has no address; %s of run %s not sent", identity, moment, run["_id"])

    def _message(
        self, event: EventDocument, run: SnapshotDocument, key: str, body: dict[str, Any], now: datetime
    ) -> WebhookDeliveryDocument:
        return pending_delivery(
            f"{event['_id']}.{key.replace('.', '_')}.{EMAIL}",
            EMAIL,
            event,
            resource_id=run["resourceId"],
            type=f"email.{body['moment']}",
            body=json.dumps(body, default=str),
            now=now,
        )

    # -- send ------------------------------------------------------------------------------------
    def compose(self, message: WebhookDeliveryDocument) -> EmailMessage:
        """The email of one queued message, with a new signed link per action."""
        body: dict[str, Any] = json.loads(message["body"])
        agent_id, run_id = message["agentId"], message["runId"]

        def link(action: LinkAction) -> str:
            token = self._signer.make(
                recipient=body["to"],
                agent_id=agent_id,
                run_id=run_id,
                tool_call_id=body["toolCallId"],
                question_id=body["questionId"],
                action=action,
            )
            return f"{self._public_url}/links/{token}"

        actions: list[LinkAction] = ["approve", "decline"] if body["approval"] else []
        shown = body["shown"].get("args") if body["approval"] else body["shown"].get("suspendPayload")
        lines = [
            f"{body['toolName']} (agent {agent_id}, run {run_id}) is {body['moment']}.",
            "",
            "Arguments:" if body["approval"] else "The agent asks:",
            *argument_lines(shown),
            "",
            *(f"{action.capitalize()}: {link(action)}" for action in actions),
            f"Open in the inbox: {link('open')}",
            "",
            "A link shows the question and a button; only the button decides, as you. Each link works once and "
            f"expires after {duration_text(self._signer.ttl)}.",
            f"Inbox: {inbox_url(self._public_url, agent_id, run_id)}",
        ]
        email = EmailMessage()
        email["From"] = self._sender
        email["To"] = body["address"]
        summary = call_summary(body["toolName"], shown)
        email["Subject"] = f"[runsgate] {SUBJECTS[body['moment']]}: {summary} (run {run_id})"
        email.set_content("\n".join(lines))
        return email

    async def send_once(self, *, limit: int = 16) -> int:
        """Lease the due messages and send each. Returns how many were attempted. Raises
        ``StoreUnavailableError``."""
        now = utcnow()
        due = await self._store.claim_webhook_deliveries(
            DeliveryLease(by=self._instance_id, until=now + self._lease, now=now, limit=limit, endpoint_id=EMAIL)
        )
        for message in due:
            await self._send(message)
        return len(due)

    async def _send(self, message: WebhookDeliveryDocument) -> None:
        error: str | None = None
        try:
            await aiosmtplib.send(self.compose(message), **self._smtp)
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:256]
        _, attempt = self._retry.attempt(
            message, by=self._instance_id, now=utcnow(), delivered=error is None, error=error
        )
        await self._store.finish_webhook_attempt(attempt)
        if error is not None:
            logger.warning("email %s through %s: %s (%s)", message["_id"], self._where, error, attempt.status)

    async def run_forever(self) -> None:
        """Send due messages every ``poll_interval`` seconds until cancelled; errors are logged."""
        await in_rounds((self.send_once,), every=self._poll_interval, name="email", logger=logger)


__all__ = ["EMAIL", "EmailOutbox"]
