"""Signed links (issue 45 part 5; SECURITY.md "Signed links"): ``LinkSigner`` makes and reads the
token of a link naming a recipient, a question and an action, signed with HMAC-SHA256
(``itsdangerous``), stamped with its time and carrying its own expiry (``exp``, signed with it).
A token read after its expiry (one made before tokens carried it: ``ttl`` seconds after it was
made) is ``LinkExpiredError``; one altered, or signed with another secret, ``LinkInvalidError``.
That a link is used once is the decision's business (the question's identity, and an idempotency
key named after the token's ``jti``), not the token's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal

from itsdangerous import BadSignature, TimestampSigner, URLSafeTimedSerializer

LinkAction = Literal["approve", "decline", "open"]
"""What a link asks: approve or decline the question, or open it in the inbox."""

SALT = "runsgate.link.v1"
"""Separates the links' signatures from any other use of the same secret."""


class LinkInvalidError(ValueError):
    """The token was altered, cut short, or signed with another secret."""


class LinkExpiredError(ValueError):
    """The token is genuine but older than the links' lifetime; ``made_at`` is when it was made,
    ``link`` what it names (to point its reader to the question in the inbox)."""

    def __init__(self, made_at: datetime | None, link: Link | None = None) -> None:
        super().__init__("the link expired")
        self.made_at = made_at
        self.link = link


@dataclass(frozen=True, kw_only=True)
class Link:
    """What a token names.

    Attributes:
        jti: The token's own id (random): the idempotency key of the decision it makes.
        recipient: The principal identity it decides as (``key:<name>``, ``jwt:<sub>``).
        agent_id, run_id, tool_call_id, question_id: The question.
        action: ``LinkAction``.
    """

    jti: str
    recipient: str
    agent_id: str
    run_id: str
    tool_call_id: str
    question_id: str
    action: LinkAction


class LinkSigner:
    """Makes and reads link tokens with one secret (``RUNSGATE_LINK_SECRET``).

    Args:
        secret: The shared secret.
        ttl: Seconds a new token is valid (written in it as ``exp``), and those of a token made
            before tokens carried ``exp``.
        clock: Seconds since the epoch, now (``time.time``).
    """

    def __init__(self, secret: str, *, ttl: float, clock: Callable[[], float] = time.time) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive (seconds)")

        class Stamp(TimestampSigner):
            def get_timestamp(self) -> int:
                return int(clock())

        self._serializer = URLSafeTimedSerializer(secret, salt=SALT, signer=Stamp)
        self._clock = clock
        self.ttl = ttl

    def make(
        self, *, recipient: str, agent_id: str, run_id: str, tool_call_id: str, question_id: str, action: LinkAction
    ) -> str:
        """A new token (URL-safe text) naming these, with a new ``jti``."""
        link = Link(
            jti=uuid.uuid4().hex,
            recipient=recipient,
            agent_id=agent_id,
            run_id=run_id,
            tool_call_id=tool_call_id,
            question_id=question_id,
            action=action,
        )
        return str(self._serializer.dumps({**asdict(link), "exp": int(self._clock() + self.ttl)}))

    def read(self, token: str) -> Link:
        """The ``Link`` a token names.

        Raises:
            LinkExpiredError: Genuine, but past its ``exp`` (without one: made more than ``ttl``
                seconds ago).
            LinkInvalidError: Anything else that is not a token this secret made.
        """
        try:
            fields, made = self._serializer.loads(token, return_timestamp=True)
            fields = dict(fields)
            expires = fields.pop("exp", None)
            link = Link(**fields)
        except (BadSignature, UnicodeError, ValueError, TypeError):
            raise LinkInvalidError("the link is not valid") from None
        if expires is None:
            expires = made.timestamp() + max(1, round(self.ttl))  # made before tokens carried their expiry
        elif not isinstance(expires, int) or isinstance(expires, bool):
            raise LinkInvalidError("the link is not valid")
        if self._clock() > expires:
            raise LinkExpiredError(made.astimezone(UTC), link)
        if link.action not in ("approve", "decline", "open"):
            raise LinkInvalidError("the link is not valid")
        return link


__all__ = ["Link", "LinkAction", "LinkExpiredError", "LinkInvalidError", "LinkSigner"]
