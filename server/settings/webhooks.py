"""Webhook settings (docs/webhooks.md): the receivers, the public URL of inbox links, the retry
schedule and timeouts.

A mixin of ``server.settings.Settings`` (same ``RUNSGATE_`` prefix, same ``.env``). Every receiver
is checked at start: an http(s) URL without credentials, known event types, and a secret of the
form ``whsec_<base64>`` whose key is 24 to 64 bytes. Error messages name the receiver by its
position and never quote the secret; the secret is kept as a ``SecretStr``, so it appears in no
log or ``repr`` either.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from .bounds import CENTURY, DAY, HOUR

if TYPE_CHECKING:  # runtime is imported when a receiver is configured: reading settings stays light
    from runtime import RetryPolicy, WebhookEndpoint

SECRET_PREFIX = "whsec_"
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64


CREDENTIALS = "must not carry credentials (user:password@) nor an '@'; authenticate receivers by the signature"
"""The refusal of a receiver or public URL holding an ``@``: a password holding ``/``, ``?`` or ``#``
would end ``urlsplit``'s netloc before its ``@``, and be read as the host, path or query."""


def _check_url(value: str) -> str:
    if "@" in value:
        raise ValueError(CREDENTIALS)
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError("must be an absolute http:// or https:// URL")
    return value


class WebhookConfig(BaseModel):
    """One receiver of ``RUNSGATE_WEBHOOKS``."""

    model_config = ConfigDict(extra="forbid")
    """An unknown key (``agentID``) is refused, never ignored: it could widen what a receiver gets."""

    url: str
    """Where deliveries are POSTed: an http(s) URL, configured by the operator (never a client)."""
    secret: SecretStr
    """``whsec_`` + base64 of 24 to 64 random bytes (``runsgate`` never logs it)."""
    events: Annotated[list[str], Field(min_length=1)]
    """Webhook event types it receives: ``run.suspended``, ``run.decided``, ``call.expired``,
    ``run.completed``, ``run.failed``."""
    agentIds: list[Annotated[str, Field(min_length=1)]] | None = None
    """Only events of these agents; absent: every agent."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _check_url(value)

    @field_validator("events")
    @classmethod
    def _events(cls, value: list[str]) -> list[str]:
        from runtime import WEBHOOK_EVENTS

        unknown = sorted(set(value) - WEBHOOK_EVENTS)
        if unknown:
            raise ValueError(f"unknown event type(s) {unknown}; known: {sorted(WEBHOOK_EVENTS)}")
        return value

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: SecretStr) -> SecretStr:
        text = value.get_secret_value()
        if not text.startswith(SECRET_PREFIX):
            raise ValueError(f"must start with {SECRET_PREFIX} (the Standard Webhooks secret format)")
        encoded = text.removeprefix(SECRET_PREFIX)
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"must be {SECRET_PREFIX} followed by standard base64") from None
        if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
            raise ValueError(
                f"must encode {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes (it encodes {len(key)}); "
                f"make one with: python -c \"import base64, os; print('{SECRET_PREFIX}' + "
                'base64.b64encode(os.urandom(32)).decode())"'
            )
        return value

    def to_endpoint(self) -> WebhookEndpoint:
        """The runtime's endpoint."""
        from runtime import WebhookEndpoint

        return WebhookEndpoint(
            url=self.url,
            secret=self.secret.get_secret_value(),
            events=frozenset(self.events),
            agent_ids=None if self.agentIds is None else frozenset(self.agentIds),
        )


class WebhookSettings(BaseSettings):
    """Webhooks (docs/webhooks.md, docs/configuration.md)."""

    webhooks: list[WebhookConfig] = Field(default_factory=list)
    """JSON list of ``{url, secret, events, agentIds?}``; empty: no webhooks."""
    public_url: str | None = None
    """Base URL people reach this server at, for the inbox links of webhook payloads
    (``{public_url}/inbox?agentId=...&runId=...``). Unset: ``http://{host}:{port}``."""
    webhook_retry_for: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] = 86_400.0
    """Seconds after an event during which its delivery is retried; then it is marked failed."""
    webhook_backoff: Annotated[float, Field(gt=0, le=DAY, allow_inf_nan=False)] = 5.0
    """Seconds before the first retry; doubled after each failed attempt (with jitter)."""
    webhook_backoff_max: Annotated[float, Field(gt=0, le=DAY, allow_inf_nan=False)] = 3_600.0
    """Cap on the delay between two attempts, seconds."""
    webhook_connect_timeout: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 5.0
    """Seconds to open a connection to a receiver."""
    webhook_read_timeout: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 10.0
    """Seconds to wait for a receiver's answer (each read)."""
    webhook_poll_interval: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 1.0
    """Seconds between two reads of the event log for new deliveries (and looks for due ones)."""
    webhook_delivery_retention: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] = 604_800.0
    """Seconds a delivered or failed delivery is kept (7 days; ``webhookDeliveries`` lists it)
    before the sweeper deletes it; a pending one is never deleted. Must exceed
    ``RUNSGATE_SUBSCRIPTION_LOOKBACK``, the span of events the dispatcher reads again."""

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return None if not value else _check_url(value).rstrip("/")

    @field_validator("webhooks")
    @classmethod
    def _distinct_urls(cls, value: list[WebhookConfig]) -> list[WebhookConfig]:
        urls = [webhook.url for webhook in value]
        if len(set(urls)) != len(urls):
            raise ValueError("each receiver's url must appear once (merge their events)")
        return value

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retry schedule of these settings."""
        from runtime import RetryPolicy

        return RetryPolicy(
            retry_for=self.webhook_retry_for, initial_delay=self.webhook_backoff, max_delay=self.webhook_backoff_max
        )


__all__ = ["WebhookConfig", "WebhookSettings"]
