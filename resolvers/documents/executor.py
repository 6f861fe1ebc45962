"""The graphql-core executor runsgate runs every operation with (Strawberry's, one change).

graphql-core 3.3 executes each event of a subscription with a copy of the subscription's
executor (``Executor.build_per_event_executor``: ``copy(self)``), and a copy shares its memo of
collected subfields (``collect_subfields``), which is keyed by the identity of a field list that
every event makes anew. So each event sent added an entry, kept as long as the subscription ran:
about 1.6 KB per event, 805 MiB for five subscriptions replaying 100,000 events
(bench/RESULTS.md "Bounded memory"). ``PerEventMemo`` gives each event's executor a memo of its
own; what a subscription holds no longer grows with the events it sends
(``tests/resolvers/test_subscription_memory.py``).
"""

from __future__ import annotations

from typing import Any

from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext


class PerEventMemo(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's executor whose per-event executors (subscriptions) memoize apart."""

    def build_per_event_executor(self, payload: Any) -> Any:
        """graphql-core's per-event copy, with a memo of collected subfields of its own."""
        executor = super().build_per_event_executor(payload)
        if isinstance(getattr(executor, "_relevant_sub_fields", None), dict):
            executor._relevant_sub_fields = {}
        return executor


__all__ = ["PerEventMemo"]
