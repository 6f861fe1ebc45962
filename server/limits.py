"""Request limits (SECURITY.md): body size before parsing, and GraphQL document limits.

- ``BodySizeLimit``: an ASGI middleware that answers 413 when a request body is larger than
  ``RUNSGATE_MAX_BODY_BYTES``, judged on ``Content-Length`` when given and on the bytes
  actually received otherwise (chunked bodies), before the app reads or parses anything.
- ``graphql_extensions``: Strawberry's ``QueryDepthLimiter``, ``MaxTokensLimiter`` and
  ``MaxAliasesLimiter``, and ``DisableIntrospection`` when introspection is off.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from graphql import ASTValidationRule
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from strawberry.extensions import (
    AddValidationRules,
    DisableIntrospection,
    MaxTokensLimiter,
    SchemaExtension,
    max_aliases,
    query_depth_limiter,
)

from .http_errors import refusal_body
from .settings import SecuritySettings


class BodySizeLimit:
    """Refuse HTTP request bodies over ``max_bytes`` with 413, before the app sees them.

    The body is read here (at most ``max_bytes`` of it) and handed to the app in one piece.
    A ``Content-Length`` that is not a number gets 400.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            if not declared.isdigit():
                await _answer(send, 400, "invalid Content-Length")
                return
            if int(declared) > self.max_bytes:
                await _answer(send, 413, f"request body larger than {self.max_bytes} bytes")
                return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await _answer(send, 413, f"request body larger than {self.max_bytes} bytes")
                return
            if not message.get("more_body", False):
                break
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps(refusal_body(message, status)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def graphql_extensions(settings: SecuritySettings) -> list[Callable[[], SchemaExtension]]:
    """The schema extensions that enforce the configured document limits.

    Depth and aliases are validation rules (Strawberry's ``QueryDepthLimiter`` and
    ``MaxAliasesLimiter`` validators), built once here and added by one ``AddValidationRules``:
    those extensions build a new rule class each time they are created, that is for every
    request, and a new class in the rules defeats the ``ValidationCache`` (its key holds the
    rules), so every request would be validated again. Tokens are a parser option
    (``MaxTokensLimiter``).
    """
    rules: list[type[ASTValidationRule]] = [
        query_depth_limiter.create_validator(settings.max_query_depth, None, None),
        max_aliases.create_validator(settings.max_aliases),
    ]
    extensions: list[Callable[[], SchemaExtension]] = [
        partial(AddValidationRules, rules),
        partial(MaxTokensLimiter, max_token_count=settings.max_query_tokens),
    ]
    if not settings.introspection:
        extensions.append(DisableIntrospection)
    return extensions


__all__ = ["BodySizeLimit", "graphql_extensions"]
