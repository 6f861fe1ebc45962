"""The memory store's deletion of finished records past their retention: records indexed by
``(finishedAt, id)`` in a ``SortedList``, oldest first, deleted while a rule accepts them."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from sortedcontainers import SortedList

from .. import rules


def delete_expired(
    finished: SortedList, records: MutableMapping[str, Any], expired: rules.Condition, limit: int
) -> int:
    """Delete from ``records`` the oldest of ``finished`` (``(finishedAt, id)`` pairs) that meet
    ``expired``, ``limit`` at most; returns how many. A pair whose record is gone or was finished
    again later (another ``finishedAt``) is dropped from the index only.

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    deleted = 0
    while finished and deleted < limit:
        at, record_id = finished[0]
        record: Mapping[str, Any] | None = records.get(record_id)
        current = record is not None and record.get("finishedAt") == at
        if record is not None and current and not rules.matches(expired, record):
            break  # the oldest record left is not expired: none after it is
        finished.pop(0)
        if current:
            del records[record_id]
            deleted += 1
    return deleted
