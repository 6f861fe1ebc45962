"""Deciding from an email: ``GET /links/{token}`` shows the question, ``POST /links`` decides
(SECURITY.md "Signed links").

Opening a link never decides (mail scanners fetch links): the page shows the question, another's
review claim on it (who, since, until) and one button, a form whose only field is the signed token
(no cookie). The POST decides as the token's recipient, with its grants, through the same gate as
the API, taking the review claim a rule requires as it decides; the question's identity makes one
token decide once (a second POST is refused by the gate). Both routes go through one ordered
check (``Links._check``), so they answer alike. A question decided already says by whom and when;
an expired or altered token changes nothing, and its page says how to go on.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from runtime import DuplicateApproverError, Principal, RunManager, RunOutcome, RunsgateError
from runtime.deciding.questions import decided_in_events
from runtime.deciding.refusals import active_review_claim
from runtime.deciding.rules import review_claim_required
from runtime.notifying.links import Link, LinkExpiredError, LinkInvalidError, LinkSigner
from runtime.notifying.summary import call_summary
from runtime.reviewing.errors import ReviewAlreadyClaimedError
from runtime.running.deferred import question_id
from runtime.webhooks.messages import inbox_url
from storage import DecisionKind, ReviewClaimDocument, SnapshotDocument, SnapshotStore, ToolCallDocument

from .settings import Settings

LINK_CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
"""The page's policy: no script at all, its form posts to this server only, never framed."""
HEADERS = {
    "Content-Security-Policy": LINK_CSP,
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex",
}
MAX_FORM_BYTES = 8192
"""A ``POST /links`` body larger than this is refused (its one field is a token of a few hundred bytes)."""


def link_signer(settings: Settings) -> LinkSigner | None:
    """The signer of ``RUNSGATE_LINK_SECRET``, or ``None`` when links are off."""
    if settings.link_secret is None:
        return None
    return LinkSigner(settings.link_secret.get_secret_value(), ttl=settings.link_ttl)


def recipient_principal(settings: Settings, identity: str) -> Principal | None:
    """The principal ``identity`` (``key:<name>``, ``jwt:...``) stands for, with its grants from
    ``RUNSGATE_API_KEYS`` or ``RUNSGATE_RECIPIENTS``; ``None`` when neither names it."""
    kind, _, name = identity.partition(":")
    if kind == "key":
        for key in settings.api_keys:
            if key.name == name:
                resources = None if key.resources == "*" else frozenset(key.resources)
                return Principal(name=name, scopes=frozenset(key.scopes), resources=resources, credential="key")
        return None
    for entry in settings.recipients:
        if entry.principal == identity:
            resources = None if entry.resources == "*" else frozenset(entry.resources)
            return Principal(name=identity, scopes=frozenset(entry.scopes), resources=resources)
    return None


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} · runsgate</title>"
        "<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}"
        "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f4;padding:.5rem;max-height:20rem;"
        "overflow:auto}button{font-size:1rem;padding:.5rem 1.25rem}</style></head>"
        f"<body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def _when(value: datetime) -> str:
    return value.isoformat(timespec="seconds").replace("+00:00", "Z")


def _shown(call: Any) -> Any:
    """What a person is shown of ``call``: its arguments, or what the agent asks."""
    return call["args"] if call["requiresApproval"] else call["suspendPayload"]


def _refused(exc: LinkExpiredError | LinkInvalidError, inbox_base: str) -> HTMLResponse:
    """The 410 page of an expired link (who sends links, what to do: the inbox, or the reminder's
    email), or the 400 page of one altered or signed with another secret."""
    if isinstance(exc, LinkExpiredError):
        made = f" It was made at {_when(exc.made_at)}." if exc.made_at is not None else ""
        where = inbox_base if exc.link is None else inbox_url(inbox_base, exc.link.agent_id, exc.link.run_id)
        return _page(
            "This link expired",
            f"<p>Nothing was changed.{made} A link is valid for a limited time, and none is sent on request.</p>"
            "<p>Links are sent by email by this runsgate server to the people its tool rules name: when a "
            "question starts to wait, and again with its reminder or escalation where the rules set one. "
            "To decide now, open the question in the inbox and sign in there with your API key: "
            f'<a href="{html.escape(where)}">Open in the inbox</a>. Or wait for the reminder\'s email, '
            "whose links are new.</p>",
            410,
        )
    return _page(
        "This link is not valid",
        "<p>It was altered, cut short, or signed with another secret. Nothing was changed.</p>",
        400,
    )


def _claim_warning(runs: RunManager, call: ToolCallDocument, recipient: str) -> str:
    """The page's warning when a principal other than ``recipient`` holds the question's live
    review claim (who, since when, until when), else ``""``."""
    claim = active_review_claim(call, runs.now())
    if claim is None or claim["by"] == recipient:
        return ""
    if review_claim_required(runs.tool_rules, call["toolName"], call["args"]):
        return _held(claim, "While it holds, your button is refused and changes nothing.")
    return _held(claim, "A review claim is advice: your button still decides.")


def _held(claim: ReviewClaimDocument, outcome: str) -> str:
    """The alert naming who holds ``claim`` on the question, since and until when, then ``outcome``."""
    return (
        f'<p role="alert"><strong>{html.escape(claim["by"])}</strong> has been reviewing this question since '
        f"{_when(claim['at'])} (until {_when(claim['until'])}). {outcome}</p>"
    )


def _prior_approval(call: ToolCallDocument, recipient: str) -> str:
    """The note saying ``recipient`` gave one of the approvals ``call`` needs: since when and how
    many are given and needed; ``""`` when it gave none."""
    given = [a for a in call.get("approvals") or [] if a["decidedBy"] == recipient]
    if not given:
        return ""
    count, needed = len(call.get("approvals") or []), call.get("approvalsRequired", 1)
    return (
        f'<p role="status">You already approved this question at {_when(given[0]["decidedAt"])}. It waits '
        f"for another approver ({count} of {needed} approvals given); your approval cannot count twice.</p>"
    )


def _refused_note(refused: RunsgateError | None, call: ToolCallDocument, recipient: str, verb: str) -> str:
    """The page's note before any button: why the gate refuses ``recipient`` the link's action
    (``verb``) on ``call`` (``DecisionGate.refusal_of``); else, when it gave one of the approvals
    already, ``_prior_approval`` (said on a decline link too, which it may still use). ``""``
    when none."""
    if refused is not None and not isinstance(refused, DuplicateApproverError):
        return f'<p role="alert">You may not {verb.lower()} it: {html.escape(refused.message)}</p>'
    return _prior_approval(call, recipient)


def _outcome(outcome: RunOutcome, asked: ToolCallDocument | None, link: Link, done: str) -> str:
    """What the decision ``done`` (``approved``, ``declined``) by ``link`` on ``asked`` (the call as
    read before it) led to, as recorded: an approval of several, the run still waiting on other
    questions, or the run going on (``RESUMING``: its result follows in the inbox)."""
    run = outcome.run
    call = None if run is None else next((c for c in run["toolCalls"] if c["toolCallId"] == link.tool_call_id), None)
    if outcome.status == "suspended" and call is not None and call["decision"] is None:
        given, needed = len(call.get("approvals") or []), call.get("approvalsRequired", 1)
        return f"{given} of {needed} approvals given; it still waits for {needed - given} more, by another principal."
    needed = 1 if asked is None else asked.get("approvalsRequired", 1)
    if done == "approved" and needed > 1:
        done = f"approved ({needed} of {needed} approvals)"
    if outcome.status == "suspended":
        waiting = 0 if run is None else sum(c["decision"] is None for c in run["toolCalls"])
        return f"{done}; the run still waits on {waiting} other question(s) (SUSPENDED)."
    runs = "runs now" if done.startswith("approved") else "does not run"
    return f"{done}; the run goes on ({outcome.status.upper()}): the tool {runs}."


@dataclass(frozen=True, kw_only=True)
class Checked:
    """A link past every check of ``Links._check`` but the gate's: what it names, as read, and
    the gate's refusal of its action (``None``: it may decide)."""

    link: Link
    principal: Principal
    doc: SnapshotDocument
    call: ToolCallDocument
    refused: RunsgateError | None


def _gate_refused(refused: RunsgateError, call: ToolCallDocument, recipient: str) -> HTMLResponse:
    """``POST``'s page for the gate's refusal: 409 ``Already approved`` (when and how many are
    given) for one of several approvals given already; else its message, 403 for a grant the
    recipient lacks, 404 a run gone, 409 any other."""
    given = _prior_approval(call, recipient) if isinstance(refused, DuplicateApproverError) else ""
    if given:  # a second click on one of several approvals: said with when it was given
        return _page("Already approved", f"{given}<p>Nothing was changed.</p>", 409)
    status = {"FORBIDDEN": 403, "RUN_NOT_FOUND": 404}.get(refused.code.name, 409)
    return _page("Nothing was decided", f"<p>{html.escape(refused.message)}</p>", status)


class Links:
    """The two routes over one process's settings, store and ``RunManager``."""

    def __init__(self, settings: Settings, signer: LinkSigner) -> None:
        self._settings = settings
        self._signer = signer

    def _recipient(self, link: Link) -> Principal | HTMLResponse:
        """The principal ``link`` decides as, or the 403 page when ``RUNSGATE_API_KEYS`` and
        ``RUNSGATE_RECIPIENTS`` no longer name it."""
        principal = recipient_principal(self._settings, link.recipient)
        if principal is None:
            return _page("Not allowed", f"<p>{html.escape(link.recipient)} is no longer a known principal.</p>", 403)
        return principal

    async def _check(self, request: Request, token: str, *, opening: bool) -> Response | Checked:
        """The one ordered check of ``GET`` (``opening``) and ``POST`` (docs/api.md "Deciding from
        an email"): the link (410 expired, 400 altered), an ``open`` link (GET: 303 to the inbox;
        POST: 400), its recipient (403 no longer configured), the question decided already (409,
        by whom and when), the run or call gone or not of the recipient's resources (404), the
        call asking another question now (409); then the gate, whose refusal of the link's action
        ``Checked.refused`` carries for each route to say (the page's note; ``_gate_refused``)."""
        try:
            link = self._signer.read(token)
        except (LinkExpiredError, LinkInvalidError) as exc:
            return _refused(exc, self._settings.inbox_base_url)
        if link.action == "open":
            if opening:
                inbox = inbox_url(self._settings.inbox_base_url, link.agent_id, link.run_id)
                return RedirectResponse(inbox, status_code=303, headers=HEADERS)
            return _page("This link decides nothing", "<p>It opens the question in the inbox.</p>", 400)
        principal = self._recipient(link)
        if not isinstance(principal, Principal):
            return principal
        store: SnapshotStore = request.app.state.store
        decided = await self._decided(store, link)
        if decided is not None:
            return decided
        doc = await store.get(link.agent_id, link.run_id)
        call = next((c for c in doc["toolCalls"] if c["toolCallId"] == link.tool_call_id), None) if doc else None
        if doc is None or call is None or not principal.may_use_resource(doc["resourceId"]):
            return _page("Nothing to decide here", "<p>This question is no longer waiting for you.</p>", 404)
        if call["decision"] is not None and question_id(call) == link.question_id:
            return _already(call["decision"])  # decided since the events were read: a racing click
        if call["decision"] is not None or question_id(call) != link.question_id:
            return _page(
                "Nothing to decide here",
                "<p>The call no longer asks this question: it was answered, or asks another since. "
                "Nothing was changed.</p>",
                409,
            )
        runs: RunManager = request.app.state.runs
        kind: DecisionKind = "approved" if link.action == "approve" else "declined"  # one refused approving may decline
        refused = await runs.review_queue.refusal_of(doc, doc["toolCalls"].index(call), principal, kind)
        return Checked(link=link, principal=principal, doc=doc, call=call, refused=refused)

    async def show(self, request: Request) -> Response:
        """``GET /links/{token}``: the question and a button; never a decision."""
        token = request.path_params["token"]
        checked = await self._check(request, token, opening=True)
        if not isinstance(checked, Checked):
            return checked
        link, doc, call, refused = checked.link, checked.doc, checked.call, checked.refused
        runs: RunManager = request.app.state.runs
        verb = "Approve" if link.action == "approve" else "Decline"
        button = (
            ""
            if refused is not None
            else '<form method="post" action="/links">'
            f'<input type="hidden" name="token" value="{html.escape(token)}">'
            f'<button type="submit">{verb}</button></form>'
        )
        shown = {"args": call["args"]} if call["requiresApproval"] else {"suspendPayload": call["suspendPayload"]}
        inbox = inbox_url(self._settings.inbox_base_url, link.agent_id, link.run_id)
        body = (
            f"<p><strong>{html.escape(call['toolName'])}</strong>, asked by agent {html.escape(link.agent_id)} "
            f"(run <code>{html.escape(link.run_id)}</code>), waiting since {_when(doc['suspendedAt'])}.</p>"
            f"<pre>{html.escape(json.dumps(shown, indent=2, ensure_ascii=False))}</pre>"
            f"{_claim_warning(runs, call, link.recipient)}"
            f"{_refused_note(refused, call, link.recipient, verb)}"
            f"{f'<p>You decide as <strong>{html.escape(link.recipient)}</strong>.</p>' if button else ''}{button}"
            f'<p><a href="{html.escape(inbox)}">Open in the inbox</a></p>'
        )
        return _page(f"{verb} {call['toolName']}?", body)

    async def decide(self, request: Request) -> Response:
        """``POST /links``: decide as the token's recipient (module docstring)."""
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return _page("This request is too large", "<p>Nothing was changed.</p>", 413)
        token = (parse_qs(body.decode("utf-8", "replace")).get("token") or [""])[0]
        if not token:
            return _page("No link was sent", "<p>The form carries no link token. Nothing was changed.</p>", 400)
        checked = await self._check(request, token, opening=False)
        if not isinstance(checked, Checked):
            return checked
        link, call = checked.link, checked.call
        if checked.refused is not None:
            return _gate_refused(checked.refused, call, link.recipient)
        store: SnapshotStore = request.app.state.store
        runs: RunManager = request.app.state.runs
        decide = runs.approve if link.action == "approve" else runs.decline
        try:
            outcome = await decide(
                link.agent_id,
                link.run_id,
                link.tool_call_id,
                principal=checked.principal,
                question_id=link.question_id,
                wait_for="recorded",
                claiming_review=True,
            )
        except RunsgateError as exc:
            decided = await self._decided(store, link)  # meanwhile, by another click or another person
            if decided is not None:
                return decided
            if isinstance(exc, ReviewAlreadyClaimedError):  # said as the page said it, without ids
                refused = _held(exc.claim, "Your button was refused: nothing was changed.")
                return _page("Nothing was decided", refused, 409)
            return _gate_refused(exc, call, link.recipient)
        done = "approved" if link.action == "approve" else "declined"
        summary = call_summary(call["toolName"], _shown(call))
        return _page(
            f"You {done} {call['toolName']}",
            f"<p>You {done} {html.escape(summary)} on run <code>{html.escape(link.run_id)}</code> "
            f"(agent {html.escape(link.agent_id)}), as <strong>{html.escape(link.recipient)}</strong>.</p>"
            f"<p>Outcome: {html.escape(_outcome(outcome, call, link, done))}</p>",
        )

    async def _decided(self, store: SnapshotStore, link: Link) -> Response | None:
        """The page of a question decided already (by whom, when), or ``None`` while it waits."""
        answered = decided_in_events(await store.list_events(link.agent_id, link.run_id), None, link.question_id)
        if answered is None:
            return None
        return _already(answered.decision)


def _already(decision: Mapping[str, Any]) -> HTMLResponse:
    """The 409 page of a question decided already: how, by whom, when."""
    body = (
        f"<p>This question was already {html.escape(decision['kind'])} by "
        f"<strong>{html.escape(str(decision['decidedBy']))}</strong> at {_when(decision['decidedAt'])}. "
        "Nothing was changed.</p>"
    )
    return _page("Already decided", body, 409)


__all__ = ["HEADERS", "LINK_CSP", "Links", "link_signer", "recipient_principal"]
