"""``totalCount`` and its page are read together, for ``suspendedRuns`` and ``reviewQueue``
alike: the count starts before the page's read returns, and only when the document selects
``totalCount`` (issue 44, DocumentDB pages; issue 45, the queue's cost)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from resolvers import Context, schema
from runtime import RunManager
from runtime.demo import AGENTS
from runtime.registry import AgentRegistry
from storage import MemorySnapshotStore, QueueFilter, QueueKey, RunFilter, SnapshotDocument
from storage.protocol import EVERY_RUN, RunPage


class WatchedStore(MemorySnapshotStore):
    """The memory store, noting whether a count had started when each listing read returned."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = 0
        self.counting_when_listed: list[bool] = []

    async def _listed(self) -> None:
        await asyncio.sleep(0)  # a read that waits once, as every real store's does
        self.counting_when_listed.append(self.counts > 0)

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        self.counts += 1
        return await super().count_runs(agent_id, run_filter)

    async def list_runs(
        self, agent_id: str, run_filter: RunFilter, window: RunPage = EVERY_RUN
    ) -> list[SnapshotDocument]:
        await self._listed()
        return await super().list_runs(agent_id, run_filter, window)

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        self.counts += 1
        return await super().count_review_questions(queue_filter)

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        await self._listed()
        return await super().list_review_runs(queue_filter, limit=limit, after=after)


LISTINGS = {
    "suspendedRuns": ('suspendedRuns(agentId: "refund-agent", first: 2)', "SuspendedRunConnection"),
    "reviewQueue": ("reviewQueue(first: 2)", "ReviewQueueConnection"),
}


async def _page(field: str, document: str, **variables: Any) -> tuple[WatchedStore, dict[str, Any]]:
    store = WatchedStore()
    agents = AgentRegistry(AGENTS)
    runs = RunManager(store, agents, instance_id="test")
    for _ in range(3):
        assert (await runs.start_run("refund-agent", "Please refund order 1042")).status == "suspended"
    result = await schema.execute(
        document, variable_values=variables, context_value=Context(store=store, runs=runs, agents=agents)
    )
    assert result.errors is None, result.errors
    assert result.data is not None
    return store, result.data[field]


def _documents(*shapes: str) -> list[Any]:
    """Each shape (``{page}``, ``{type}``) for each listing, as ``(field, document)`` params."""
    return [
        pytest.param(field, shape.format(page=page, type=type_), id=f"{field}-{n}")
        for field, (page, type_) in LISTINGS.items()
        for n, shape in enumerate(shapes)
    ]


TOTAL = "fragment Total on {type} {{ totalCount }}"


@pytest.mark.parametrize(
    ("field", "document"),
    _documents(
        "query {{ {page} {{ totalCount nodes {{ runId }} }} }}",
        "query {{ {page} {{ ...Total nodes {{ runId }} }} }} " + TOTAL,
        "query {{ {page} {{ ... on {type} {{ totalCount }} nodes {{ runId }} }} }}",
    ),
)
async def test_the_total_is_counted_while_the_page_is_read(field: str, document: str) -> None:
    store, page = await _page(field, document)
    assert page["totalCount"] == 3
    assert len(page["nodes"]) == 2
    assert store.counting_when_listed[0] is True
    assert store.counts == 1


@pytest.mark.parametrize(
    ("field", "document"),
    _documents(
        "query {{ {page} {{ nodes {{ runId }} }} }}",
        "query ($on: Boolean!) {{ {page} {{ totalCount @include(if: $on) nodes {{ runId }} }} }}",
        "query {{ {page} {{ ...Total @skip(if: true) nodes {{ runId }} }} }} " + TOTAL,
    ),
)
async def test_a_total_not_selected_is_not_counted(field: str, document: str) -> None:
    store, page = await _page(field, document, **({"on": False} if "$on" in document else {}))
    assert "totalCount" not in page
    assert len(page["nodes"]) == 2
    assert store.counts == 0


async def test_a_queue_total_with_question_filters_counts_the_same_while_the_page_is_read() -> None:
    """A total the store cannot count (a tool filter: each run's questions checked) is read
    beside the page too, and still counts every matching question once."""
    document = 'query { reviewQueue(first: 2, filter: {toolNames: ["issue_refund"]}) { totalCount nodes { runId } } }'
    store, page = await _page("reviewQueue", document)
    assert page["totalCount"] == 3
    assert len(page["nodes"]) == 2
    assert store.counts == 0
