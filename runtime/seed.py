"""The data generator behind ``runsgate seed`` and ``RUNSGATE_SEED_RUNS`` (docs/benchmarks.md "Test data").

``seed_store`` runs the demo agents (scripted models, offline) on a scratch memory store, then
bulk-inserts ``SeedPlan.runs`` clones of their snapshots and histories into the target store,
each with its own run id, history id, thread, resource and creation time (UTC), so a seeded run
can really be decided. The same ``seed`` gives the same runs; seeded runs have no events.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from runtime import RunManager
from runtime.demo import AGENTS as DEMO_AGENTS
from runtime.registry import AgentRegistry
from storage import MemorySnapshotStore, SnapshotDocument, SnapshotStore, ToolCallDocument, utcnow

TEMPLATE_PROMPTS: dict[str, list[str]] = {
    "refund-agent": [
        "Please refund order 1042",
        "Please refund orders 1042 and 1043",
        "Refund order 5512, the parcel never arrived",
        "I want my money back for order 7781",
    ],
    "weather-agent": ["What's the weather like?", "Should I take an umbrella today?"],
}
"""Demo agents whose runs can be cloned alone, and the prompts that make them suspend. The
supervisor is left out: its run stands for an inner run of another agent, which a clone of the
outer run alone would not have."""

SEEDABLE_AGENTS = list(TEMPLATE_PROMPTS)
"""``--agents A`` takes the first A of these ids."""

_UUID4_BITS = (4 << 76) | (0x8 << 60)
_UUID4_MASK = ~((0xF << 76) | (0xC << 60))

BATCH_SIZE = 5_000
"""Runs per ``insert_many`` call."""


@dataclass(frozen=True, kw_only=True)
class SeedPlan:
    """What to generate.

    Attributes:
        runs: Number of suspended runs to write (>= 0).
        agents: How many of ``SEEDABLE_AGENTS`` get runs (1..2), round robin.
        threads: Distinct thread ids (>= 1).
        resources: Distinct resource ids (>= 1); defaults to ``max(1, threads // 4)``.
        days: Creation times are spread over this many days before now.
        seed: Random seed; the same plan writes the same runs (except for ``now``).
    """

    runs: int
    agents: int = 1
    threads: int = 100
    resources: int | None = None
    days: float = 30.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.runs < 0:
            raise ValueError("runs must be >= 0")
        if not 1 <= self.agents <= len(SEEDABLE_AGENTS):
            raise ValueError(f"agents must be between 1 and {len(SEEDABLE_AGENTS)} ({', '.join(SEEDABLE_AGENTS)})")
        if self.threads < 1:
            raise ValueError("threads must be >= 1")
        if self.resources is not None and self.resources < 1:
            raise ValueError("resources must be >= 1")
        if self.days <= 0:
            raise ValueError("days must be > 0")


Template = tuple[SnapshotDocument, bytes]


async def make_templates(agent_ids: list[str]) -> dict[str, list[Template]]:
    """Run each demo agent once per template prompt; return its stored runs and histories.

    Raises:
        RuntimeError: A demo agent did not suspend (the demo changed).
    """
    scratch = MemorySnapshotStore()
    manager = RunManager(scratch, AgentRegistry(DEMO_AGENTS), instance_id="runsgate-seed")
    templates: dict[str, list[Template]] = {}
    for agent_id in agent_ids:
        for prompt in TEMPLATE_PROMPTS[agent_id]:
            outcome = await manager.start_run(agent_id, prompt, principal="runsgate-seed")
            doc = await scratch.get(agent_id, outcome.run_id)
            history = await scratch.load_history(agent_id, outcome.run_id)
            if outcome.status != "suspended" or doc is None or history is None:
                raise RuntimeError(f"demo agent {agent_id!r} did not suspend on {prompt!r}")
            templates.setdefault(agent_id, []).append((doc, history))
    return templates


class _Cloner:
    """Makes the clones of a plan, batch by batch, from a seeded random generator."""

    def __init__(self, plan: SeedPlan, templates: dict[str, list[Template]], now: datetime) -> None:
        self._plan = plan
        self._templates = [templates[a] for a in SEEDABLE_AGENTS[: plan.agents]]
        self._rng = random.Random(plan.seed)
        self._now = now
        self._span_ms = int(plan.days * 86_400_000)
        self._threads = [f"thread-{k}" for k in range(plan.threads)]
        self._resources = [f"customer-{k}" for k in range(plan.resources or max(1, plan.threads // 4))]
        """Shared strings: a million runs hold references, not copies."""

    def _id(self) -> str:
        """32 random hex digits from the seeded generator, shaped like ``uuid4().hex``."""
        return f"{self._rng.getrandbits(128) & _UUID4_MASK | _UUID4_BITS:032x}"

    def clone(self, index: int) -> Template:
        rng = self._rng
        template, history = rng.choice(self._templates[index % len(self._templates)])
        created = self._now - timedelta(milliseconds=rng.randrange(self._span_ms))
        suspended = created + timedelta(milliseconds=rng.randrange(1_000, 30_000))
        calls: list[ToolCallDocument] = [{**call, "decision": None} for call in template["toolCalls"]]
        doc: SnapshotDocument = {
            "_id": self._id(),
            "agentId": template["agentId"],
            "threadId": rng.choice(self._threads),
            "resourceId": rng.choice(self._resources),
            "parentRunId": None,
            "status": "suspended",
            "createdAt": created,
            "suspendedAt": suspended,
            "updatedAt": suspended,
            "toolCalls": calls,
            "pendingCount": len(calls),
            "version": 1,
            "claim": None,
            "lastError": None,
            "schemaVersion": template["schemaVersion"],
            "historyId": self._id(),
            "startedBy": template.get("startedBy"),
        }
        return doc, history


async def seed_store(
    store: SnapshotStore,
    plan: SeedPlan,
    *,
    progress: Callable[[int], None] | None = None,
    now: datetime | None = None,
) -> int:
    """Write ``plan.runs`` cloned suspended runs into ``store`` (opened by the caller).

    Args:
        progress: Called with the number of runs written after each batch.
        now: End of the creation-time window (UTC); defaults to now.

    Returns:
        The number of runs written.

    Raises:
        DuplicateRunError: A generated run id is already stored (same ``seed`` twice).
        StoreUnavailableError: The store failed.
    """
    agent_ids = SEEDABLE_AGENTS[: plan.agents]
    cloner = _Cloner(plan, await make_templates(agent_ids), now or utcnow())
    written = 0
    while written < plan.runs:
        batch = [cloner.clone(written + i) for i in range(min(BATCH_SIZE, plan.runs - written))]
        if isinstance(store, MemorySnapshotStore):
            store.adopt_many(batch)  # fresh documents: no need to copy them again
        else:
            await store.insert_many(batch)
        written += len(batch)
        if progress is not None:
            progress(written)
    return written


__all__ = ["BATCH_SIZE", "SEEDABLE_AGENTS", "TEMPLATE_PROMPTS", "SeedPlan", "make_templates", "seed_store"]
