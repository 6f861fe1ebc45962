"""``storage.sqlite.rows``: datetimes as whole UTC milliseconds, the same value whatever the
datetime's timezone or sub-millisecond part."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage._query import to_bson_precision
from storage.sqlite.rows import _EPOCH, _MS, _datetime, _ms

ZONES = [
    UTC,
    timezone(timedelta(hours=5, minutes=30)),
    timezone(timedelta(hours=-8)),
    timezone(timedelta(microseconds=1500)),
]
"""UTC (the fast path) and zones that are not, one with an offset of sub-millisecond precision."""


@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.sampled_from(ZONES),
)
def test_a_datetime_is_its_utc_milliseconds_truncated_in_any_zone(naive: datetime, zone: timezone) -> None:
    value = naive.replace(tzinfo=zone)
    assert _ms(value) == (to_bson_precision(value) - _EPOCH) // _MS
    assert _datetime(_ms(value)) == to_bson_precision(value)


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        _ms(datetime(2026, 1, 1))
