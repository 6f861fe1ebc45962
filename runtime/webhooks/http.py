"""One webhook attempt over HTTP: the signed POST, and as little of the answer as it needs.

The answer is streamed and its body read raw, up to ``ANSWER_PREFIX_BYTES`` and only when the
status is not 2xx or 3xx; that prefix goes to the delivery's ``lastError``, without the receiver
URL's path segments and query values. Why: SECURITY.md "Webhooks".
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx2

from storage import WebhookDeliveryDocument

from .messages import AttemptResult, WebhookEndpoint

ANSWER_PREFIX_BYTES: Final = 256
"""Bytes of a failed answer's body kept in the delivery record; the rest is never read."""
SECRET_PART_LENGTH: Final = 6
"""Path segments and query values of a receiver's URL this long or longer are cut out of the
prefix kept (a token in the URL, as in ``/services/T000/B000/XXXX``)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


async def post_delivery(
    client: httpx2.AsyncClient, endpoint: WebhookEndpoint, delivery: WebhookDeliveryDocument, *, limit: float
) -> tuple[AttemptResult, int | None, str | None]:
    """POST ``delivery`` to ``endpoint``, signed afresh (Standard Webhooks), within ``limit``
    seconds in all.

    Returns:
        How the attempt ended, the answer's HTTP status (``None`` without an answer), and why it
        failed (``None`` when delivered): ``answered 500: <prefix of the body>``, ``answered 307:
        redirects are not followed``, a timeout or the kind of network error.
    """
    sent_at = datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "accept-encoding": "identity",
        "user-agent": "runsgate-webhooks",
        "webhook-id": delivery["_id"],
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": endpoint.signer.sign(delivery["_id"], sent_at, delivery["body"]),
    }
    try:
        async with (
            asyncio.timeout(limit),
            client.stream("POST", endpoint.url, content=delivery["body"].encode(), headers=headers) as response,
        ):
            code = response.status_code
            if 200 <= code < 300:
                return "delivered", code, None
            if 300 <= code < 400:
                return "redirect", code, f"answered {code}: redirects are not followed"
            prefix = await _prefix(response)
    except (httpx2.TimeoutException, TimeoutError):
        return "timeout", None, "no answer in time (connect or read timeout)"
    except httpx2.HTTPError as exc:
        return "network_error", None, f"request failed: {type(exc).__name__}"
    shown = shown_prefix(prefix, endpoint.url)
    return "http_error", code, f"answered {code}" + (f": {shown}" if shown else "")


async def _prefix(response: httpx2.Response) -> bytes:
    """The first ``ANSWER_PREFIX_BYTES`` of the raw body; the rest is left unread."""
    kept = bytearray()
    async for chunk in response.aiter_raw():
        kept += chunk[: ANSWER_PREFIX_BYTES - len(kept)]
        if len(kept) >= ANSWER_PREFIX_BYTES:
            break
    return bytes(kept)


def shown_prefix(prefix: bytes, url: str) -> str:
    """``prefix`` as text for the delivery record: decoded (invalid UTF-8 replaced), without the
    parts of ``url`` that may carry a credential (``SECRET_PART_LENGTH``), control characters
    escaped, at most ``ANSWER_PREFIX_BYTES`` of UTF-8, stripped."""
    text = prefix.decode("utf-8", "replace")
    for part in sorted(_secret_parts(url), key=len, reverse=True):
        text = text.replace(part, "[url]")
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    return text.encode()[:ANSWER_PREFIX_BYTES].decode("utf-8", "ignore").strip()


def _secret_parts(url: str) -> set[str]:
    parts = urlsplit(url)
    pieces = [segment for segment in parts.path.split("/") if segment]
    pieces += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
    found = {piece for piece in pieces if len(piece) >= SECRET_PART_LENGTH}
    return found | {unquote(piece) for piece in found} | ({parts.query} if parts.query else set())


__all__ = ["ANSWER_PREFIX_BYTES", "SECRET_PART_LENGTH", "post_delivery", "shown_prefix"]
