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
