"""The compiled execution path ("fast path"), behind one seam: ``install``, which
``resolvers.schema.build_schema`` calls once when ``RUNSGATE_COMPILED_EXECUTION`` is on. Its
shortcuts, same responses byte for byte: compiled completion (``compiled``), prepared operations
(``prepared``, ``schema``; served over HTTP by ``server.view.prepared_http``) and root plans
(``root_plan``). The private names of Strawberry and graphql-core it needs are in ``internals``
alone. How it plugs in, and how to check a new Strawberry: docs/architecture.md "Fast path".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension

from ..federation import FederationSchema
from . import internals

logger = logging.getLogger("runsgate.graphql")


@dataclass(frozen=True)
class Pieces:
    """The shortcuts ``install`` puts in: all of them, unless a benchmark turns one off
    (``bench/pieces.py``)."""

    compiled_completion: bool = True
    """``CompiledExecutor`` as the executor; off, root plans are off too (they complete with it)."""
    prepared_operations: bool = True
    """Prepared operations (and so root plans, and the server's prepared requests)."""
    root_plans: bool = True
    """Root plans of prepared queries."""


EVERY_PIECE = Pieces()


def install(
    *,
    extensions: Sequence[Callable[[], SchemaExtension]],
    mask_errors: Callable[[list[GraphQLError]], list[GraphQLError]],
    pieces: Pieces = EVERY_PIECE,
    **schema_options: Any,
) -> FederationSchema:
    """A schema with the fast path: ``PreparedSchema`` with ``CompiledExecutor`` as its executor,
    and prepared operations when every extension is one they cover (``prepared.all_covered``).

    Args:
        extensions: The schema's extension factories (``resolvers.schema.build_schema``).
        mask_errors: ``ErrorMasking.mask`` of the schema's error masking.
        pieces: The shortcuts to put in (default: all).
        schema_options: ``FederationSchema``'s other keyword arguments (query, types, config...).

    Returns:
        The standard ``FederationSchema`` instead, after one WARNING, when a private name of
        Strawberry or graphql-core the fast path needs is missing (``internals.missing``).
    """
    problems = internals.missing()
    if problems:
        logger.warning(
            "compiled execution is OFF: strawberry-graphql %s / graphql-core %s lack or changed %s, "
            "which it needs; every request takes Strawberry's standard path (same responses, slower). "
            "See docs/architecture.md (Fast path) to check a new version.",
            version("strawberry-graphql"),
            version("graphql-core"),
            ", ".join(problems),
        )
        return FederationSchema(extensions=list(extensions), **schema_options)

    from .compiled import CompiledExecutor
    from .prepared import PreparedOperations, all_covered
    from .schema import PreparedSchema

    prepared = None
    if pieces.prepared_operations and all_covered(extensions):
        prepared = PreparedOperations(mask_errors, root_plans=pieces.root_plans and pieces.compiled_completion)
    built = PreparedSchema(
        execution_context_class=CompiledExecutor if pieces.compiled_completion else None,
        # the recorder first: made and entered as the schema's execute has just asked the prepared
        # operations; its one hook reads what validated once the operation is over, so its place
        # among the others changes nothing
        extensions=[*([prepared.recorder] if prepared is not None else []), *extensions],
        **schema_options,
    )
    built.prepared_operations = prepared
    if prepared is not None:
        prepared.bind(built)
    return built


__all__ = ["EVERY_PIECE", "Pieces", "install"]
