"""The runsgate schema: an Apollo Federation v2 subgraph (Strawberry's federation schema).

``schema.graphql`` at the repository root is this schema printed (``strawberry export-schema
resolvers.schema:schema``); a test fails when it is stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

from graphql import GraphQLError
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache
from strawberry.schema.config import StrawberryConfig

from .access import AccessDenied
from .agents import Agent
from .errors import USER_ERROR_TYPES, ErrorMasking, QueryArgumentError
from .federation import FederationSchema
from .metrics import OperationMetrics
from .mutations import Mutation
from .queries import Query
from .scalars import DateTime
from .subscriptions import Subscription
from .types import SuspendedRun

logger = logging.getLogger("runsgate.graphql")


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
) -> FederationSchema:
    """A fresh schema object (same SDL every time).

    Args:
        extensions: More extensions, run before the caches (the server's request limits:
            depth, tokens, aliases, introspection; see ``server/limits.py``).
        max_batch: Operations allowed in one batched HTTP request; 0 turns batching off.
        extra_extensions: Extensions added after runsgate's own, e.g. the OpenTelemetry
            extension when tracing is configured (``server.tracing``).
    """
    return FederationSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        types=[SuspendedRun, Agent, *USER_ERROR_TYPES],
        config=StrawberryConfig(
            scalar_map={datetime: DateTime},
            batching_config={"max_operations": max_batch} if max_batch > 0 else None,
        ),
        extensions=[
            partial(ErrorMasking, should_mask_error=should_mask_error),
            *extensions,
            partial(ParserCache, maxsize=256),
            partial(ValidationCache, maxsize=256),
            OperationMetrics,
            *extra_extensions,
        ],
    )


schema = build_schema()
