"""Upper bounds of the settings given in seconds. Every such setting is finite (no ``inf`` or
``nan``) and bounded, so that no date or timer computed from it overflows later, in a sweep or a
lease, long after the start that accepted it (docs/configuration.md gives each range)."""

from __future__ import annotations

MINUTE = 60
"""Seconds in a minute: the upper bound of a polling interval."""
HOUR = 3_600
"""Seconds in an hour: the upper bound of a timeout, and of the span reads go back over."""
DAY = 86_400
"""Seconds in a day: the upper bound of a sweep interval, a lease, a backoff."""
CENTURY = 3_155_760_000
"""Seconds in 100 years of 365.25 days: the upper bound of a retention or a deadline ("keep it",
in effect), while every date computed from it stays one that Python, SQLite and BSON hold."""

__all__ = ["CENTURY", "DAY", "HOUR", "MINUTE"]
