"""The compiled execution path ("fast path"), behind one seam: ``install``.

runsgate answers GraphQL through Strawberry's standard pipeline. This package adds, when
``RUNSGATE_COMPILED_EXECUTION`` is on (the default), three shortcuts giving the same responses
byte for byte:

- compiled completion (``compiled``): objects whose selected fields are plain attributes are
  serialized by generated code instead of graphql-core's per-field execution;
- prepared operations (``prepared``, ``schema``, ``http``): a query document that parsed and
  validated once is executed directly on later requests, skipping Strawberry's request
  parsing, extension hooks, parse and validation;
- root plans (``root_plan``): a prepared query with a single root field returning an object is
  resolved and completed without building graphql-core's executor.

``resolvers.schema.build_schema`` calls ``install`` once, and only when compiled execution is
on; nothing else imports this package, so with ``RUNSGATE_COMPILED_EXECUTION=false`` it is never
loaded (``tests/resolvers/test_fastpath_seam.py``). The HTTP view reaches it only through the
schema (``PreparedSchema.run_prepared``).

The fast path depends on private names of Strawberry and graphql-core. All of them are used
in ``internals`` and nowhere else in runsgate; ``install`` checks them every time it builds a
schema, and if one is missing or changed it logs one WARNING and returns the standard schema,
so every request takes Strawberry's standard path (nothing fails per request).
``pyproject.toml`` pins Strawberry and graphql-core to the minor versions tested here.

Checking a new Strawberry or graphql-core version:

1. raise the upper bound in ``pyproject.toml`` and run ``./dev run uv lock --upgrade-package
   strawberry-graphql`` (or ``graphql-core``); the next ``./dev`` command installs it;
2. start any app, or run ``./dev run python -c "from resolvers.fastpath import internals;
   print(internals.missing())"``: an empty list means every private name is there;
3. run the differential tests, which send every query document of the test suite and generated
   ones to a compiled app and a standard app and compare the responses byte for byte:
   ``./dev run pytest tests/server/test_compiled_differential.py tests/resolvers/test_compiled_fallbacks.py
   tests/server/test_prepared_operations.py tests/resolvers/test_root_plan.py
   tests/resolvers/test_fastpath_seam.py``;
4. if ``internals.missing()`` names something, adapt ``internals`` (and only it), or keep the
   old pin: runsgate still serves every request through the standard path meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension

from ..federation import FederationSchema
from . import internals

logger = logging.getLogger("runsgate.graphql")


def install(
    *,
    extensions: Sequence[Callable[[], SchemaExtension]],
    mask_errors: Callable[[list[GraphQLError]], list[GraphQLError]],
    **schema_options: Any,
) -> FederationSchema:
    """A schema with the fast path: ``PreparedSchema`` with ``CompiledExecutor`` as its executor,
    and prepared operations when every extension is one they cover (``prepared.all_covered``).

    Args:
        extensions: The schema's extension factories (``resolvers.schema.build_schema``).
        mask_errors: ``ErrorMasking.mask`` of the schema's error masking.
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
            "See resolvers/fastpath/__init__.py to check a new version.",
            version("strawberry-graphql"),
            version("graphql-core"),
            ", ".join(problems),
        )
        return FederationSchema(extensions=list(extensions), **schema_options)

    from .compiled import CompiledExecutor
    from .prepared import PreparedOperations, all_covered
    from .schema import PreparedSchema

    prepared = PreparedOperations(mask_errors) if all_covered(extensions) else None
    built = PreparedSchema(
        execution_context_class=CompiledExecutor,
        extensions=[*extensions, *([prepared.recorder] if prepared is not None else [])],
        **schema_options,
    )
    built.prepared_operations = prepared
    return built


__all__ = ["install"]
