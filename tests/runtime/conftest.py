"""Fixtures of the runtime tests: a memory store, the registry (demo + test agents), a manager,
and an ``Instance`` (a manager with its event feed and update feed) with ``update_kinds`` to read
what its subscribers saw."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pydantic_ai import models

from runtime import AgentRegistry, EventFeed, RunManager, RunUpdateFeed
from runtime.demo import AGENTS, LEDGER
from storage import MemorySnapshotStore, SnapshotStore

from . import agents

models.ALLOW_MODEL_REQUESTS = False  # scripted FunctionModels only; never a real model


@pytest.fixture(autouse=True)
def _clean_side_effects() -> Iterator[None]:
    LEDGER.clear()
    agents.reset()
    yield
    LEDGER.clear()
    agents.reset()


@pytest.fixture
def registry() -> AgentRegistry:
    return AgentRegistry({**AGENTS, **agents.TEST_AGENTS})


@pytest.fixture
async def memory_store() -> AsyncIterator[MemorySnapshotStore]:
    store = MemorySnapshotStore()
    await store.open()
    yield store
    await store.close()


@pytest.fixture
def manager(memory_store: MemorySnapshotStore, registry: AgentRegistry) -> RunManager:
    """A manager over the memory store."""
    return RunManager(memory_store, registry, instance_id="instance-a")


@pytest.fixture
def any_manager(store: SnapshotStore, registry: AgentRegistry) -> RunManager:
    """A manager over each store in turn (memory, then MongoDB when a server is available)."""
    return RunManager(store, registry, instance_id="instance-a")


class Instance:
    """One manager with its event feed and update feed (what a server process builds); ``feed``
    are more ``RunUpdateFeed`` options. Feeds poll every 50 ms."""

    def __init__(self, store: SnapshotStore, registry: AgentRegistry, name: str, **feed: Any) -> None:
        self.runs = RunManager(store, registry, instance_id=name)
        self.events = EventFeed(store, poll_interval=0.05, lookback=2.0)
        self.updates = RunUpdateFeed(self.runs, self.events, poll_interval=0.05, **feed)

    def subscribe(self, agent_id: str, run_id: str, **kwargs: Any) -> Any:
        return self.updates.subscribe(agent_id, run_id, **kwargs)

    async def close(self) -> None:
        await self.runs.close()
        await self.events.close()


@pytest.fixture
async def instance(memory_store: MemorySnapshotStore, registry: AgentRegistry) -> AsyncIterator[Instance]:
    """An ``Instance`` over the memory store with the test module's ``registry``, closed after."""
    one = Instance(memory_store, registry, "instance-a")
    yield one
    await one.close()


def update_kinds(updates: list[Any]) -> list[str]:
    """The kinds of run updates in order, consecutive text deltas as one ``text``."""
    kinds: list[str] = []
    for update in updates:
        if not (update.kind == "text" and kinds and kinds[-1] == "text"):
            kinds.append(update.kind)
    return kinds
