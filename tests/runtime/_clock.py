"""A clock a test moves ahead of the real one (``RunManager(clock=...)``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from storage import utcnow


class MovedClock:
    """Aware UTC now, ``ahead`` seconds after the real one."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> datetime:
        return utcnow() + timedelta(seconds=self.ahead)
