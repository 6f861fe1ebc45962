"""Signed links and email (issue 45 part 5; docs/configuration.md "Signed links and email"): the
secret every instance signs links with, their lifetime, the SMTP server and sender, and the
principals a JWT deployment names as recipients (``RecipientConfig``).

A mixin of ``server.settings.Settings``. With ``RUNSGATE_SMTP_URL`` set, ``RUNSGATE_LINK_SECRET``
and ``RUNSGATE_PUBLIC_URL`` are required: the emails' links would not work without them.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings

from storage import url_credentials

from .bounds import CENTURY
from .security import PrincipalIdentity, Scope

LINK_SECRET_MIN_BYTES = 32
"""The shortest ``RUNSGATE_LINK_SECRET`` accepted (HMAC-SHA256 wants a key as long as its hash)."""

Email = Annotated[str, Field(pattern=r"^[^@\s<>\"]+@[^@\s<>\"]+$", max_length=320)]
"""An email address (``local@domain.tld``), without a display name."""


class RecipientConfig(BaseModel):
    """One entry of ``RUNSGATE_RECIPIENTS``: a principal the server cannot see before it signs in
    (a JWT's subject), with its address and the grants its links decide with."""

    model_config = ConfigDict(extra="forbid")
    principal: PrincipalIdentity
    """As deciders are recorded: ``jwt:<sub>`` (or ``jwt:<iss>|<sub>``)."""
    email: Email
    scopes: list[Scope]
    """What its links may do: ``runs:decide`` and any scope a tool rule names."""
    resources: list[Annotated[str, Field(min_length=1)]] | Literal["*"]


class LinkSettings(BaseSettings):
    """Signed links and email (docs/configuration.md "Signed links and email")."""

    link_secret: SecretStr | None = None
    """Key of the links' HMAC (at least 32 bytes), the same on every instance; unset: no links."""
    link_ttl: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] = 259_200.0
    """Seconds a link stays valid after it was made (default 3 days)."""
    smtp_url: str | None = None
    """``smtp://[user:password@]host[:port]`` (STARTTLS when offered) or ``smtps://...`` (TLS)."""
    smtp_from: Email = "runsgate@localhost"
    """The sender of the emails."""
    recipients: list[RecipientConfig] = Field(default_factory=list)
    """JSON list of ``{principal, email, scopes, resources}`` for JWT principals."""

    @field_validator("smtp_url")
    @classmethod
    def _smtp_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not value.startswith(("smtp://", "smtps://")):
            raise ValueError("must start with smtp:// or smtps://")
        parts = urlsplit(value)
        try:
            parts.port  # noqa: B018 (urllib checks the port when it is read)
        except ValueError:
            raise ValueError("its port must be a number from 1 to 65535") from None
        if parts.port == 0:
            raise ValueError("its port must be a number from 1 to 65535")
        if not parts.hostname:
            raise ValueError("it names no host")
        return value

    @field_validator("link_secret")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().encode()) < LINK_SECRET_MIN_BYTES:
            raise ValueError(
                f"must be at least {LINK_SECRET_MIN_BYTES} bytes of random data, e.g. "
                "`python3 -c 'import secrets; print(secrets.token_urlsafe(48))'`"
            )
        return value

    @model_validator(mode="after")
    def _links_work(self) -> LinkSettings:
        if self.smtp_url is None:
            return self
        shown = url_credentials.masked(self.smtp_url)
        if self.link_secret is None:
            raise ValueError(
                f"RUNSGATE_SMTP_URL is set ({shown}) but RUNSGATE_LINK_SECRET is not: the emails' links are "
                "signed with it, and every instance needs the same one"
            )
        if getattr(self, "public_url", None) is None:
            raise ValueError(
                f"RUNSGATE_SMTP_URL is set ({shown}) but RUNSGATE_PUBLIC_URL is left at its default: the emails' "
                "links would point at this server's bind address, which their readers cannot reach"
            )
        return self


__all__ = ["LINK_SECRET_MIN_BYTES", "LinkSettings", "RecipientConfig"]
