"""Credentials in a URL, read so that no part of a secret is ever shown (SECURITY.md).

A URL's user information runs from its ``scheme://`` to the LAST ``@`` of the text, whatever it
holds: a password may hold ``@``, ``/``, ``?``, ``#`` or ``:`` unescaped, which RFC 3986's reading
would show as a path, a query or a host. An ``@`` after the host makes the masked part longer,
never shorter; ``scheme:///`` (``sqlite:///path``) has none. The values of query options that
carry a secret (``...password``, ``...token``, ``authMechanismProperties``...) are masked too.
"""

from __future__ import annotations

import re

_AUTHORITY = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://(?!/)")
"""Where a URL's authority begins (just after ``scheme://``), unless it is empty."""
_PLAIN_USER = re.compile(r"[A-Za-z0-9._~!$&*+=;-]+")
"""A user name shown before ``:***``: one without a character that could end or quote something."""
RESERVED = frozenset("@/?")
"""Characters that end the user information under RFC 3986 before its ``@`` (``#`` too, which
PyMongo reads as part of a password)."""
MASK = "***"
_SECRET_OPTION = re.compile(
    r"(?i)[?&](?:[a-z0-9_.-]*(?:password|secret|token|credential)[a-z0-9_.-]*|authMechanismProperties)="
    r"([^&#\s'\"]*)"
)
"""A query option whose value is a secret, up to the next option, fragment, quote or space."""


def userinfo_span(text: str) -> tuple[int, int] | None:
    """``(start, end)`` of the user information of the first URL in ``text`` (``text[start:end]``,
    before its last ``@``), or ``None`` when no ``scheme://`` of it is followed by an ``@``. A
    text without ``://`` whose part before its last ``@`` holds ``:`` (``user:pass@host``, a URL
    missing its scheme) has one from its start."""
    at = text.rfind("@")
    if at < 0:
        return None
    found = _AUTHORITY.search(text, 0, at)
    if found is not None:
        return found.end(), at
    if "://" not in text[:at] and ":" in text[:at]:
        return 0, at
    return None


def masked(text: str) -> str:
    """``text`` with the user information of its URL (``userinfo_span``) replaced: ``user:***``
    when it starts with a plain user name and ``:``, else ``***``; and the value of each secret
    query option (``tlsCertificateKeyFilePassword=***``). Where the two overlap (an ``@`` in an
    option's value, an option's name in a password), their union is masked as one."""
    spans = [found.span(1) for found in _SECRET_OPTION.finditer(text) if found.end(1) > found.start(1)]
    userinfo = userinfo_span(text)
    if userinfo is not None:
        spans.append(userinfo)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    shown, at = [], 0
    for start, end in merged:
        user, colon, _ = text[start : userinfo[1]].partition(":") if userinfo and start == userinfo[0] else ("", "", "")
        shown += [text[at:start], f"{user}:{MASK}" if colon and _PLAIN_USER.fullmatch(user) else MASK]
        at = end
    return "".join([*shown, text[at:]])


def after_credentials(url: str) -> str:
    """What follows ``scheme://`` once the user information is cut (``host:port/path?query``)."""
    span = userinfo_span(url)
    if span is not None:
        return url[span[1] + 1 :]
    return url.partition("://")[2]


def holds_reserved(url: str) -> bool:
    """Whether the user information of ``url`` holds ``@``, ``/`` or ``?`` unescaped: RFC 3986
    (and PyMongo) would read a part of it as the host, the path or the query."""
    span = userinfo_span(url)
    return span is not None and not RESERVED.isdisjoint(url[span[0] : span[1]])


__all__ = ["MASK", "RESERVED", "after_credentials", "holds_reserved", "masked", "userinfo_span"]
