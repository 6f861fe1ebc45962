"""Listing suspended runs: ``page``/``perPage`` (as Mastra's) and Relay cursors over one order.

Order: ``createdAt`` descending, then ``runId`` descending. Cursors are opaque (base64url of the
sort key), so cursor pages are keyset walks; ``page`` is an offset. The argument rules (no
mixing, bounds, the default page of ``max``, a page past the end): docs/api.md "Pagination".
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from strawberry.types.nodes import SelectedField

from storage import RunFilter, SnapshotDocument, SortKey, sort_key
from storage.protocol import RunPage

from ..access import restricted
from ..context import Info
from ..errors import QueryArgumentError
from ..inputs import PageInput, SuspendedRunFilter
from ..scalars import parse_datetime, serialize_datetime
from ..types import PageInfo, SuspendedRun, SuspendedRunConnection, SuspendedRunEdge

T = TypeVar("T")


def encode_cursor(key: SortKey) -> str:
    """Opaque cursor of a position in listing order."""
    raw = json.dumps([serialize_datetime(key.created_at), key.run_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, *, argument: str) -> SortKey:
    """Inverse of ``encode_cursor``.

    Raises:
        QueryArgumentError: ``cursor`` was not made by ``encode_cursor`` (``BAD_USER_INPUT``).
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, run_id = json.loads(raw)
        if not isinstance(run_id, str):
            raise TypeError
        return SortKey(parse_datetime(created), run_id)
    except (binascii.Error, ValueError, TypeError, OverflowError, UnicodeDecodeError):
        raise QueryArgumentError(
            f"`{argument}` is not a valid cursor; use a cursor returned by this API", argument=argument
        ) from None


@dataclass(frozen=True, kw_only=True)
class PageRequest:
    """Validated pagination arguments."""

    limit: int
    skip: int = 0
    after: SortKey | None = None
    before: SortKey | None = None
    from_end: bool = False
    page_number: int | None = None


def page_request(
    *,
    page: PageInput | None,
    first: int | None,
    after: str | None,
    last: int | None,
    before: str | None,
    max_page_size: int,
) -> PageRequest:
    """Check the pagination arguments (docs/api.md "Pagination").

    Raises:
        QueryArgumentError: A rule is broken; the message names the argument.
    """
    cursor_args = [
        name
        for name, value in (("first", first), ("after", after), ("last", last), ("before", before))
        if value is not None
    ]
    if page is not None:
        if cursor_args:
            raise QueryArgumentError(
                f"use either `page` or cursor pagination, not both (got `page` and `{cursor_args[0]}`)",
                argument="page",
            )
        if page.per_page < 1:
            raise QueryArgumentError("`page.perPage` must be an integer >= 1", argument="page.perPage")
        if page.per_page > max_page_size:
            raise QueryArgumentError(f"`page.perPage` must be at most {max_page_size}", argument="page.perPage")
        if page.page < 0:
            raise QueryArgumentError("`page.page` must be an integer >= 0", argument="page.page")
        return PageRequest(limit=page.per_page, skip=page.page * page.per_page, page_number=page.page)
    if first is not None and last is not None:
        raise QueryArgumentError("use `first` or `last`, not both", argument="last")
    for name, value in (("first", first), ("last", last)):
        if value is not None and not 0 <= value <= max_page_size:
            raise QueryArgumentError(f"`{name}` must be between 0 and {max_page_size}", argument=name)
    after_key = None if after is None else decode_cursor(after, argument="after")
    before_key = None if before is None else decode_cursor(before, argument="before")
    if last is not None:
        return PageRequest(limit=last, after=after_key, before=before_key, from_end=True)
    return PageRequest(limit=max_page_size if first is None else first, after=after_key, before=before_key)


def to_store_filter(run_filter: SuspendedRunFilter | None) -> RunFilter:
    """The store filter; rejects ``fromDate`` later than ``toDate``.

    Raises:
        QueryArgumentError: ``filter.fromDate`` is after ``filter.toDate``.
    """
    if run_filter is None:
        return RunFilter()
    if (
        run_filter.from_date is not None
        and run_filter.to_date is not None
        and run_filter.from_date > run_filter.to_date
    ):
        raise QueryArgumentError("`filter.fromDate` must not be after `filter.toDate`", argument="filter.fromDate")
    return run_filter.to_run_filter()


async def suspended_runs_connection(
    info: Info,
    *,
    agent_id: str,
    run_filter: SuspendedRunFilter | None,
    page: PageInput | None,
    first: int | None,
    after: str | None,
    last: int | None,
    before: str | None,
) -> SuspendedRunConnection:
    """One page of an agent's suspended runs (Mastra's ``listSuspendedRuns()``), never reading histories.

    ``agent_id`` is a registered agent (the caller checked it: ``resolvers.agents.require_agent``)
    and the field's permission class checked ``runs:read``. Only runs the principal may see are
    listed and counted: its resources restrict the store query itself
    (``resolvers.access.restricted``), so pages stay full and counts true.

    Raises:
        QueryArgumentError: Bad arguments (``BAD_USER_INPUT``).
    """
    context = info.context
    store_filter = restricted(info, to_store_filter(run_filter))
    request = page_request(
        page=page, first=first, after=after, last=last, before=before, max_page_size=context.limits.max_page_size
    )
    store = context.store
    (docs, has_next, has_previous), count_runs = await with_total(
        info, lambda: store.count_runs(agent_id, store_filter), _page(info, agent_id, store_filter, request)
    )
    schemas = info.context.agents.tool_schemas()
    edges = [
        SuspendedRunEdge(cursor=encode_cursor(sort_key(d)), node=SuspendedRun.from_document(d, schemas)) for d in docs
    ]

    return SuspendedRunConnection(
        edges=edges,
        page_info=PageInfo(
            has_next_page=has_next,
            has_previous_page=has_previous,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        ),
        count_runs=count_runs,
    )


async def _page(
    info: Info, agent_id: str, store_filter: RunFilter, request: PageRequest
) -> tuple[list[SnapshotDocument], bool, bool]:
    """The page's runs, ``hasNextPage`` and ``hasPreviousPage``."""
    docs = await info.context.store.list_runs(
        agent_id,
        store_filter,
        RunPage(
            limit=request.limit + 1,
            skip=request.skip,
            after=request.after,
            before=request.before,
            from_end=request.from_end,
        ),
    )
    more = len(docs) > request.limit
    if request.from_end:
        docs = docs[1:] if more else docs
        has_next = request.before is not None and await _exists(
            info, agent_id, store_filter, after=docs, fallback=request.before
        )
        return docs, has_next, more
    docs = docs[: request.limit]
    if request.page_number is not None:
        return docs, more, request.page_number > 0
    has_previous = request.after is not None and await _exists(
        info, agent_id, store_filter, before=docs, fallback=request.after
    )
    return docs, more, has_previous


async def with_total(
    info: Info, count: Callable[[], Awaitable[int]], page: Awaitable[T]
) -> tuple[T, Callable[[], Awaitable[int]]]:
    """A connection's page (``page`` awaited) and its ``totalCount`` resolver: when the document
    selects ``totalCount`` (``selects_total``), ``count()`` starts before the page is read and runs
    beside it (its error raised by ``totalCount`` only if the response still reads it; cancelled
    if the page fails); otherwise it is called only if ``totalCount`` is resolved after all.

    Raises:
        Whatever awaiting ``page`` raises.
    """
    counting = asyncio.ensure_future(count()) if selects_total(info) else None
    if counting is not None:
        counting.add_done_callback(_retrieved)
    try:
        read = await page
    except BaseException:
        if counting is not None:
            counting.cancel()
        raise

    async def total() -> int:
        return await (counting if counting is not None else count())

    return read, total


def _retrieved(task: asyncio.Future[int]) -> None:
    """Mark a finished count's error as seen: a response that fails first never reads it."""
    if not task.cancelled():
        task.exception()


def selects_total(info: Info) -> bool:
    """Whether the connection being resolved selects ``totalCount`` (directly or through a
    fragment, and not turned off by ``@skip``/``@include`` with a literal or a variable)."""
    pending: list[Any] = [s for field in info.selected_fields for s in field.selections]
    while pending:
        selection = pending.pop()
        directives = selection.directives
        if directives.get("skip", {}).get("if") is True or directives.get("include", {}).get("if") is False:
            continue
        if isinstance(selection, SelectedField):
            if selection.name == "totalCount":
                return True
        else:  # a fragment spread or an inline fragment
            pending.extend(selection.selections)
    return False


async def _exists(
    info: Info,
    agent_id: str,
    store_filter: RunFilter,
    *,
    fallback: SortKey,
    before: list[SnapshotDocument] | None = None,
    after: list[SnapshotDocument] | None = None,
) -> bool:
    """Whether a matching run lies before the page's first run (or after its last).

    One index probe of limit 1 (Relay: report it when it can be done efficiently), for the run
    next to the bound, so a store reads from the bound, not from the newest run. For an empty
    page the cursor's position is the bound.
    """
    store = info.context.store
    if before is not None:
        bound = sort_key(before[0]) if before else fallback
        return bool(await store.list_runs(agent_id, store_filter, RunPage(limit=1, before=bound, from_end=True)))
    bound = sort_key(after[-1]) if after else fallback
    return bool(await store.list_runs(agent_id, store_filter, RunPage(limit=1, after=bound)))


__all__ = [
    "decode_cursor",
    "encode_cursor",
    "page_request",
    "selects_total",
    "suspended_runs_connection",
    "with_total",
]
