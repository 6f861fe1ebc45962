"""Request limits (SECURITY.md): body size before parsing, and GraphQL document limits.

- ``BodySizeLimit``: an ASGI middleware that answers 413 when a request body is larger than
  ``RUNSGATE_MAX_BODY_BYTES``, judged on ``Content-Length`` when given and on the bytes
  actually received otherwise (chunked bodies), before the app reads or parses anything.
- ``graphql_extensions``: the depth and alias limits (``document_shape_rule``, time linear in
  the document, fragments included), Strawberry's ``MaxTokensLimiter``, a bounded
  overlapping-fields check (``bound_overlap_checks``), ``DisableIntrospection`` when it is off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import orjson
from graphql import ASTValidationRule, GraphQLError, ValidationContext
from graphql.language import (
    DocumentNode,
    FieldNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)
from graphql.validation.rules import overlapping_fields_can_be_merged
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from strawberry.extensions import AddValidationRules, DisableIntrospection, MaxTokensLimiter, SchemaExtension

from resolvers.documents.fragments import dependency_order, fragment_definitions

from ..settings import SecuritySettings
from .http_errors import refusal_body

logger = logging.getLogger("runsgate.graphql")


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
    body = orjson.dumps(refusal_body(message, status))
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


class _Shape(NamedTuple):
    """What the depth and alias limits need of a selection set, its fragments included."""

    height: int
    """The deepest level of a field in it (its own fields at 0; -1: none), not counting what
    lies below an introspection field (``__schema``...), as Strawberry's limiter counts."""
    aliases: int
    """Aliased fields in it, each spread counting its fragment's again (the inlined count)."""


def _shape(selection_set: SelectionSetNode, fragments: dict[str, _Shape]) -> _Shape:
    """The shape of ``selection_set``, with the shapes of the fragments it spreads (a spread of a
    fragment not in ``fragments`` adds nothing); iterative, so any nesting is fine."""
    height, aliases = -1, 0
    stack: list[tuple[SelectionSetNode, int | None]] = [(selection_set, 0)]  # level None: below introspection
    while stack:
        node, level = stack.pop()
        for selection in node.selections:
            if isinstance(selection, FieldNode):
                aliases += selection.alias is not None
                if level is not None:
                    height = max(height, level)
                if selection.selection_set is not None:
                    below = None if level is None or selection.name.value.startswith("__") else level + 1
                    stack.append((selection.selection_set, below))
            elif isinstance(selection, InlineFragmentNode):
                stack.append((selection.selection_set, level))
            elif isinstance(selection, FragmentSpreadNode) and (spread := fragments.get(selection.name.value)):
                aliases += spread.aliases
                if level is not None and spread.height >= 0:
                    height = max(height, level + spread.height)
    return _Shape(height, aliases)


def document_shapes(document: DocumentNode) -> list[tuple[OperationDefinitionNode, _Shape]]:
    """Each operation of ``document`` with its shape: every fragment is summarized once, in
    dependency order (``resolvers.documents.fragments``), so this takes time linear in the document."""
    definitions = fragment_definitions(document)
    fragments: dict[str, _Shape] = {}
    for name in dependency_order(definitions):
        fragments[name] = _shape(definitions[name].selection_set, fragments)
    return [
        (definition, _shape(definition.selection_set, fragments))
        for definition in document.definitions
        if isinstance(definition, OperationDefinitionNode)
    ]


def document_shape_rule(max_depth: int, max_aliases: int) -> type[ASTValidationRule]:
    """A validation rule refusing an operation deeper than ``max_depth`` (root fields at 0,
    introspection fields' selections not counted) and a document of more than ``max_aliases``
    aliases (over all its operations, each spread counting its fragment's), with the messages
    of Strawberry's ``QueryDepthLimiter`` and ``MaxAliasesLimiter``, in time linear in the
    document: those expand a fragment again at every spread (2^n work for n fragments that each
    spread the one before twice)."""

    class DocumentShapeRule(ASTValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            shapes = document_shapes(context.document)
            for operation, shape in shapes:
                if shape.height > max_depth:
                    name = operation.name.value if operation.name else "anonymous"
                    context.report_error(
                        GraphQLError(f"'{name}' exceeds maximum operation depth of {max_depth}", operation)
                    )
            total = sum(shape.aliases for _, shape in shapes)
            if total > max_aliases:
                context.report_error(GraphQLError(f"{total} aliases found. Allowed: {max_aliases}"))

    return DocumentShapeRule


OVERLAP_CHECK_BUDGET = 5_000
"""The work graphql-core's ``OverlappingFieldsCanBeMergedRule`` may do on one document, in its
own units (``MAX_COMPLEXITY_BUDGET``: a comparison of two fields is 2), where it allows 500,000.
Its work grows with the square of the fields sharing a response name (``{ a a a ... }``) and of
the fragments spread in one selection set; past the budget it stops the validation ("Validation
aborted."). Every query of the README, the inbox and the tests spends under 100."""


def bound_overlap_checks(budget: int = OVERLAP_CHECK_BUDGET) -> bool:
    """Give graphql-core's overlapping-fields rule ``budget`` for each document (its module's
    ``MAX_COMPLEXITY_BUDGET``, read when the rule starts); False, after one WARNING, when the
    installed graphql-core has no such budget (the rule's work is then unbounded)."""
    module: Any = overlapping_fields_can_be_merged
    if not isinstance(getattr(module, "MAX_COMPLEXITY_BUDGET", None), int):
        logger.warning(
            "graphql-core has no MAX_COMPLEXITY_BUDGET: its overlapping-fields check of a document is unbounded"
        )
        return False
    module.MAX_COMPLEXITY_BUDGET = budget
    return True


def graphql_extensions(settings: SecuritySettings) -> list[Callable[[], SchemaExtension]]:
    """The schema extensions that enforce the configured document limits.

    Depth and aliases are one validation rule (``document_shape_rule``), built once here and
    added by one ``AddValidationRules``: a new rule class per request would defeat the
    ``ValidationCache`` (its key holds the rules), and every request would be validated again.
    Tokens are a parser option (``MaxTokensLimiter``). The overlapping-fields check of
    graphql-core gets a bounded budget (``bound_overlap_checks``).
    """
    bound_overlap_checks()
    rules: list[type[ASTValidationRule]] = [document_shape_rule(settings.max_query_depth, settings.max_aliases)]
    extensions: list[Callable[[], SchemaExtension]] = [
        partial(AddValidationRules, rules),
        partial(MaxTokensLimiter, max_token_count=settings.max_query_tokens),
    ]
    if not settings.introspection:
        extensions.append(DisableIntrospection)
    return extensions


__all__ = [
    "OVERLAP_CHECK_BUDGET",
    "BodySizeLimit",
    "bound_overlap_checks",
    "document_shape_rule",
    "document_shapes",
    "graphql_extensions",
]
