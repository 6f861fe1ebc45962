"""Fixtures of the runtime tests: a memory store, the registry (demo + test agents), a manager."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic_ai import models

from runtime import AgentRegistry, RunManager
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
