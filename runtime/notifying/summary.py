"""A waiting call as a person reads it in an email and on a link's page: its arguments as
``name: value`` lines, and a one-line summary ``tool (name value, ...)`` for subjects and answers.
Values are exact (strings as they are, others as JSON) and cut with ``…`` past a length."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

LINE_CHARS = 200
"""The longest value shown on an argument line, in characters (``…`` included)."""
SUMMARY_CHARS = 80
"""The longest summary inside the parentheses, in characters."""
SUMMARY_VALUE_CHARS = 24
"""The longest value in a summary, in characters."""


def value_text(value: Any, limit: int) -> str:
    """``value`` as text (a string as it is, anything else as JSON), cut to ``limit`` characters
    with a final ``…`` when longer."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def argument_lines(shown: Any, limit: int = LINE_CHARS) -> list[str]:
    """One ``name: value`` line per top-level key of a mapping (``(no arguments)`` when empty);
    anything else as one line."""
    if isinstance(shown, Mapping):
        return [f"{name}: {value_text(value, limit)}" for name, value in shown.items()] or ["(no arguments)"]
    return [value_text(shown, limit)]


def call_summary(tool_name: str, shown: Any) -> str:
    """``tool (name value, name value)`` on one line (whitespace in values collapsed), e.g.
    ``issue_refund (order_id 1043, amount 120.0)``; ``tool`` alone when nothing is shown."""
    if isinstance(shown, Mapping):
        inner = ", ".join(f"{name} {value_text(value, SUMMARY_VALUE_CHARS)}" for name, value in shown.items())
    else:
        inner = "" if shown is None else value_text(shown, SUMMARY_VALUE_CHARS)
    inner = value_text(" ".join(inner.split()), SUMMARY_CHARS)
    return f"{tool_name} ({inner})" if inner else tool_name


_UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))


def duration_text(seconds: float) -> str:
    """``seconds`` (> 0) rounded to the second, in the largest unit that holds it whole:
    ``15 seconds``, ``90 minutes``, ``1 hour``, ``3 days``."""
    whole = max(1, round(seconds))
    name, size = next((name, size) for name, size in _UNITS if whole % size == 0)
    count = whole // size
    return f"{count} {name}{'' if count == 1 else 's'}"


__all__ = ["argument_lines", "call_summary", "duration_text", "value_text"]
