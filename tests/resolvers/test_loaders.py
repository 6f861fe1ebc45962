"""Per-item fields are batched: one store query for a whole page (Strawberry DataLoader)."""

from __future__ import annotations

from collections.abc import Sequence

from resolvers import Context, schema
from runtime import RunManager
from runtime.demo import AGENTS
from runtime.registry import AgentRegistry
from storage import EventDocument, MemorySnapshotStore

PAGE_WITH_EVENTS = """
query Page($agentId: ID!) {
  suspendedRuns(agentId: $agentId, first: 10) { nodes { runId events { type } } }
}
"""


class CountingStore(MemorySnapshotStore):
    """The memory store, counting the event queries it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.event_queries: list[list[str]] = []

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        self.event_queries.append(list(run_ids))
        return await super().list_events_of_runs(agent_id, run_ids, resource_ids=resource_ids)


async def test_events_of_a_page_of_runs_are_read_in_one_query() -> None:
    # given three suspended refund runs
    store = CountingStore()
    agents = AgentRegistry(AGENTS)
    runs = RunManager(store, agents, instance_id="test")
    for _ in range(3):
        assert (await runs.start_run("refund-agent", "Please refund order 1042")).status == "suspended"
    store.event_queries.clear()

    # when a page selects each run's events
    result = await schema.execute(
        PAGE_WITH_EVENTS,
        variable_values={"agentId": "refund-agent"},
        context_value=Context(store=store, runs=runs, agents=agents),
    )

    # then every run has its events, read by a single query for the page
    assert result.errors is None
    assert result.data is not None
    nodes = result.data["suspendedRuns"]["nodes"]
    assert len(nodes) == 3
    assert all([e["type"] for e in node["events"]] == ["started", "suspended"] for node in nodes)
    assert len(store.event_queries) == 1
    assert sorted(store.event_queries[0]) == sorted(node["runId"] for node in nodes)


PAGE = "query Page($agentId: ID!) { suspendedRuns(agentId: $agentId, first: 10) { nodes { runId } } }"
PAGE_WITH_CONVERSATIONS = """
query Page($agentId: ID!) {
  suspendedRuns(agentId: $agentId, first: 10) {
    nodes { runId conversation { totalMessages } short: conversation(maxBytes: 10) { truncated } }
  }
}
"""


class HistoryCountingStore(MemorySnapshotStore):
    """The memory store, counting the histories it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.history_reads: list[str] = []

    async def load_history(self, agent_id: str, run_id: str, *, history_id: str | None = None) -> bytes | None:
        self.history_reads.append(run_id)
        return await super().load_history(agent_id, run_id, history_id=history_id)


async def test_a_page_reads_histories_only_when_it_selects_conversations_and_then_once_per_run() -> None:
    # given three suspended refund runs
    store = HistoryCountingStore()
    agents = AgentRegistry(AGENTS)
    runs = RunManager(store, agents, instance_id="test")
    for _ in range(3):
        assert (await runs.start_run("refund-agent", "Please refund order 1042")).status == "suspended"
    store.history_reads.clear()

    async def page(document: str) -> list[dict[str, object]]:
        result = await schema.execute(
            document,
            variable_values={"agentId": "refund-agent"},
            context_value=Context(store=store, runs=runs, agents=agents),
        )
        assert result.errors is None
        assert result.data is not None
        nodes: list[dict[str, object]] = result.data["suspendedRuns"]["nodes"]
        return nodes

    # when a page does not select the conversation, no history is read
    assert len(await page(PAGE)) == 3
    assert store.history_reads == []

    # when it selects it twice, with two limits, each run's history is read once
    nodes = await page(PAGE_WITH_CONVERSATIONS)
    assert [(n["conversation"], n["short"]) for n in nodes] == [({"totalMessages": 4}, {"truncated": True})] * 3
    assert sorted(store.history_reads) == sorted(str(n["runId"]) for n in nodes)
