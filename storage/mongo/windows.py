"""Windowed pages for DocumentDB, whose planner sorts every run a page's filter matches: a page
is first read inside a window of its order's first field (``createdAt`` for listings, ``queueAt``
for the queue) next to its anchor (the cursor, or the top of the filter's last first page), which
an index bounds, and widened until it holds the page; a window that held fewer runs than the page
proves nothing, so the last try has none.

The windows are remembered per filter in the process (``Windows``), so a page usually takes one
read; the span adapts to the runs' density (docs/storage.md "DocumentDB pages").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .._query import normalized_filter
from ..protocol import RunFilter

Document = dict[str, Any]

FIRST_SPAN = timedelta(minutes=10)
"""The span of a page's first window when the filter has no remembered one."""

GROWTH = 16
"""How much wider each next window is, at least."""

WINDOWED_TRIES = 3
"""Windowed reads of one page before the read without a window."""

REMEMBERED = 4096
"""Filters whose window a process remembers (least recently used forgotten first)."""


@dataclass
class Window:
    """What one filter's last page showed: the order's first field of its first run (a first
    page's; a listing's newest ``createdAt``) and the span of that field that held a page, with room."""

    top: datetime | None
    span: timedelta | None
    """``None``: the last read without a window held less than a page, so the next has none either."""
    past: datetime | None = None
    """With a ``split``: the first run past it of the last page that held runs on both sides."""


def filter_key(agent_id: str, run_filter: RunFilter) -> tuple[Any, ...]:
    """The key a filter's window is remembered under."""
    f = normalized_filter(run_filter)
    resources = None if f.resource_ids is None else tuple(sorted(f.resource_ids))
    return (agent_id, f.thread_id, f.resource_id, resources, f.from_date, f.to_date, f.expires_before)


class Windows:
    """The remembered windows of one store (bounded, least recently used forgotten first)."""

    def __init__(self) -> None:
        self._known: OrderedDict[tuple[Any, ...], Window] = OrderedDict()

    def _get(self, key: tuple[Any, ...]) -> Window | None:
        found = self._known.get(key)
        if found is not None:
            self._known.move_to_end(key)
        return found

    def _put(self, key: tuple[Any, ...], window: Window) -> None:
        self._known[key] = window
        self._known.move_to_end(key)
        while len(self._known) > REMEMBERED:
            self._known.popitem(last=False)

    async def page(
        self,
        key: tuple[Any, ...],
        limit: int,
        *,
        cursor: datetime | None,
        older: bool,
        read: Callable[[Document | None], Awaitable[list[Document]]],
        learn: bool = True,
        field: str = "createdAt",
        first_from_top: bool = False,
        split: datetime | None = None,
    ) -> list[Document]:
        """The page of ``limit`` runs that ``read(None)`` returns (the whole filter, sorted and
        limited), read first through windows: ``read({field: {"$gte"|"$lte": bound}})``, ``field``
        the first field of the read's order (a datetime in every run ``read`` returns).

        ``older``: the page walks towards older runs (newest first), a window being every run from
        ``bound`` on; else towards newer ones. ``cursor``: the ``field`` of the page's cursor, the
        window's anchor; a first page walking older, or newer with ``first_from_top``, is anchored
        at the filter's remembered top; else a first page has no window. A windowed read returning
        fewer than ``limit`` runs is tried wider; the last try has no window, and each read is
        correct on its own. ``learn``: whether the page teaches the filter's window (not a read
        bounded on its far side too). ``split`` (walking newer only): where ``field`` jumps between
        two kinds of runs (the queue's undated runs start there): a page holding both is measured
        from its first run past it (``past``), where a page anchored before it reads from next."""
        known = self._get(key)
        anchor = cursor
        if anchor is not None and anchor.tzinfo is None:  # stored times are UTC
            anchor = anchor.replace(tzinfo=UTC)
        first = cursor is None
        if first and (older or first_from_top):
            anchor = known.top if known is not None else None
        past = known.past if known is not None and split is not None else None
        if past is not None and anchor is not None and anchor < past and known is not None and known.top == past:
            anchor = past  # before the split, fewer runs than a page: the first page's window
        if anchor is None or limit <= 0 or (known is not None and known.span is None):
            return self._learn(
                key, await read(None), limit if learn else 0, field, first=first, anchor=None, known=known, split=split
            )
        span = known_span = known.span if known is not None and known.span is not None else FIRST_SPAN
        learnt = limit if learn else 0
        for _ in range(WINDOWED_TRIES):
            bound = _bound(anchor, span, older)
            if bound is None:  # wider than the dates a window can name: the last try's read
                continue
            docs = await read({field: {"$gte" if older else "$lte": bound}})
            if len(docs) >= limit:
                break
            span = _grown(span, max(GROWTH, 2 * limit // max(len(docs), 1)))
        else:
            if past is not None and split is not None and anchor < past and not older:
                # the runs before the split left after the anchor hold less than the page: from past it
                docs = await read({field: {"$lte": _bound(past, known_span, older) or past}})
                if len(docs) >= limit:
                    return self._learn(key, docs, learnt, field, first=first, anchor=past, known=known, split=split)
            return self._learn(
                key,
                await read(None),
                limit if learn else 0,
                field,
                first=first,
                anchor=anchor,
                known=known,
                split=split,
            )
        return self._learn(key, docs, learnt, field, first=first, anchor=anchor, known=known, split=split)

    def _learn(
        self,
        key: tuple[Any, ...],
        docs: list[Document],
        limit: int,
        field: str,
        *,
        first: bool,
        anchor: datetime | None,
        known: Window | None,
        split: datetime | None = None,
    ) -> list[Document]:
        """Remember what page ``docs`` showed (returned as is): a full page, the span it needed
        from its anchor (doubled) and a first page's top, both from its first run past ``split``
        when it holds runs on both sides; a first page short of ``limit`` (read without a window
        at last), that the filter needs no window. ``limit`` 0: nothing."""
        if limit <= 1:  # a page of one run shows no span
            return docs
        if len(docs) < limit:
            if first:  # the whole filter holds less than a page
                self._put(key, Window(top=None, span=None))
            return docs
        start = docs[0][field] if first or anchor is None else anchor
        top = docs[0][field] if first else (known.top if known is not None else None)
        past = known.past if known is not None else None
        if split is not None and docs[0][field] < split <= docs[-1][field]:
            start = past = next(doc[field] for doc in docs if doc[field] >= split)
            top = start if first else top
        reach = abs(start - docs[-1][field])
        self._put(key, Window(top=top, span=2 * reach + timedelta(milliseconds=1), past=past))
        return docs


def _bound(anchor: datetime, span: timedelta, older: bool) -> datetime | None:
    """``anchor`` moved by ``span`` towards the walk, or ``None`` past the dates Python holds."""
    try:
        return anchor - span if older else anchor + span
    except OverflowError:
        return None


def _grown(span: timedelta, factor: int) -> timedelta:
    """``span`` times ``factor``, at most ``timedelta.max``."""
    try:
        return span * factor
    except OverflowError:
        return timedelta.max


__all__ = ["FIRST_SPAN", "GROWTH", "WINDOWED_TRIES", "Window", "Windows", "filter_key"]
