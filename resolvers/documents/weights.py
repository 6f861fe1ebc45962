"""What each field of the schema costs (docs/api.md "Query cost"): points per object, per
``JSON`` value, per started KiB of ``conversation(maxBytes)``, per mutation, and the sizes assumed
for lists the request does not size (``FIELD_COSTS``). ``resolvers.documents.cost`` sums them over
a document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

OBJECT: Final = 1
"""Points for each object (of an object, interface or union type) an answer may hold."""
JSON_VALUE: Final = 1
"""Points for each ``JSON`` value an answer may hold (arguments, payloads, schemas, event data)."""
KIB: Final = 1024
"""``conversation(maxBytes)`` costs a point per started KiB of text, beside its objects."""
TOTAL_COUNT: Final = 1
"""Points for a connection's ``totalCount``: a count in the store."""
MUTATION: Final = 10
"""Points for a mutation root field (each may run an agent), per decision for ``decideToolCalls``."""
TOOL_CALLS: Final = 5
"""Tool calls assumed per run (``toolCalls``)."""
EVENTS: Final = 10
"""Events assumed per run (``events``, ``runEvents``)."""
MESSAGES: Final = 10
"""Messages assumed per conversation (``messages``); their text is counted by ``maxBytes``."""
APPROVALS: Final = 2
"""Approvals assumed per tool call (``approvals``)."""
PROBLEMS: Final = 10
"""Problems assumed per refused input (``problems``)."""
TOOL_WALK: Final = 1000
"""Points for ``reviewQueue`` filtered by tools: its ``totalCount`` reads every waiting run holding
a pending call of one (O(those runs), no kept count per tool), its page up to 2,000 runs; a tenth
of the default limit, so a request holds at most nine."""
QUEUE_EVENT: Final = 2
"""Points for each ``reviewQueueEvents`` message beside its objects: the run read from the store
and the gate's check of its questions."""

MAX_CONVERSATION_BYTES: Final = 1024 * 1024
"""The largest ``conversation(maxBytes)`` accepted (the least is 1)."""

PAGE: Final = "page"
"""A connection's ``FieldCost.page``: its page size is the request's, else the default."""
OF_PAGE_SIZE: Final = "of page"
"""A list's ``FieldCost.size``: the page size of the field it is in."""
AGENTS: Final = "agents"
"""A list's ``FieldCost.size``: the registered agents."""


@dataclass(frozen=True)
class ArgumentRange:
    """The values an integer argument may take, ``least`` to ``most`` inclusive: outside them the
    request is refused before it runs (``resolvers.documents.cost``)."""

    name: str
    least: int
    most: int


@dataclass(frozen=True)
class FieldCost:
    """How one field of the schema costs, beside ``OBJECT`` for each object it answers.

    Attributes:
        points: Points for the field itself (a ``JSON`` value, a mutation, a count).
        per_kib: The argument in bytes whose every started KiB adds a point (``maxBytes``).
        page: ``"page"`` for a connection: its page size is the request's ``page.perPage``,
            ``first`` or ``last``, else ``RequestLimits.max_page_size``, and is the size of its lists
            marked ``"of page"``; or the path of a list argument whose length is the page size.
        size: For a list: a number of items assumed, ``"of page"`` (the enclosing field's page),
            ``"agents"`` (the registered agents), or the path of a list argument (its length).
        points_per_page: Points per item of the field's page (``decideToolCalls``' decisions).
        ranges: Its integer arguments' ranges, checked with the cost (``maxBytes``).
        points_if_given: ``(path, points)``: points more when the argument at ``path`` is given
            (``reviewQueue``'s ``filter.toolNames``).
    """

    points: int = 0
    per_kib: str | None = None
    page: str | tuple[str, ...] | None = None
    size: int | str | tuple[str, ...] | None = None
    points_per_page: int = 0
    ranges: tuple[ArgumentRange, ...] = ()
    points_if_given: tuple[tuple[str, ...], int] | None = None


CONNECTION = FieldCost(page=PAGE)
OF_PAGE = FieldCost(size=OF_PAGE_SIZE)

FIELD_COSTS: Final[dict[str, FieldCost]] = {
    "Query.suspendedRuns": CONNECTION,
    "Query.webhookDeliveries": CONNECTION,
    "Query.reviewQueue": FieldCost(page=PAGE, points_if_given=(("filter", "toolNames"), TOOL_WALK)),
    "ReviewQueueConnection.nodes": OF_PAGE,
    "ReviewQueueConnection.edges": OF_PAGE,
    "ReviewQueueConnection.totalCount": FieldCost(points=TOTAL_COUNT),
    "Subscription.reviewQueueEvents": FieldCost(points=QUEUE_EVENT),
    "Query.agents": FieldCost(size=AGENTS),
    "Query.runEvents": FieldCost(size=EVENTS),
    "Query._entities": FieldCost(size=("representations",)),
    "Agent.suspendedRuns": CONNECTION,
    "SuspendedRunConnection.nodes": OF_PAGE,
    "SuspendedRunConnection.edges": OF_PAGE,
    "SuspendedRunConnection.totalCount": FieldCost(points=TOTAL_COUNT),
    "WebhookDeliveryConnection.nodes": OF_PAGE,
    "WebhookDeliveryConnection.edges": OF_PAGE,
    "SuspendedRun.toolCalls": FieldCost(size=TOOL_CALLS),
    "SuspendedRun.events": FieldCost(size=EVENTS),
    "SuspendedRun.conversation": FieldCost(
        per_kib="maxBytes", ranges=(ArgumentRange("maxBytes", 1, MAX_CONVERSATION_BYTES),)
    ),
    "Conversation.messages": FieldCost(size=MESSAGES),
    "SuspendedToolCall.approvals": FieldCost(size=APPROVALS),
    "InvalidResumeData.problems": FieldCost(size=PROBLEMS),
    "InvalidToolArguments.problems": FieldCost(size=PROBLEMS),
    "Mutation.startRun": FieldCost(points=MUTATION),
    "Mutation.approveToolCall": FieldCost(points=MUTATION),
    "Mutation.declineToolCall": FieldCost(points=MUTATION),
    "Mutation.resumeRun": FieldCost(points=MUTATION),
    "Mutation.retryRun": FieldCost(points=MUTATION),
    "Mutation.decideToolCalls": FieldCost(page=("input", "decisions"), points_per_page=MUTATION),
    "Mutation.claimReview": FieldCost(points=MUTATION),
    "Mutation.releaseReview": FieldCost(points=MUTATION),
    "DecideToolCallsResult.results": OF_PAGE,
}
"""Every field that costs more than ``OBJECT`` per object it answers (``JSON`` fields cost
``JSON_VALUE`` without being listed), by ``Type.field``; every list of objects is here."""


__all__ = [
    "AGENTS",
    "APPROVALS",
    "CONNECTION",
    "EVENTS",
    "FIELD_COSTS",
    "JSON_VALUE",
    "KIB",
    "MAX_CONVERSATION_BYTES",
    "MESSAGES",
    "MUTATION",
    "OBJECT",
    "OF_PAGE",
    "OF_PAGE_SIZE",
    "PAGE",
    "PROBLEMS",
    "QUEUE_EVENT",
    "TOOL_CALLS",
    "TOTAL_COUNT",
    "ArgumentRange",
    "FieldCost",
]
