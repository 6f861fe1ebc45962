"""``decideToolCalls`` shares ``bulk_concurrency`` among the principals deciding (issue 26,
"shared budgets"): the runs of one client's large batch do not queue another client's batch
behind them all."""

from __future__ import annotations

import asyncio

from runtime import AgentRegistry, BulkDecision, RunManager, RunOutcome, RunsgateError
from storage import MemorySnapshotStore

from . import agents

SLOW = "slow-agent"


async def _suspended(manager: RunManager, count: int) -> list[BulkDecision]:
    decisions = []
    for _ in range(count):
        started = await manager.start_run(SLOW, "please deploy")
        assert started.run is not None
        call = started.run["toolCalls"][0]["toolCallId"]
        decisions.append(BulkDecision(run_id=started.run_id, tool_call_id=call, kind="approved"))
    return decisions


async def test_a_large_batch_does_not_queue_another_principals_batch_behind_all_its_runs(
    memory_store: MemorySnapshotStore, registry: AgentRegistry
) -> None:
    # given two slots, and continuations that each take a while (the slow agent's model)
    manager = RunManager(memory_store, registry, instance_id="instance-a", bulk_concurrency=2)
    alice_runs, bob_runs = await _suspended(manager, 6), await _suspended(manager, 1)
    agents.SWITCHES["delay"] = 0.3

    # when alice sends a batch of six, and bob one of one just after
    alice = asyncio.create_task(manager.decide_many(SLOW, alice_runs, principal="alice"))
    await asyncio.sleep(0.05)
    bob = asyncio.create_task(manager.decide_many(SLOW, bob_runs, principal="bob"))
    done, _ = await asyncio.wait({alice, bob}, return_when=asyncio.FIRST_COMPLETED)

    # then bob's batch is done before alice's: it got a slot when one of alice's runs finished,
    # rather than after all six
    assert done == {bob}
    answers: list[RunOutcome | RunsgateError] = [*await alice, *await bob]
    assert all(isinstance(answer, RunOutcome) and answer.status == "completed" for answer in answers), answers
