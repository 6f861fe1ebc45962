"""``record_decision``'s ``claim`` (part of the ``RunStore`` contract): the decision of a run's last
pending call claims the run in the same write, on every store (the ``store`` fixture)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from storage import DecisionClaim, EventDocument, SnapshotStore
from storage.protocol import ClaimedDeletion, ClaimedReplacement, ClaimRenewal, ClaimWrite, DecisionWrite

from ._contract import T0, decision, feed_event, snapshot, tool_call

UNTIL = T0 + timedelta(seconds=60)


def _event(event_id: str, kind: str) -> EventDocument:
    event = feed_event(event_id)
    event["type"] = kind  # type: ignore[typeddict-item]
    return event


def _claim(version: int, **changes: Any) -> DecisionClaim:
    fields: dict[str, Any] = {
        "by": "instance-a",
        "until": UNTIL,
        "version": version,
        "events": [_event("e-resumed", "resumed")],
    }
    return DecisionClaim(**{**fields, **changes})


async def _decide(store: SnapshotStore, index: int, call_id: str, claim: DecisionClaim | None) -> Any:
    return await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="run",
            index=index,
            tool_call_id=call_id,
            decision=decision(),
            now=T0,
            event=_event(f"e-decision-{call_id}", "decision"),
            claim=claim,
        )
    )


async def test_the_last_decision_claims_the_run_with_its_events_in_one_write(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"[]")

    written = await _decide(store, 0, "c1", _claim(version=1))

    assert written is not None
    assert (written["status"], written["claim"], written["pendingCount"]) == (
        "resuming",
        {"by": "instance-a", "until": UNTIL},
        0,
    )
    assert written["version"] == 2
    assert written["toolCalls"][0]["decision"] == decision()
    assert await store.get("refund-agent", "run") == written
    events = await store.list_events("refund-agent", "run")
    assert [e["_id"] for e in events] == ["e-decision-c1", "e-resumed"]
    # held as any claim: another instance cannot claim it before it lapses, its holder renews it
    assert (
        await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="instance-b", until=UNTIL, now=T0))
        is None
    )
    assert await store.renew_claim(
        ClaimRenewal(agent_id="refund-agent", run_id="run", by="instance-a", until=UNTIL + timedelta(seconds=1))
    )
    assert (
        await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="instance-b", until=UNTIL, now=UNTIL))
        is None
    )
    later = UNTIL + timedelta(seconds=2)
    taken = await store.claim(
        ClaimWrite(
            agent_id="refund-agent", run_id="run", by="instance-b", until=later + timedelta(seconds=60), now=later
        )
    )
    assert taken is not None
    assert taken["claim"] is not None
    assert taken["claim"]["by"] == "instance-b"


async def test_a_decision_that_leaves_calls_waiting_claims_nothing(store: SnapshotStore) -> None:
    await store.insert(snapshot("run", calls=[tool_call("c1"), tool_call("c2")]), b"[]")

    written = await _decide(store, 1, "c2", _claim(version=1))

    assert written is not None
    assert (written["status"], written["claim"], written["pendingCount"]) == ("suspended", None, 1)
    assert [e["_id"] for e in await store.list_events("refund-agent", "run")] == ["e-decision-c2"]


async def test_a_claim_made_from_an_older_version_is_not_taken_but_the_decision_is(store: SnapshotStore) -> None:
    # given a run whose first call was decided after the last decision's claim was made (version 1)
    await store.insert(snapshot("run", calls=[tool_call("c1"), tool_call("c2")]), b"[]")
    assert await _decide(store, 0, "c1", None) is not None

    written = await _decide(store, 1, "c2", _claim(version=1))

    # then the decision is recorded, the claim and its events are not: the run waits for a claim
    assert written is not None
    assert (written["status"], written["claim"], written["pendingCount"]) == ("suspended", None, 0)
    assert [e["_id"] for e in await store.list_events("refund-agent", "run")] == ["e-decision-c1", "e-decision-c2"]
    assert (
        await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="instance-b", until=UNTIL, now=T0))
        is not None
    )


async def test_a_refused_decision_writes_neither_its_claim_nor_any_event(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"[]")
    assert await _decide(store, 0, "c1", None) is not None

    again = await _decide(store, 0, "c1", _claim(version=2))

    assert again is None
    stored = await store.get("refund-agent", "run")
    assert stored is not None
    assert (stored["status"], stored["claim"], stored["version"]) == ("suspended", None, 2)
    assert [e["_id"] for e in await store.list_events("refund-agent", "run")] == ["e-decision-c1"]


async def test_the_history_loaded_after_a_claim_is_the_stored_one_until_the_holder_changes_it(
    store: SnapshotStore,
) -> None:
    # given a run claimed by its last decision (SQLite keeps the history that write read)
    await store.insert(snapshot("run"), b'["first"]')
    assert await _decide(store, 0, "c1", _claim(version=1)) is not None

    # then its history loads, twice, as stored
    assert await store.load_history("refund-agent", "run") == b'["first"]'
    assert await store.load_history("refund-agent", "run") == b'["first"]'

    # when the holder suspends it again with a new history, then claims it again
    replaced = await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="instance-a",
            tool_calls=[tool_call("c2")],
            history=b'["second"]',
            history_id="h-second",
            now=T0,
        )
    )
    assert replaced is not None
    assert await store.load_history("refund-agent", "run") == b'["second"]'
    again = _claim(version=replaced["version"], events=[_event("e-resumed-again", "resumed")])
    assert await _decide(store, 0, "c2", again) is not None
    assert await store.load_history("refund-agent", "run") == b'["second"]'

    # then, once it finished, it has no history any more
    assert await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id="run", by="instance-a"))
    assert await store.load_history("refund-agent", "run") is None


async def test_a_run_taken_over_after_its_claim_lapsed_loads_the_new_holders_history(
    two_clients: tuple[SnapshotStore, SnapshotStore],
) -> None:
    first, second = two_clients
    # given a run the first client's decision claimed with a lease that lapsed at once
    await first.insert(snapshot("run"), b'["first"]')
    assert await _decide(first, 0, "c1", _claim(version=1, until=T0)) is not None

    # when the second client takes it over and suspends it again with a new history
    later = T0 + timedelta(seconds=60)
    taken = await second.claim(
        ClaimWrite(
            agent_id="refund-agent", run_id="run", by="instance-b", until=later + timedelta(seconds=60), now=later
        )
    )
    assert taken is not None
    assert await second.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="instance-b",
            tool_calls=[tool_call("c2")],
            history=b'["second"]',
            history_id="h-second",
            now=later,
        )
    )

    # then the first client loads the new holder's history, not the one its own claim read
    assert await first.load_history("refund-agent", "run") == b'["second"]'
