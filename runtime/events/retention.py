"""The sweeper's step that deletes the events of runs finished a retention period ago
(``RUNSGATE_EVENT_RETENTION``, docs/guarantees.md "Events"), ``EVENT_BATCH`` runs a sweep."""

from __future__ import annotations

from datetime import datetime, timedelta

from storage import SnapshotStore

EVENT_BATCH = 100
"""Runs whose events one sweep deletes or postpones at most."""


async def sweep_event_retention(store: SnapshotStore, *, now: datetime, retention: float) -> int:
    """Delete the events of the runs ``list_expired_events`` finds (``retentionFrom`` over
    ``retention`` seconds before ``now``, UTC). A run's events stay, its retention postponed to
    ``now``, while its snapshot is stored (a failed run waits for ``retryRun``) or, for a
    sub-run, its supervisor's (``delegate()`` reads its ``completed`` event); a run finished again
    since (a newer ``retentionFrom``) has every date moved to that one. Returns runs deleted.
    Raises ``StoreUnavailableError``."""
    before = now - timedelta(seconds=retention)
    runs = await store.list_expired_events(before=before, limit=EVENT_BATCH)
    if not runs:
        return 0
    events: dict[tuple[str, str], list[datetime]] = {}
    parents: dict[tuple[str, str], str] = {}
    for agent_id in dict.fromkeys(agent for agent, _ in runs):
        for event in await store.list_events_of_runs(agent_id, [run for agent, run in runs if agent == agent_id]):
            key = (agent_id, event["runId"])
            if "retentionFrom" in event:
                events.setdefault(key, []).append(event["retentionFrom"])
            parent = event["data"].get("parentRunId") if event["type"] == "started" else None
            if isinstance(parent, str):
                parents[key] = parent
    stored = {doc["_id"] for doc in await store.get_many([*(run for _, run in runs), *parents.values()])}
    postponed: dict[tuple[str, str], datetime] = {}
    expired: list[tuple[str, str]] = []
    for agent_id, run_id in runs:
        latest = max(events.get((agent_id, run_id), [before]))
        if latest >= before:  # finished again since: counted from its last finish
            postponed[(agent_id, run_id)] = latest
        elif run_id in stored or parents.get((agent_id, run_id)) in stored:
            postponed[(agent_id, run_id)] = now
        else:
            expired.append((agent_id, run_id))
    # one write each: the store's transaction (SQLite) or bulk write (MongoDB)
    await store.postpone_event_retention(postponed)
    await store.delete_run_events(expired)
    return len(expired)


__all__ = ["EVENT_BATCH", "sweep_event_retention"]
