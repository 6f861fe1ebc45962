"""A run whose history is over MongoDB's 16 MB document limit suspends, is listed and resumes
(issue 3 "large histories"): ``bulky-agent`` reads a 20 MB report, then asks to publish it."""

from __future__ import annotations

from runtime import RunManager
from storage import RunFilter
from storage.protocol import RunPage

from .agents import REPORT_BYTES

BULKY = "bulky-agent"


async def test_a_run_with_a_20_mb_history_suspends_is_listed_and_resumes(any_manager: RunManager) -> None:
    manager = any_manager
    # when
    started = await manager.start_run(BULKY, "publish the report")

    # then it is stored with its whole history, and listed without reading it
    assert started.status == "suspended", started.error
    assert started.run is not None
    call = started.run["toolCalls"][0]
    assert (call["toolName"], call["args"]["chars"]) == ("publish", REPORT_BYTES)
    history = await manager.store.load_history(BULKY, started.run_id)
    assert history is not None
    assert len(history) > REPORT_BYTES > 16 * 1024 * 1024
    listed = await manager.store.list_runs(BULKY, RunFilter(), RunPage(limit=20))
    assert [doc["_id"] for doc in listed] == [started.run_id]

    # when it is approved, the run continues from the stored 20 MB history
    done = await manager.approve(BULKY, started.run_id, call["toolCallId"])

    # then
    assert done.status == "completed", done.error
    assert done.output == f"published: {REPORT_BYTES} chars ending {call['args']['tail']}"
    assert await manager.store.get(BULKY, started.run_id) is None
    assert await manager.store.load_history(BULKY, started.run_id) is None
