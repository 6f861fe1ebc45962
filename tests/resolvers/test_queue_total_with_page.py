"""``reviewQueue``'s ``totalCount`` and its page are read together, as ``suspendedRuns``' are: the
count starts before the page's first read of runs returns, and only when the document selects
``totalCount`` (issue 45, the queue's cost; on DocumentDB the total is its own pass over the runs)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from resolvers import Context, schema
from runtime import RunManager
from runtime.demo import AGENTS
from runtime.registry import AgentRegistry
from storage import MemorySnapshotStore, QueueFilter, QueueKey, SnapshotDocument


class WatchedStore(MemorySnapshotStore):
    """The memory store, noting whether a queue count had started when each queue read returned."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = 0
        self.counting_when_listed: list[bool] = []

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        self.counts += 1
        return await super().count_review_questions(queue_filter)

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        await asyncio.sleep(0)  # a read that waits once, as every real store's does
        self.counting_when_listed.append(self.counts > 0)
        return await super().list_review_runs(queue_filter, limit=limit, after=after)


async def _page(document: str, **variables: Any) -> tuple[WatchedStore, dict[str, Any]]:
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
    return store, result.data["reviewQueue"]


PAGE = "reviewQueue(first: 2)"
TOTAL = "fragment Total on ReviewQueueConnection { totalCount }"


@pytest.mark.parametrize(
    "document",
    [
        f"query {{ {PAGE} {{ totalCount nodes {{ runId }} }} }}",
        f"query {{ {PAGE} {{ ...Total nodes {{ runId }} }} }} {TOTAL}",
        f"query {{ {PAGE} {{ ... on ReviewQueueConnection {{ totalCount }} nodes {{ runId }} }} }}",
    ],
)
async def test_the_queue_total_is_counted_while_the_page_is_read(document: str) -> None:
    store, page = await _page(document)
    assert page["totalCount"] == 3
    assert len(page["nodes"]) == 2
    assert store.counting_when_listed[0] is True
    assert store.counts == 1


@pytest.mark.parametrize(
    "document",
    [
        f"query {{ {PAGE} {{ nodes {{ runId }} }} }}",
        f"query ($on: Boolean!) {{ {PAGE} {{ totalCount @include(if: $on) nodes {{ runId }} }} }}",
        f"query {{ {PAGE} {{ ...Total @skip(if: true) nodes {{ runId }} }} }} {TOTAL}",
    ],
)
async def test_a_queue_total_not_selected_is_not_counted(document: str) -> None:
    store, page = await _page(document, **({"on": False} if "$on" in document else {}))
    assert "totalCount" not in page
    assert len(page["nodes"]) == 2
    assert store.counts == 0


async def test_a_queue_total_with_question_filters_counts_the_same_while_the_page_is_read() -> None:
    """A total the store cannot count (a tool filter: each run's questions checked) is read
    beside the page too, and still counts every matching question once."""
    document = 'query { reviewQueue(first: 2, filter: {toolNames: ["issue_refund"]}) { totalCount nodes { runId } } }'
    store, page = await _page(document)
    assert page["totalCount"] == 3
    assert len(page["nodes"]) == 2
    assert store.counts == 0
