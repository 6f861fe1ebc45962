"""Prometheus metrics of the GraphQL layer: operations (count, latency, errors) and decisions.

In prometheus_client's default registry (``server.observability.metrics`` serves them, unauthenticated). Label
values are bounded and none is a client's choice: ``operation_name`` is the executed operation's
name when the server knows it (``KNOWN_OPERATION_NAMES``: its own clients', plus the operator's
``set_operation_names``), else ``other`` (``anonymous`` unnamed, ``unknown`` none executed);
``operation_type``, ``kind`` and ``outcome`` come from fixed sets (docs/operations.md "Metrics").
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from graphql import OperationDefinitionNode
from prometheus_client import Counter, Histogram
from strawberry.extensions import SchemaExtension

from runtime import ErrorCode

KNOWN_OPERATION_NAMES = frozenset(
    {
        # the reviewer inbox (scripts/inbox/src/documents.js)
        "InboxFeatures",
        "InboxAgents",
        "InboxRuns",
        "InboxRunNow",
        "InboxLinkedRun",
        "InboxApprove",
        "InboxDecline",
        "InboxResume",
        "InboxDecideMany",
        "InboxEvents",
        "InboxRunUpdates",
        "InboxQueue",
        "InboxClaimReview",
        "InboxReleaseReview",
        "InboxQueueEvents",
        "InboxRunOutcome",
        # README.md, docs/api.md and examples/
        "StartRun",
        "SuspendedRuns",
        "Approve",
        "Decide",
    }
)
"""The operation names of runsgate's own clients, counted under their own name."""
MAX_OPERATION_NAMES = 200
"""Names the operator may add (``set_operation_names``, ``RUNSGATE_METRICS_OPERATION_NAMES``)."""

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Histogram buckets, seconds: mutations run agents, so the tail reaches a minute."""

GRAPHQL_REQUESTS = Counter(
    "runsgate_graphql_requests",
    "GraphQL operations handled, by operation name and type.",
    ["operation_name", "operation_type"],
)
GRAPHQL_ERRORS = Counter(
    "runsgate_graphql_errors",
    "GraphQL operations whose response had top-level errors, by operation name and type.",
    ["operation_name", "operation_type"],
)
GRAPHQL_LATENCY = Histogram(
    "runsgate_graphql_request_duration_seconds",
    "Time to handle a GraphQL operation (parse, validate, execute; a prepared operation only executes), seconds.",
    ["operation_name", "operation_type"],
    buckets=LATENCY_BUCKETS,
)
DECISIONS = Counter(
    "runsgate_decisions",
    "Decisions asked for through approveToolCall / declineToolCall / resumeRun, by kind and outcome.",
    ["kind", "outcome"],
)

COMPILED_COMPLETIONS = Counter(
    "runsgate_graphql_compiled_completions",
    "Objects of query results that a compiled serializer tried to complete (resolvers/fastpath/compiled.py): "
    "outcome `compiled`, or `fallback` when graphql-core completed them instead.",
    ["outcome"],
)
COMPILED = COMPILED_COMPLETIONS.labels("compiled")
COMPILED_FALLBACK = COMPILED_COMPLETIONS.labels("fallback")

DecisionKind = Literal["approve", "decline", "resume"]
for _kind in ("approve", "decline", "resume"):
    for _outcome in ("recorded", "conflict"):
        DECISIONS.labels(_kind, _outcome)  # present at 0 from the start

_names: frozenset[str] = KNOWN_OPERATION_NAMES


def set_operation_names(extra: Iterable[str]) -> None:
    """Count the operations named ``extra`` (the operator's, ``RUNSGATE_METRICS_OPERATION_NAMES``)
    under their own name too, besides ``KNOWN_OPERATION_NAMES``, in this process.

    Raises:
        ValueError: More than ``MAX_OPERATION_NAMES`` names.
    """
    global _names
    names = frozenset(extra)
    if len(names) > MAX_OPERATION_NAMES:
        raise ValueError(f"at most {MAX_OPERATION_NAMES} operation names, got {len(names)}")
    _names = KNOWN_OPERATION_NAMES | names


def operation_labels(definition: OperationDefinitionNode | None) -> tuple[str, str]:
    """``(operation_name, operation_type)`` label values of the operation that ran: its name when
    known (``KNOWN_OPERATION_NAMES``, ``set_operation_names``), else ``other``; ``anonymous``
    when it has none, ``("unknown", "unknown")`` when none ran."""
    if definition is None:
        return "unknown", "unknown"
    kind = definition.operation.value
    if definition.name is None:
        return "anonymous", kind
    name = definition.name.value
    return (name if name in _names else "other"), kind


@dataclass(frozen=True, slots=True)
class OperationLabels:
    """The metric children of one ``(operation_name, operation_type)``, looked up once."""

    requests: Any
    latency: Any
    errors: Any

    def observe(self, elapsed: float, *, failed: bool) -> None:
        """Count one operation that took ``elapsed`` seconds (and its errors when ``failed``)."""
        self.requests.inc()
        self.latency.observe(elapsed)
        if failed:
            self.errors.inc()


_children: dict[tuple[str, str], OperationLabels] = {}


def operation_metrics(document: object, operation_name: str | None) -> OperationLabels:
    """The metric children of the operation of ``document`` that runs under ``operation_name``.

    prometheus_client's ``labels()`` takes a lock and builds a key on every call (about 10 µs
    for the three metrics); the children are kept here instead (label values are bounded,
    module docstring).
    """
    labels = operation_labels(_executed_operation(document, operation_name))
    found = _children.get(labels)
    if found is None:
        found = _children[labels] = OperationLabels(
            GRAPHQL_REQUESTS.labels(*labels), GRAPHQL_LATENCY.labels(*labels), GRAPHQL_ERRORS.labels(*labels)
        )
    return found


class OperationMetrics(SchemaExtension):
    """Counts each GraphQL operation and observes its duration (``on_operation``; no per-field cost)."""

    def on_operation(self) -> Iterator[None]:
        started = time.perf_counter()
        failed = True  # unless the operation returns a result without errors
        try:
            yield
            result = self.execution_context.result
            failed = bool(self.execution_context.pre_execution_errors or (result is not None and result.errors))
        finally:  # also when parsing raised (a syntax error, an unknown operation name)
            elapsed = time.perf_counter() - started
            context = self.execution_context
            operation_metrics(context.graphql_document, context.operation_name).observe(elapsed, failed=failed)


def _executed_operation(document: object, name: str | None) -> OperationDefinitionNode | None:
    definitions = getattr(document, "definitions", None) or ()
    operations = [d for d in definitions if isinstance(d, OperationDefinitionNode)]
    if name is None:
        return operations[0] if len(operations) == 1 else None
    return next((op for op in operations if op.name is not None and op.name.value == name), None)


def decision_outcome(code: ErrorCode | None) -> str:
    """The ``outcome`` label of a decision: ``recorded`` (no error), ``conflict`` or the error code."""
    if code is None:
        return "recorded"
    if code is ErrorCode.TOOL_CALL_ALREADY_DECIDED:
        return "conflict"
    return str(code.value).lower()
