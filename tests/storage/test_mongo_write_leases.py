"""Write leases (``storage/_run_lock.py``) only where the server needs them: FerretDB 1.x, told from
``buildInfo`` when the store opens. On DocumentDB (FerretDB 2.5), whose conditional writes are
atomic, racing writers keep every decision exactly once and one claim wins, with no lease taken,
beside an instance that still takes them (docs/storage.md "Write leases")."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from typing import Any

import pytest

from storage import EventDocument
from storage._run_lock import needs_write_leases
from storage.protocol import ClaimWrite, DecisionWrite
from tests._servers import mongo_store

from ..conftest import MONGO_SERVERS, kind_uri
from ._contract import T0, decision, feed_event, snapshot, tool_call


@pytest.mark.parametrize(
    ("build_info", "leases"),
    [
        ({"version": "7.0.42", "ferretdbVersion": "v1.24.2"}, True),  # FerretDB 1.24's answer
        ({"version": "7.0.77", "ferretdb": {"version": "v2.5.0", "package": "unknown"}}, False),  # FerretDB 2.5's
        ({"version": "8.0.4", "versionArray": [8, 0, 4, 0]}, False),  # MongoDB names no FerretDB
        ({"version": "7.0.42", "ferretdbVersion": "1.9.0"}, True),
        ({"version": "7.0.42", "ferretdbVersion": "unknown"}, True),  # unreadable: the safe side
        ({"version": "7.0.77", "ferretdb": {"version": "v10.1.0"}}, False),
    ],
)
def test_only_ferretdb_before_2_needs_write_leases(build_info: dict[str, Any], leases: bool) -> None:
    assert needs_write_leases(build_info) is leases


@pytest.mark.mongo
@pytest.mark.parametrize("kind", list(MONGO_SERVERS))
async def test_open_takes_write_leases_on_ferretdb_1_only(kind: str, request: pytest.FixtureRequest) -> None:
    uri = kind_uri(request, kind)
    detected, forced = mongo_store(uri), mongo_store(uri, write_leases=True)
    for store in (detected, forced):
        await store.open()
    try:
        info = await detected.database.client.admin.command("buildInfo")
        assert detected.write_leases is needs_write_leases(info)
        if not os.environ.get("MONGODB_URI"):  # the servers the suite starts
            assert detected.write_leases is (kind == "ferretdb1")
        assert forced.write_leases is True
    finally:
        await detected.drop_all()
        for store in (detected, forced):
            await store.close()


def _decided(run_id: str, number: int) -> EventDocument:
    return {**feed_event(f"{run_id}-decision-{number}", run_id=run_id), "type": "decision"}


@pytest.mark.mongo
@pytest.mark.parametrize("kind", list(MONGO_SERVERS))
async def test_racing_writers_keep_every_decision_once_and_one_claim(kind: str, request: pytest.FixtureRequest) -> None:
    """Four clients (as four instances) decide the four calls of one run at once, then race to
    claim it. Each decision's write derives the run's deadline from the run it read, so on
    DocumentDB, with no lease, three of them find the run changed under them and read it again.
    On DocumentDB one client takes write leases (an instance of the version before: a rolling
    upgrade); on FerretDB 1.24 all of them do."""
    uri = kind_uri(request, kind)
    clients = [mongo_store(uri) for _ in range(3)]
    clients.append(mongo_store(uri, write_leases=True if kind == "mongo" else None))
    for client in clients:
        await client.open()
    first = clients[0]
    try:
        if not os.environ.get("MONGODB_URI"):
            assert [client.write_leases for client in clients] == [kind == "ferretdb1"] * 3 + [True]
        calls = [tool_call(f"c{n}") for n in range(len(clients))]
        for round_ in range(8):
            run_id = f"race-{round_}"
            await first.insert(snapshot(run_id, calls=calls), b"[]")

            decided = await asyncio.gather(
                *(
                    client.record_decision(
                        DecisionWrite(
                            agent_id="refund-agent",
                            run_id=run_id,
                            index=n,
                            tool_call_id=f"c{n}",
                            decision=decision("approved" if n % 2 else "declined"),
                            now=T0,
                            event=_decided(run_id, n),
                        )
                    )
                    for n, client in enumerate(clients)
                )
            )
            assert all(result is not None for result in decided), round_
            until = T0 + timedelta(minutes=5)
            claimed = await asyncio.gather(
                *(
                    client.claim(ClaimWrite(agent_id="refund-agent", run_id=run_id, by=f"i{n}", until=until, now=T0))
                    for n, client in enumerate(clients)
                )
            )

            winners = [n for n, result in enumerate(claimed) if result is not None]
            assert len(winners) == 1, (round_, winners)
            stored = await first.database["run_snapshots"].find_one({"_id": run_id})
            assert stored is not None
            assert [call["decision"]["kind"] for call in stored["toolCalls"]] == [
                "approved" if n % 2 else "declined" for n in range(len(clients))
            ]
            assert (stored["pendingCount"], stored["version"]) == (0, len(clients) + 2)
            assert stored["status"] == "resuming"
            assert stored["claim"]["by"] == f"i{winners[0]}"
            assert not stored.get("pendingEvents"), stored.get("pendingEvents")
            events = await first.list_events("refund-agent", run_id)
            assert sorted(e["_id"] for e in events) == sorted(f"{run_id}-decision-{n}" for n in range(len(clients)))
        # every lease taken was given back
        assert await first.database["run_write_locks"].count_documents({}) == 0
    finally:
        await first.drop_all()
        for client in clients:
            await client.close()
