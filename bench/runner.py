"""The benchmark: seed a store, start a real runsgate process, load it with ``wrk``, report.

For each store and size N it starts ``python -m bench.serve`` (``runsgate serve`` with the raw
endpoint mounted: uvicorn, the full HTTP stack); the memory store is filled at start by
``RUNSGATE_SEED_RUNS=N``, a SQLite or MongoDB one beforehand by ``runsgate seed``. Every scenario first
checks one answer (20 runs, no errors; the raw endpoint's JSON equal to GraphQL's), then runs
``wrk`` for a fixed time with a fixed number of connections. The server's peak RSS is read from
``/proc/<pid>/status`` (``VmHWM``) after its last scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from server.settings import DEMO_AGENTS
from storage import RunFilter, SQLiteSnapshotStore
from storage.protocol import RunPage
from tests._servers import ROOT, free_port, listening_process

from .queries import AGENT, APPROVE, PAGE_SIZE, START_REFUND, page_body
from .wrk import LoadResult, run_wrk


@dataclass(kw_only=True)
class Settings:
    """How hard and how long to measure."""

    seconds: float = 10.0
    """wrk time per scenario, split into ``rounds``."""
    rounds: int = 5
    """Interleaved rounds: every scenario runs ``round_seconds`` once per round, and its figures
    are those of its median round (by requests per second), chosen for each scenario on its own.
    On a shared machine the speed drifts by 20% over minutes; ratios are taken within each round
    (``paired_ratio``), where the two scenarios ran seconds apart."""

    @property
    def round_seconds(self) -> int:
        """wrk time of one round, whole seconds (what wrk's ``-d`` takes), at least 1."""
        return max(1, round(self.seconds / self.rounds))

    connections: int = 10
    """Open connections wrk keeps busy (the issue's calibration used 10)."""
    round_trips: int = 20
    """approve -> completed round trips timed per store."""
    seed_threads: int = 1000
    """Distinct threads of the seeded runs (a thread holds N / 1000 runs)."""
    start_timeout: float = 1800.0
    """Seconds a server may take to start (seeding 1M runs into memory happens at start)."""
    sequential_samples: int = 3
    """Requests per scenario on MongoDB (DocumentDB, FerretDB 1.24), sent one after another instead
    of with wrk: there a page takes up to seconds (a sort of every match; on FerretDB 1.24 a full
    scan too), so wrk's fixed duration would count nothing."""


@dataclass(kw_only=True)
class SizeResult:
    """Every figure measured on one store at one size."""

    store: str
    runs: int
    loads: dict[str, LoadResult] = field(default_factory=dict)
    """Scenario -> its figures (with wrk: its median round)."""
    rounds: dict[str, list[LoadResult]] = field(default_factory=dict)
    """Scenario -> its figures in each round, in order (wrk only)."""
    round_trip_ms: float | None = None
    peak_rss_mb: float | None = None
    seed_seconds: float = 0.0
    start_seconds: float = 0.0
    """From starting ``runsgate serve`` to its port accepting connections (Python's imports included)."""
    store_open_seconds: float | None = None
    """The store's own part of a start: opening it and reading the first page, in this process."""


SCENARIOS = ["graphql first", "raw first", "graphql thread", "raw thread", "graphql 90% cursor", "graphql 90% page"]


def _env(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNSGATE_") and k != "MONGODB_URI"}
    # loopback only, so authentication may be off: the bench measures listing, not token checks
    env.update({"RUNSGATE_LOG_LEVEL": "WARNING", "RUNSGATE_AUTH": "off", "RUNSGATE_AGENTS": DEMO_AGENTS, **variables})
    return env


@contextmanager
def runsgate_server(log: Path, timeout: float, *, workers: int = 1, **variables: str) -> Iterator[tuple[str, int]]:
    """A ``python -m bench.serve`` process (``--workers``); yields its base URL and pid, stops it afterwards."""
    with _served(ROOT, log, timeout, workers, variables) as served:
        yield served


@contextmanager
def checkout_server(source: Path, log: Path, timeout: float, **variables: str) -> Iterator[tuple[str, int]]:
    """``runsgate_server`` of the code at ``source`` (a checkout, e.g. ``git archive`` of an older commit)."""
    with _served(source, log, timeout, 1, variables) as served:
        yield served


@contextmanager
def _served(
    source: Path, log: Path, timeout: float, workers: int, variables: dict[str, str]
) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [sys.executable, "-m", "bench.serve", "--port", str(port)]
    if workers != 1:
        command += ["--workers", str(workers)]
    env = _env(**variables)
    if source != ROOT:
        env["PYTHONPATH"] = str(source)
    with listening_process(command, port, log, cwd=source, env=env, timeout=timeout, stop_timeout=30) as proc:
        yield f"http://127.0.0.1:{port}", proc.pid


def peak_rss_mb(pid: int) -> float:
    """``VmHWM`` of a process: its peak resident set size, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def _post(client: httpx.Client, path: str, body: str) -> dict[str, Any]:
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    if answer.get("errors"):
        raise RuntimeError(f"{path} answered errors: {answer['errors']}")
    return answer


def _gql(client: httpx.Client, query: str, **variables: Any) -> dict[str, Any]:
    data: dict[str, Any] = _post(client, "/graphql", json.dumps({"query": query, "variables": variables}))["data"]
    return data


def bodies(client: httpx.Client, runs: int, *, base: str = "") -> dict[str, tuple[str, str]]:
    """Scenario -> (path, body), each checked once: a full page, raw JSON whose ``data`` equals
    GraphQL's (``base``: the server's URL when ``client`` has none)."""
    deep = max(0, (runs * 9 // 10) // PAGE_SIZE)
    before_deep = _post(client, base + "/graphql", page_body(page={"page": max(0, deep - 1), "perPage": PAGE_SIZE}))
    cursor = before_deep["data"]["suspendedRuns"]["pageInfo"]["endCursor"]
    first, thread = page_body(first=PAGE_SIZE), page_body(first=PAGE_SIZE, filter={"threadId": "thread-7"})
    chosen = {
        "graphql first": ("/graphql", first),
        "raw first": ("/bench/raw-page", first),
        "graphql thread": ("/graphql", thread),
        "raw thread": ("/bench/raw-page", thread),
        "graphql 90% cursor": ("/graphql", page_body(first=PAGE_SIZE, after=cursor)),
        "graphql 90% page": ("/graphql", page_body(page={"page": deep, "perPage": PAGE_SIZE})),
    }
    answers = {name: _post(client, base + path, body) for name, (path, body) in chosen.items()}
    for name, answer in answers.items():
        edges = answer["data"]["suspendedRuns"]["edges"]
        if runs >= PAGE_SIZE * 10 and "thread" not in name and len(edges) != PAGE_SIZE:
            raise RuntimeError(f"{name}: expected a full page of {PAGE_SIZE}, got {len(edges)}")
    for kind in ("first", "thread"):  # the same data; GraphQL's answer also reports its cost (extensions)
        if answers[f"raw {kind}"]["data"] != answers[f"graphql {kind}"]["data"]:
            raise RuntimeError(f"/bench/raw-page and /graphql disagree on the {kind} page")
    if answers["graphql 90% cursor"] != answers["graphql 90% page"]:
        raise RuntimeError("the 90% cursor page and the 90% page/perPage page differ")
    return chosen


def round_trip_ms(client: httpx.Client, count: int) -> float:
    """Median milliseconds of ``approveToolCall`` on a fresh refund run, up to its COMPLETED answer."""
    timings = []
    for i in range(count):
        started = _gql(client, START_REFUND, prompt=f"Please refund order {1042 + i % 2}")["startRun"]
        call = started["run"]["toolCalls"][0]["toolCallId"]
        begin = time.perf_counter()
        outcome = _gql(client, APPROVE, runId=started["runId"], toolCallId=call)["approveToolCall"]
        timings.append((time.perf_counter() - begin) * 1000)
        if outcome.get("status") != "COMPLETED":
            raise RuntimeError(f"approve did not complete the run: {outcome}")
    return statistics.median(timings)


def sequential(client: httpx.Client, path: str, body: str, samples: int) -> LoadResult:
    """``samples`` requests one after another: median latency, the slowest as "p99", 1 / mean as req/s."""
    timings = []
    for _ in range(samples):
        begin = time.perf_counter()
        _post(client, path, body)
        timings.append((time.perf_counter() - begin) * 1000)
    return LoadResult(
        requests_per_second=1000 * len(timings) / sum(timings),
        p50_ms=statistics.median(timings),
        p99_ms=max(timings),
        requests=len(timings),
        errors=0,
    )


DRAIN_TIMEOUT = 1800
"""Seconds a bench waits for one answer, ``/readyz`` behind the requests wrk left queued included,
which on a loaded machine can take minutes (the test suite runs the benches at tiny sizes)."""


def measure(url: str, pid: int, result: SizeResult, settings: Settings, *, with_wrk: bool = True) -> None:
    """Every scenario against one running server, then the round trip and the peak RSS.

    With wrk, every scenario first runs for one second unrecorded (warm-up); then each is
    measured in ``Settings.rounds`` interleaved rounds and keeps its median round.
    ``with_wrk=False``: sequential samples instead of wrk (``Settings.sequential_samples``).
    """
    with httpx.Client(base_url=url, timeout=DRAIN_TIMEOUT) as client:
        chosen = bodies(client, result.runs)
        if with_wrk:  # without it, the first scenario measured was 10-25% slower than the same work later
            for name in SCENARIOS:
                run_wrk(url + chosen[name][0], chosen[name][1], seconds=1, connections=settings.connections)
                drain(client)
            rounds: dict[str, list[LoadResult]] = {name: [] for name in SCENARIOS}
            for _ in range(settings.rounds):
                for name in SCENARIOS:
                    path, body = chosen[name]
                    rounds[name].append(
                        run_wrk(
                            url + path,
                            body,
                            seconds=settings.round_seconds,
                            connections=settings.connections,
                        )
                    )
                    drain(client)
            result.rounds = rounds
            for name in SCENARIOS:
                result.loads[name] = median_round(rounds[name])
        else:
            for name in SCENARIOS:
                path, body = chosen[name]
                result.loads[name] = sequential(client, path, body, settings.sequential_samples)
        for name in SCENARIOS:
            print(f"  {result.store} {result.runs:>9,} {name:<20} {_describe(result.loads[name])}", flush=True)
        result.round_trip_ms = round_trip_ms(client, settings.round_trips)
    result.peak_rss_mb = peak_rss_mb(pid)


def drain(client: httpx.Client) -> None:
    """Wait until the server has answered what wrk left queued (``/readyz`` reads the store
    behind the pending requests), so a slow scenario's backlog is not measured in the next one."""
    client.get("/readyz")


def paired_ratio(result: SizeResult, numerator: str, denominator: str, figure: Callable[[LoadResult], float]) -> float:
    """``figure(numerator) / figure(denominator)``: with rounds, the median of the ratios within
    each round (the two scenarios ran seconds apart, so the machine's drift cancels out); else
    the ratio of the two scenarios' figures."""
    pairs = list(zip(result.rounds.get(numerator, []), result.rounds.get(denominator, []), strict=True))
    if not pairs:
        return figure(result.loads[numerator]) / figure(result.loads[denominator])
    measured = [(a, b) for a, b in pairs if a.requests and b.requests]  # a round that completed nothing has no figure
    if not measured:
        return float("nan")
    return statistics.median(figure(a) / figure(b) for a, b in measured)


def median_round(loads: list[LoadResult]) -> LoadResult:
    """The round whose requests per second is the median (the lower middle one for an even count)."""
    ordered = sorted(loads, key=lambda load: load.requests_per_second)
    return ordered[(len(ordered) - 1) // 2]


def _describe(load: LoadResult) -> str:
    return f"{load.requests_per_second:9.1f} req/s  p50 {load.p50_ms:8.2f} ms  p99 {load.p99_ms:8.2f} ms"


def bench_memory(runs: int, settings: Settings, logs: Path, *, with_wrk: bool = True) -> SizeResult:
    """The memory store seeded with ``runs`` runs at start (``with_wrk=False``: sequential samples)."""
    result = SizeResult(store="memory", runs=runs)
    began = time.monotonic()
    with runsgate_server(
        logs / f"memory-{runs}.log",
        settings.start_timeout,
        RUNSGATE_SEED_RUNS=str(runs),
        RUNSGATE_SEED_THREADS=str(settings.seed_threads),
    ) as (url, pid):
        result.start_seconds = time.monotonic() - began
        measure(url, pid, result, settings, with_wrk=with_wrk)
    return result


def seed(settings: Settings, runs: int, **variables: str) -> float:
    """``runsgate seed --runs N`` into the store the variables name; returns the seconds it took."""
    began = time.monotonic()
    seeded = subprocess.run(
        [sys.executable, "-m", "server", "seed", "--runs", str(runs), "--threads", str(settings.seed_threads)],
        cwd=ROOT,
        env=_env(**variables),
        capture_output=True,
        text=True,
        check=False,
    )
    if seeded.returncode != 0:
        raise RuntimeError(f"runsgate seed failed: {seeded.stderr[-3000:]}")
    return time.monotonic() - began


def bench_sqlite(path: Path, runs: int, settings: Settings, logs: Path) -> SizeResult:
    """A new SQLite file at ``path`` seeded by ``runsgate seed``, served by one process, measured with wrk."""
    result = SizeResult(store="sqlite", runs=runs)
    store = f"sqlite:///{path}"
    result.seed_seconds = seed(settings, runs, RUNSGATE_STORE=store)
    result.store_open_seconds = asyncio.run(_open_seconds(path))
    began = time.monotonic()
    with runsgate_server(logs / f"sqlite-{runs}.log", settings.start_timeout, RUNSGATE_STORE=store) as (url, pid):
        result.start_seconds = time.monotonic() - began
        measure(url, pid, result, settings)
    return result


async def _open_seconds(path: Path) -> float:
    """Seconds to open the SQLite store at ``path`` (as a server's lifespan does) and read its first page."""
    began = time.monotonic()
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        await store.list_runs(AGENT, RunFilter(), RunPage(limit=PAGE_SIZE))
    finally:
        await store.close()
    return time.monotonic() - began


@dataclass(kw_only=True)
class WorkersResult:
    """First-page throughput of ``--workers 2`` against one worker, on one SQLite file."""

    runs: int
    one: list[LoadResult] = field(default_factory=list)
    """One worker, each round."""
    two: list[LoadResult] = field(default_factory=list)
    """Two workers, each round."""

    @property
    def ratio(self) -> float:
        """Median of (two workers' req/s / one worker's req/s) within each round."""
        return statistics.median(
            b.requests_per_second / a.requests_per_second for a, b in zip(self.one, self.two, strict=True)
        )


def bench_workers(path: Path, runs: int, settings: Settings, logs: Path) -> WorkersResult:
    """``runsgate serve`` with one and with two workers on the same seeded SQLite file (``path``,
    already seeded with ``runs`` runs), both running; wrk loads the first page of each in turn, one
    round at a time (each after one unrecorded second)."""
    result = WorkersResult(runs=runs)
    store = f"sqlite:///{path}"
    with (
        runsgate_server(logs / "sqlite-workers-1.log", settings.start_timeout, RUNSGATE_STORE=store) as (one, _),
        runsgate_server(logs / "sqlite-workers-2.log", settings.start_timeout, workers=2, RUNSGATE_STORE=store) as (
            two,
            _,
        ),
    ):
        with httpx.Client(timeout=DRAIN_TIMEOUT) as client:
            for url in (one, two):
                body = bodies(client, runs, base=url)["graphql first"][1]
        for url in (one, two):
            run_wrk(url + "/graphql", body, seconds=1, connections=settings.connections)
            httpx.get(url + "/readyz", timeout=DRAIN_TIMEOUT)
        for _ in range(settings.rounds):
            for url, loads in ((one, result.one), (two, result.two)):
                loads.append(
                    run_wrk(url + "/graphql", body, seconds=settings.round_seconds, connections=settings.connections)
                )
    return result


def bench_mongo(
    uri: str, runs: int, settings: Settings, logs: Path, *, store: str = "ferretdb", with_wrk: bool = False
) -> SizeResult:
    """A MongoDB database seeded by ``runsgate seed`` (``uri`` names a fresh database), its rows
    labelled ``store`` (``ferretdb``, ``documentdb``); sequential samples unless ``with_wrk``."""
    result = SizeResult(store=store, runs=runs)
    result.seed_seconds = seed(settings, runs, MONGODB_URI=uri)
    began = time.monotonic()
    with runsgate_server(logs / f"{store}-{runs}.log", settings.start_timeout, MONGODB_URI=uri) as (url, pid):
        result.start_seconds = time.monotonic() - began
        measure(url, pid, result, settings, with_wrk=with_wrk)
    return result


@dataclass
class PairedRoundTrips:
    """approve -> completed on several sizes of one store, servers all running, in paired rounds."""

    store: str
    rounds: dict[int, list[float]] = field(default_factory=dict)
    """Runs -> that size's median round trip in ms, each round."""

    @property
    def ratio(self) -> float:
        """Median of (the largest size's round trip / the smallest's) within each round."""
        small, large = min(self.rounds), max(self.rounds)
        return statistics.median(b / a for a, b in zip(self.rounds[small], self.rounds[large], strict=True))


def paired_round_trips(store: str, uris: dict[int, str], settings: Settings, logs: Path) -> PairedRoundTrips:
    """One server per size (``uris``: runs -> its seeded database), all running; in each of
    ``Settings.rounds`` rounds every size times ``max(3, round_trips // rounds)`` approvals in turn,
    so the machine's drift falls on both sides of each ratio."""
    result = PairedRoundTrips(store, {runs: [] for runs in uris})
    per_round = max(3, settings.round_trips // settings.rounds)
    with contextlib.ExitStack() as servers:
        urls = {
            runs: servers.enter_context(
                runsgate_server(logs / f"{store}-{runs}-paired.log", settings.start_timeout, MONGODB_URI=uri)
            )[0]
            for runs, uri in uris.items()
        }
        clients = {runs: servers.enter_context(httpx.Client(base_url=url, timeout=1800)) for runs, url in urls.items()}
        for client in clients.values():
            round_trip_ms(client, 1)  # warm-up: imports, connections
        for _ in range(settings.rounds):
            for runs, client in clients.items():
                result.rounds[runs].append(round_trip_ms(client, per_round))
    return result


__all__ = [
    "SCENARIOS",
    "Settings",
    "SizeResult",
    "WorkersResult",
    "bench_memory",
    "bench_mongo",
    "bench_sqlite",
    "bench_workers",
    "checkout_server",
    "measure",
    "paired_round_trips",
    "runsgate_server",
]
