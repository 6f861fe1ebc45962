"""The runsgate schema: an Apollo Federation v2 subgraph (Strawberry's federation schema).

``schema.graphql`` at the repository root is this schema printed (``strawberry export-schema
resolvers.schema:schema``); a test fails when it is stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from graphql import GraphQLError
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache
from strawberry.schema.config import StrawberryConfig

from .access import AccessDenied
from .agents import Agent
from .documents.cost import QueryCost
from .documents.executor import PerEventMemo
from .documents.limits import install_input_limits
from .documents.operation_name import OperationNameRequired
from .errors import USER_ERROR_TYPES, QueryArgumentError, error_masking
from .federation import FederationSchema
from .metrics import OperationMetrics
from .mutations import Mutation
from .reads.queries import Query
from .scalars import JSON, JSON_SCALAR, DateTime
from .streams.subscriptions import Subscription
from .types import SuspendedRun

logger = logging.getLogger("runsgate.graphql")

install_input_limits([Query, Mutation, Subscription, Agent])  # every argument held to resolvers.documents.limits

CACHE_SIZE = 256
"""Documents kept by the parser cache and the validation cache (Strawberry's LRUs)."""


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
            depth, tokens, aliases, introspection; see ``server/http/limits.py``).
        max_batch: Operations allowed in one batched HTTP request; 0 turns batching off.
        extra_extensions: Extensions added after runsgate's own, e.g. the OpenTelemetry
            extension when tracing is configured (``server.observability.tracing``).
        compiled_execution: Install the fast path (``resolvers.fastpath.install``): compiled
            serializers, prepared operations (only when every extension is one they cover) and
            root plans; same responses. False runs every request through Strawberry's pipeline
            and every field through graphql-core's executor, and never imports
            ``resolvers.fastpath``.
    """
    masking = error_masking(should_mask_error)
    factories: list[Callable[[], SchemaExtension]] = [
        masking,
        *extensions,
        partial(ParserCache, maxsize=CACHE_SIZE),
        partial(ValidationCache, maxsize=CACHE_SIZE),
        OperationNameRequired,  # after ValidationCache, whose errors it adds to
        QueryCost,  # once the document validated (it reads the errors of both)
        OperationMetrics,
        *extra_extensions,
    ]
    options: dict[str, Any] = {
        "query": Query,
        "mutation": Mutation,
        "subscription": Subscription,
        "types": [SuspendedRun, Agent, *USER_ERROR_TYPES],
        "config": StrawberryConfig(
            scalar_map={datetime: DateTime, JSON: JSON_SCALAR},
            batching_config={"max_operations": max_batch} if max_batch > 0 else None,
        ),
    }
    if compiled_execution:
        from .fastpath import install  # the only import of the fast path

        return install(extensions=factories, mask_errors=masking().mask, **options)
    return FederationSchema(extensions=factories, execution_context_class=PerEventMemo, **options)


schema = build_schema(compiled_execution=False)
"""The schema as Strawberry runs it (for ``strawberry export-schema``, introspection and tools);
the server builds its own with ``build_schema``."""
