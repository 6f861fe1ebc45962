"""A windowed read (``storage/mongo/windows.py``) whose windows grow past the dates Python can
hold reads without a window instead of failing: a reviewers' queue total with a tools filter on
DocumentDB walked 10k runs to their end and raised ``OverflowError`` (an "Unexpected error.")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from storage.mongo.windows import Window, Windows

T0 = datetime(2026, 12, 6, tzinfo=UTC)


@pytest.mark.parametrize("span", [timedelta(days=2), timedelta(days=900_000_000)])
@pytest.mark.parametrize("older", [False, True])
async def test_windows_too_wide_for_a_date_read_without_one(span: timedelta, older: bool) -> None:
    # given a filter whose window is remembered, and a page past its last run: every window is empty
    windows = Windows()
    windows._put(("k",), Window(top=T0, span=span))
    last = [{"_id": "last", "at": T0}]
    reads: list[Any] = []

    async def read(window: dict[str, Any] | None) -> list[dict[str, Any]]:
        reads.append(window)
        return [] if window is not None else last

    # when a page of 500 is read after the last run, then it is what a read without a window gives
    docs = await windows.page(("k",), 500, cursor=T0, older=older, read=read, field="at")
    assert docs == last
    assert reads[-1] is None
