"""The graphql-core executor runsgate runs every operation with: Strawberry's, with two changes.

- Each event of a subscription gets a memo of collected subfields of its own: graphql-core's
  per-event copy (``build_per_event_executor``) shares one keyed by field lists made anew per
  event, so a subscription's memory grew with the events it sent (bench/RESULTS.md "Bounded
  memory"; ``tests/resolvers/test_subscription_memory.py``).
- Variables that do not coerce (``Executor.build``'s errors) are ``VariableCoercionError``s with
  ``extensions.code`` ``BAD_USER_INPUT``, the same over HTTP and WebSocket (docs/api.md).
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

BAD_USER_INPUT = "BAD_USER_INPUT"
"""The ``extensions.code`` of a variable that does not coerce (Apollo Server's name)."""


class PerEventMemo(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's executor whose per-event executors (subscriptions) memoize apart, and whose
    variable coercion errors carry their code."""

    @classmethod
    def build(cls, *args: Any, **kwargs: Any) -> Any:
        """graphql-core's ``Executor.build``: the executor, or its errors (variables that do not
        coerce), each a ``VariableCoercionError``."""
        built = super().build(*args, **kwargs)
        if isinstance(built, list):
            return [_coded(error) for error in built]
        return built

    def build_per_event_executor(self, payload: Any) -> Any:
        """graphql-core's per-event copy, with a memo of collected subfields of its own."""
        executor = super().build_per_event_executor(payload)
        if isinstance(getattr(executor, "_relevant_sub_fields", None), dict):
            executor._relevant_sub_fields = {}
        return executor


class VariableCoercionError(GraphQLError):
    """An error of ``Executor.build``: the operation's variables do not coerce, so it never ran."""


def _coded(error: GraphQLError) -> GraphQLError:
    """``error`` as a ``VariableCoercionError`` with ``extensions.code`` ``BAD_USER_INPUT`` unless
    it has a code (a copy: graphql-core's is left as it is)."""
    if not isinstance(error, GraphQLError):
        return error
    extensions = error.extensions or {}
    return VariableCoercionError(
        error.message,
        nodes=error.nodes,
        original_error=error.original_error,
        extensions=extensions if "code" in extensions else {**extensions, "code": BAD_USER_INPUT},
    )


__all__ = ["BAD_USER_INPUT", "PerEventMemo", "VariableCoercionError"]
