"""The runsgate schema: an Apollo Federation v2 subgraph (Strawberry's federation schema).

``schema.graphql`` at the repository root is this schema printed (``strawberry export-schema
resolvers.schema:schema``); a test fails when it is stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import lru_cache, partial
from typing import Any

from graphql import GraphQLError, GraphQLSchema
from graphql.language import DocumentNode
from strawberry.extensions import ParserCache, SchemaExtension
from strawberry.schema.config import StrawberryConfig

from .access import AccessDenied
from .agents import Agent
from .compiled import CompiledExecutor
from .errors import USER_ERROR_TYPES, ErrorMasking, QueryArgumentError
from .federation import FederationSchema
from .metrics import OperationMetrics
from .mutations import Mutation
from .prepared import PreparedOperations, all_covered
from .queries import Query
from .scalars import DateTime
from .subscriptions import Subscription
from .types import SuspendedRun

logger = logging.getLogger("runsgate.graphql")


class _ByIdentity:
    """A hashable stand-in for an object, equal only to itself (``is``); it keeps the object alive."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByIdentity) and other.value is self.value


@lru_cache(maxsize=256)
def _validate(schema: GraphQLSchema, document: _ByIdentity, rules: tuple[Any, ...]) -> list[GraphQLError]:
    from strawberry.schema.schema import validate_document

    return validate_document(schema, document.value, rules)  # type: ignore[arg-type]


class DocumentValidationCache(SchemaExtension):
    """Strawberry's ``ValidationCache`` (an LRU of 256 validated documents), keyed by the parsed
    document's identity.

    ``ParserCache`` returns the same ``DocumentNode`` for the same query text, and Strawberry's
    cache then looks it up by its hash, which graphql-core computes by walking the whole
    document on every request (about 100 calls for the benchmark's page query, 4% of its CPU
    time). The same document object is the same document, so its identity is the key here; a
    document parsed anew (no ``ParserCache``) is a miss, as a new text would be. Same results
    as ``ValidationCache``: ``tests/server/test_validation_cache.py``.
    """

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        assert isinstance(document, DocumentNode)  # parsed before validation
        context.pre_execution_errors = _validate(
            context.schema._schema, _ByIdentity(document), tuple(context.validation_rules)
        )
        yield


def should_mask_error(error: GraphQLError) -> bool:
    """Mask unexpected faults (never show internals); keep the client's own mistakes.

    Request errors (syntax, validation, variable coercion such as a DateTime without offset)
    have no ``path`` and are the client's to see; so are ``QueryArgumentError``s. Anything else
    raised while executing a field is masked ("Unexpected error.") and logged with its traceback,
    except a store outage, which ``ErrorMasking`` reports as ``STORE_UNAVAILABLE``.
    """
    original = error.original_error
    if original is None or not error.path or isinstance(original, QueryArgumentError | AccessDenied):
        return False
    logger.error("unexpected error in %s", error.path, exc_info=original)
    return True


def build_schema(
    *,
    extensions: Sequence[Callable[[], SchemaExtension]] = (),
    max_batch: int = 0,
    extra_extensions: Sequence[type[SchemaExtension] | Callable[[], SchemaExtension]] = (),
    compiled_execution: bool = True,
) -> FederationSchema:
    """A fresh schema object (same SDL every time).

    Args:
        extensions: More extensions, run before the caches (the server's request limits:
            depth, tokens, aliases, introspection; see ``server/limits.py``).
        max_batch: Operations allowed in one batched HTTP request; 0 turns batching off.
        extra_extensions: Extensions added after runsgate's own, e.g. the OpenTelemetry
            extension when tracing is configured (``server.tracing``).
        compiled_execution: Complete qualifying objects of query results with compiled
            serializers (``resolvers.compiled.CompiledExecutor``), and run query documents seen
            before as prepared operations (``resolvers.prepared``; only when every extension is
            one it covers); same responses. False runs every request through Strawberry's
            pipeline and every field through graphql-core's executor.
    """
    masking = partial(ErrorMasking, should_mask_error=should_mask_error)
    prepared = PreparedOperations(masking()._process_errors) if compiled_execution else None
    factories: list[Callable[[], SchemaExtension]] = [
        masking,
        *extensions,
        partial(ParserCache, maxsize=256),
        DocumentValidationCache,
        OperationMetrics,
        *extra_extensions,
    ]
    if prepared is not None and not all_covered(factories):
        prepared = None  # an extension whose effect a prepared operation would skip
    built = FederationSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        types=[SuspendedRun, Agent, *USER_ERROR_TYPES],
        execution_context_class=CompiledExecutor if compiled_execution else None,
        config=StrawberryConfig(
            scalar_map={datetime: DateTime},
            batching_config={"max_operations": max_batch} if max_batch > 0 else None,
        ),
        extensions=[*factories, *([prepared.recorder] if prepared is not None else [])],
    )
    built.prepared_operations = prepared
    return built


schema = build_schema()
