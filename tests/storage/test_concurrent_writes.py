"""A conditional write whose condition holds takes effect even while another writer updates the
same run: on DocumentDB 0.106 (FerretDB 2.5) a conditional delete of a document that another
command updated at the same moment could answer "nothing matched" although the document matched
before and after (docs/storage.md "Write leases"). The runtime then took a completed run for a
lost claim and answered ``RESUMING``. On every store kind: a burst of claim renewals (as a
renewal in flight, or the sweeper's marks, are) runs while the claim's holder finishes the run,
started on the MongoDB store between the completion's mark and its deletion (``before_event``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from storage import SnapshotStore
from storage.documents import EventDocument
from storage.protocol import ClaimedDeletion, ClaimRenewal, ClaimWrite, DecisionWrite

from ._contract import T0, decision, feed_event, snapshot

ROUNDS = 12
BURST = 20
"""Renewals in one burst: each moves the lease on, so each is a write of the run."""


async def _claimed(store: SnapshotStore, run_id: str) -> None:
    await store.insert(snapshot(run_id), b"h")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id=run_id, index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id=run_id, by="i1", until=T0 + timedelta(seconds=60), now=T0)
    )


async def _burst(store: SnapshotStore, run_id: str) -> None:
    until = T0 + timedelta(seconds=60)
    for _ in range(BURST):
        until += timedelta(milliseconds=1)
        if not await store.renew_claim(ClaimRenewal(agent_id="refund-agent", run_id=run_id, by="i1", until=until)):
            return
        await asyncio.sleep(0)


async def test_a_completion_is_written_while_its_claim_is_renewed(store: SnapshotStore) -> None:
    missed = []
    for round_ in range(ROUNDS):
        run_id = f"run-{round_}"
        await _claimed(store, run_id)
        bursts: list[asyncio.Task[None]] = []

        async def between(
            events: Sequence[EventDocument], run_id: str = run_id, bursts: list[asyncio.Task[None]] = bursts
        ) -> None:
            bursts.append(asyncio.create_task(_burst(store, run_id)))
            await asyncio.sleep(0)

        if hasattr(store, "before_event"):
            store.before_event = between  # type: ignore[attr-defined]
        else:
            await between([])
        completed = {**feed_event(f"{round_:03}-completed", run_id=run_id), "type": "completed"}
        deleted = await store.delete_claimed(
            ClaimedDeletion(agent_id="refund-agent", run_id=run_id, by="i1", event=completed)
        )
        if hasattr(store, "before_event"):
            store.before_event = None  # type: ignore[attr-defined]
        await asyncio.gather(*bursts)
        if not deleted or await store.get("refund-agent", run_id) is not None:
            missed.append(run_id)

    assert missed == []
