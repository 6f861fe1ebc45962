"""What each piece of the fast path earns: ``./dev run python -m bench.pieces [runs] [requests] [rounds]``.

Calls the app as ASGI in process, as ``bench.inprocess`` does, with the benchmark's first page
(``bench.queries.PAGE``, 20 runs) and an ``Accept`` header as a GraphQL-over-HTTP client sends
it. One app has every piece; each other app is built, warmed up and measured with one piece
turned off: the fast path's through ``resolvers.fastpath.install`` (``Pieces``), the view's
prepared requests by leaving them out, the resolvers' own by replacing a function while that
app runs. Pieces are
compared in pairs with the full app, back to back (``measure``), over many short rounds, so a
burst of load from other processes counts for both sides of a pair; the control row (a second
full app) shows the method's own error. The function calls a request makes (exact, measured
once with ``sys.setprofile``) are given beside the CPU time, as a figure the load cannot move.

"Earns" is the share of the page's CPU time (with the piece off) that the piece saves:
``1 - with / without``. The standard path's own caches are compared on an app without compiled
execution, where they run for every request.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route

from resolvers import fastpath
from resolvers.fastpath import EVERY_PIECE, Pieces
from server.settings import DEMO_AGENTS, Settings
from server.view.graphql_view import GraphQLView

from . import inprocess
from .queries import PAGE_SIZE, page_body
from .serve import create_bench_app as create_app

ACCEPT = b"application/graphql-response+json, application/json;q=0.9"
"""The ``Accept`` header of the requests (as graphql-http clients send it)."""

Patch = tuple[object, str, object]
"""(owner, attribute, replacement): one attribute replaced while a piece is off."""


@dataclass(frozen=True)
class Piece:
    """A piece that can be turned off, and how."""

    name: str
    patches: Callable[[], list[Patch]] = list
    """Attributes of ``resolvers.types`` replaced while its app runs."""
    compiled: bool = True
    """Compared on apps with compiled execution (else on apps without)."""
    fastpath: Pieces = EVERY_PIECE
    """The fast path's shortcuts its app is built with (``resolvers.fastpath.install``)."""
    prepared_requests: bool = True
    """The view serves a JSON object's query or mutation itself (``server.view.prepared_http``)."""


def _from_fields() -> list[Patch]:
    from resolvers import types

    return [(types, "from_fields", lambda cls, fields: cls(**fields))]


class _CallEnum(dict[Any, Any]):
    def __init__(self, enum: Callable[[Any], Any]) -> None:
        super().__init__()
        self.enum = enum

    def __getitem__(self, value: Any) -> Any:
        return self.enum(value)


def _stored_enums() -> list[Patch]:
    from resolvers import types

    return [
        (types, "_RUN_STATUSES", _CallEnum(types.RunStatus)),
        (types, "_DECISION_KINDS", _CallEnum(types.DecisionKind)),
    ]


PIECES = [
    Piece("control: a second app with every piece (shows the method's own error)"),
    Piece("compiled completion (and the root plans, which need it)", fastpath=Pieces(compiled_completion=False)),
    Piece("prepared operations (and root plans, prepared requests)", fastpath=Pieces(prepared_operations=False)),
    Piece("root plans", fastpath=Pieces(root_plans=False)),
    Piece("the view's prepared requests", prepared_requests=False),
    Piece("from_fields", _from_fields),
    Piece("stored value -> enum dicts", _stored_enums),
    Piece("from_fields, standard path", _from_fields, compiled=False),
]


def build(settings: Settings, piece: Piece) -> Starlette:
    """The app of ``piece``: built with its fast path shortcuts (``install``'s ``pieces``)."""
    settings = settings.model_copy(update={"compiled_execution": piece.compiled})
    with patched([(fastpath, "install", functools.partial(fastpath.install, pieces=piece.fastpath))]):
        app = create_app(settings)
    if not piece.prepared_requests:
        graphql = next(route.endpoint for route in app.routes if isinstance(route, Route) and route.path == "/graphql")
        assert isinstance(graphql, GraphQLView)
        graphql.prepared = None
    return app


@contextmanager
def patched(patches: list[Patch]) -> Iterator[None]:
    """The attributes replaced, restored on leaving."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


async def call(app: Starlette, path: str, body: bytes) -> None:
    """POST ``body`` to ``path`` with ``ACCEPT`` (``bench.inprocess.call``; status must be 200)."""
    await inprocess.call(app, path, body, accept=ACCEPT)


@dataclass
class Scenario:
    app: Starlette
    path: str
    patches: list[Patch] = field(default_factory=list)

    async def calls(self, body: bytes, requests: int) -> float:
        """Python and C function calls a request makes (``sys.setprofile``): exact, whatever
        the load on the machine, and a rough measure of the CPU time of interpreted code."""
        count = 0

        def profile(frame: Any, event: str, arg: Any) -> None:
            nonlocal count
            if event in ("call", "c_call"):
                count += 1

        with patched(self.patches):
            gc.collect()
            gc.disable()  # a collection's finalizers would count in some requests and not others
            sys.setprofile(profile)
            try:
                for _ in range(requests):
                    await call(self.app, self.path, body)
            finally:
                sys.setprofile(None)
                gc.enable()
        return count / requests

    async def cpu_ms(self, body: bytes, requests: int) -> float:
        with patched(self.patches):
            began = time.process_time()
            for _ in range(requests):
                await call(self.app, self.path, body)
            return (time.process_time() - began) * 1000 / requests


async def measure(
    runs: int = 10_000, requests: int = 100, rounds: int = 15
) -> list[tuple[str, float, float, float, float, float, float]]:
    """Rows ``(what, CPU ms with everything, CPU ms without it, share earned, function calls
    with everything, without it, share of the calls earned)``.

    In each round, each piece's app and the full app it is compared with run ``requests``
    requests back to back (in turn first), so that both sides of a pair see the same load on
    the machine; the CPU figures are medians over the rounds, the share is the median of the
    pairs' ``1 - with / without``. The first rows compare the raw endpoint and the standard
    path with the full app the same way (last column: their CPU time / the full app's).
    """
    settings = Settings(  # no sweeper: its passes would land in some counts and not others
        agents=DEMO_AGENTS, mongodb_uri=None, seed_runs=runs, seed_threads=1000, auth=False, sweep_interval=0
    )
    body = page_body(first=PAGE_SIZE).encode()
    full = {True: create_app(settings), False: create_app(settings.model_copy(update={"compiled_execution": False}))}
    baselines = {True: Scenario(full[True], "/graphql"), False: Scenario(full[False], "/graphql")}
    compared: list[tuple[str, Scenario, Scenario]] = [
        ("raw page (last column: its CPU / the full app's)", baselines[True], Scenario(full[True], "/bench/raw-page")),
        ("standard path (last column: its CPU / the full app's)", baselines[True], baselines[False]),
    ]
    for piece in PIECES:
        patches = piece.patches()
        with patched(patches):
            app = build(settings, piece)
        compared.append((piece.name, baselines[piece.compiled], Scenario(app, "/graphql", patches)))
    scenarios = [*baselines.values(), *(other for _, _, other in compared)]
    async with _lifespans([s.app for s in scenarios]):
        for scenario in scenarios:
            for _ in range(50):
                with patched(scenario.patches):
                    await call(scenario.app, scenario.path, body)
        calls = {name: (await base.calls(body, 20), await other.calls(body, 20)) for name, base, other in compared}
        pairs: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in compared}
        for index in range(rounds):
            for name, base, other in compared:
                if index % 2:
                    other_ms = await other.cpu_ms(body, requests)
                    base_ms = await base.cpu_ms(body, requests)
                else:
                    base_ms = await base.cpu_ms(body, requests)
                    other_ms = await other.cpu_ms(body, requests)
                pairs[name].append((base_ms, other_ms))
    rows = []
    for position, (name, _, _) in enumerate(compared):
        base_calls, other_calls = calls[name]
        measured = pairs[name]
        with_it = statistics.median(b for b, _ in measured)
        without = statistics.median(o for _, o in measured)
        if position < 2:
            share = statistics.median(o / b for b, o in measured)
        else:
            share = statistics.median(1 - b / o for b, o in measured)
        call_share = other_calls / base_calls if position < 2 else 1 - base_calls / other_calls
        rows.append((name, with_it, without, share, base_calls, other_calls, call_share))
    return rows


@asynccontextmanager
async def _lifespans(apps: list[Starlette]) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        for app in apps:
            await stack.enter_async_context(app.router.lifespan_context(app))
        yield


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 10_000
    requests = int(argv[1]) if len(argv) > 1 else 100
    rounds = int(argv[2]) if len(argv) > 2 else 15
    print("| piece | CPU ms with it | without it | CPU earned | calls with it | without it | calls earned |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, with_it, without, earned, calls_with, calls_without, calls_earned in asyncio.run(
        measure(runs, requests, rounds)
    ):
        print(
            f"| {name} | {with_it:.3f} | {without:.3f} | {earned:.1%} "
            f"| {calls_with:,.0f} | {calls_without:,.0f} | {calls_earned:.1%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
