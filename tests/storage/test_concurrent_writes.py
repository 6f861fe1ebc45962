"""A conditional write whose condition holds takes effect even while another writer updates the
same run: on DocumentDB 0.106 (FerretDB 2.5) a conditional delete of a document that another
command updated at the same moment could answer "nothing matched" although the document matched
before and after (docs/storage.md "MongoDB test servers"). The runtime then took a completed run
for a lost claim and answered ``RESUMING``. On every store kind, in the runtime's own order: the
claim's holder renews it from a timer while its continuation finishes the run."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from storage import SnapshotStore
from storage.protocol import ClaimedDeletion, ClaimRenewal, ClaimWrite, DecisionWrite

from ._contract import T0, decision, feed_event, snapshot

ROUNDS = 12


async def _claimed(store: SnapshotStore, run_id: str) -> None:
    await store.insert(snapshot(run_id), b"h")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id=run_id, index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id=run_id, by="i1", until=T0 + timedelta(seconds=60), now=T0)
    )


async def test_a_completion_is_written_while_its_holder_renews_the_claim(store: SnapshotStore) -> None:
    missed = []
    for round_ in range(ROUNDS):
        run_id = f"run-{round_}"
        await _claimed(store, run_id)
        done = asyncio.Event()

        async def renew(run_id: str = run_id, done: asyncio.Event = done) -> None:
            until = T0 + timedelta(seconds=60)
            while not done.is_set():  # each renewal moves the lease on, as a timer's does
                until += timedelta(milliseconds=1)
                if not await store.renew_claim(
                    ClaimRenewal(agent_id="refund-agent", run_id=run_id, by="i1", until=until)
                ):
                    return
                await asyncio.sleep(0)

        renewing = asyncio.create_task(renew())
        await asyncio.sleep(0.01)  # the renewals under way
        completed = {**feed_event(f"{round_:03}-completed", run_id=run_id), "type": "completed"}
        deleted = await store.delete_claimed(
            ClaimedDeletion(agent_id="refund-agent", run_id=run_id, by="i1", event=completed)
        )
        done.set()
        await renewing
        if not deleted or await store.get("refund-agent", run_id) is not None:
            missed.append(run_id)

    assert missed == []
