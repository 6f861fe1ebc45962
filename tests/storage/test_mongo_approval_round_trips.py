"""An approval's commands on the MongoDB store, in the order the server sees them
(docs/storage.md "One unit of work", "Write leases"): the claiming decision returns once its
snapshot is written, its events and run-update batches sent behind it; the history is read beside
the decision when ``get`` read the run at the claim's version, so ``load_history`` sends nothing;
a completion sends its history's deletion and its batches beside its event's append, then the
snapshot's deletion (behind the call without an idempotency key). Every event and batch is
stored, in order, for a reader of the same store. Shown through PyMongo's command monitoring, on
both MongoDB test servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from pymongo import monitoring

from storage import DecisionClaim, MongoSnapshotStore, RunUpdateBatchDocument
from storage.protocol import ClaimedDeletion, DecisionWrite

from ..conftest import open_store
from ._contract import T0, decision, run_event, snapshot

pytestmark = pytest.mark.mongo

C = "01700000000000000002-bbbbbbbbbbbb"


class Sent(monitoring.CommandListener):
    """``"<command> <collection>"`` of each command sent while ``on``."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.on = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        target = event.command.get(event.command_name)
        if self.on and event.command_name not in ("ping", "hello", "isMaster", "endSessions"):
            self.commands.append(f"{event.command_name} {target if isinstance(target, str) else ''}".strip())

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


SENT = Sent()
monitoring.register(SENT)


def _batch(seq: int) -> RunUpdateBatchDocument:
    ident = f"{C}.{seq:08d}"
    return {"_id": ident, "agentId": "refund-agent", "runId": "run", "at": T0, "updates": f'[{{"id": "{ident}"}}]'}


@pytest.fixture(params=["mongo", "ferretdb1"])
async def mongo(request: pytest.FixtureRequest) -> AsyncIterator[MongoSnapshotStore]:
    async with open_store(request, request.param) as store:
        assert isinstance(store, MongoSnapshotStore)
        yield store


async def test_an_approval_sends_its_reads_and_writes_in_the_order_that_keeps_them(mongo: MongoSnapshotStore) -> None:
    run = snapshot("run")
    await mongo.insert(run, b'[{"history": 1}]')
    await asyncio.gather(*(mongo.ping() for _ in range(4)))  # connections at hand, as in a server's pool
    read = await mongo.get("refund-agent", "run")
    assert read is not None
    claim = DecisionClaim(
        by="a",
        until=T0 + timedelta(seconds=60),
        version=read["version"],
        events=[run_event(f"{C}-2", "resumed")],
        updates=[_batch(0)],
    )
    SENT.commands = []
    SENT.on = True
    try:
        claimed = await mongo.record_decision(
            DecisionWrite(
                agent_id="refund-agent",
                run_id="run",
                index=0,
                tool_call_id="c1",
                decision=decision(),
                now=T0,
                event=run_event(f"{C}-1", "decision"),
                claim=claim,
            )
        )
        assert claimed is not None
        assert claimed["status"] == "resuming"
        at_load = len(SENT.commands)
        assert await mongo.load_history("refund-agent", "run", history_id=claimed["historyId"]) == b'[{"history": 1}]'
        # read once, beside the decision: before load_history was called
        assert SENT.commands.count("find run_histories") == 1, SENT.commands
        assert SENT.commands.index("find run_histories") < at_load, SENT.commands
        # a reader of the same store finds what the decision sent behind it
        assert [e["type"] for e in await mongo.list_events("refund-agent", "run")] == ["decision", "resumed"]
        assert [b["_id"] for b in await mongo.list_run_updates("refund-agent", "run", after=None, limit=10)] == [
            _batch(0)["_id"]
        ]
        SENT.commands = []
        done = await mongo.delete_claimed(
            ClaimedDeletion(
                agent_id="refund-agent",
                run_id="run",
                by="a",
                event=run_event(f"{C}-3", "completed"),
                updates=[_batch(1)],
            )
        )
        assert done
        assert await mongo.get("refund-agent", "run") is None  # gone once the call returns
        events = await mongo.list_events("refund-agent", "run")  # after the writes sent behind it
    finally:
        SENT.on = False
    writes = [c for c in SENT.commands if "run_write_locks" not in c]
    deletion = max(i for i, c in enumerate(writes) if c == "findAndModify run_snapshots")
    mark = writes.index("findAndModify run_snapshots")
    assert mark < deletion, writes
    for beside in ("insert run_events", "findAndModify run_histories", "insert run_updates"):
        assert mark < writes.index(beside) < deletion, writes
    assert [e["type"] for e in events] == ["decision", "resumed", "completed"]
    assert await mongo.database["run_snapshots"].count_documents({}) == 0
    assert [b["_id"] for b in await mongo.list_run_updates("refund-agent", "run", after=None, limit=10)] == [
        _batch(0)["_id"],
        _batch(1)["_id"],
    ]
    assert await mongo.load_history("refund-agent", "run", history_id=claimed["historyId"]) is None
    assert await mongo.get("refund-agent", "run") is None
