"""Listing pages with their ``totalCount`` at two sizes, before and after a change, in paired rounds:
``./dev run python -m bench.listing_totals [options]`` (issue 44, docs/benchmarks.md "Listing totals").

For each store (SQLite files, FerretDB 2.5 on DocumentDB) and size it serves one seeded store with
a real ``python -m bench.serve`` process per version: this checkout, and with ``--before DIR`` the
same command run from DIR (a checkout of the code before the change, e.g. ``git archive``). Then,
in each of ``--rounds`` rounds, every server in turn answers ``--per-round`` requests of each
scenario sent one after another:

- ``page+total``, ``thread page+total``, ``resource page+total``: the first page of 20 with
  ``totalCount``, unfiltered, of ``thread-7``, of ``customer-3``; ``next page+total``: the
  unfiltered page after the first;
- ``page``, ``raw page``: the first page of 20 without a total, through GraphQL and through
  ``/bench/raw-page`` (the same store calls without GraphQL);
- ``queue page+total``, ``queue thread page+total``, ``queue resource page+total``: the
  reviewers' queue (``reviewQueue``, every agent) read the same way: its first 20 questions with
  ``totalCount``, unfiltered, of ``thread-7``, of ``customer-3`` (issue 45: the same flat cost as
  ``suspendedRuns``).

Each figure is the median over the rounds of a scenario's median in that round; each ratio is
the median over the rounds of the ratio within the round (large size / small size, after /
before, raw / GraphQL, queue / listing of the same filter), where both sides ran seconds apart,
so the machine's drift cancels.
Seeded stores are kept (``--files`` for SQLite, ``--documentdb-uri`` for a running server) so a
later run measures the same runs; the seed is ``runsgate seed --threads 100 --resources 10 --seed
44`` (a thread holds N / 100 runs, a resource N / 10). Both versions read one SQLite file; on
DocumentDB each version has a database of its own, seeded by its own code (a version's open makes
its own listing indexes, which would change the other's plans).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pymongo import MongoClient

from tests._servers import ROOT, documentdb, free_port, listening_process, with_database

from .queries import AGENT, PAGE_SIZE, page_body

PAGE_WITH_TOTAL = """
query PageWithTotal($agentId: ID!, $first: Int, $after: String, $filter: SuspendedRunFilter) {
  suspendedRuns(agentId: $agentId, first: $first, after: $after, filter: $filter) {
    totalCount
    edges {
      cursor
      node {
        runId status threadId resourceId createdAt suspendedAt
        toolCalls { toolCallId toolName args requiresApproval suspendPayload }
      }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""
"""``bench.queries.PAGE``'s page with its ``totalCount``."""

QUEUE_WITH_TOTAL = """
query QueueWithTotal($first: Int, $filter: ReviewQueueFilter) {
  reviewQueue(first: $first, filter: $filter) {
    totalCount
    edges {
      cursor
      node { agentId runId toolCallId toolName expiresAt toolCall { args requiresApproval suspendPayload } }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""
"""A page of the reviewers' queue with its ``totalCount``, as ``PAGE_WITH_TOTAL`` reads a listing's."""

THREADS, RESOURCES = 100, 10
THREAD, RESOURCE = "thread-7", "customer-3"


def _with_total(**variables: Any) -> str:
    return json.dumps({"query": PAGE_WITH_TOTAL, "variables": {"agentId": AGENT, **variables}}, separators=(",", ":"))


def _queue_with_total(**variables: Any) -> str:
    return json.dumps({"query": QUEUE_WITH_TOTAL, "variables": variables}, separators=(",", ":"))


SCENARIOS: dict[str, tuple[str, str]] = {
    "page+total": ("/graphql", _with_total(first=PAGE_SIZE)),
    "thread page+total": ("/graphql", _with_total(first=PAGE_SIZE, filter={"threadId": THREAD})),
    "resource page+total": ("/graphql", _with_total(first=PAGE_SIZE, filter={"resourceId": RESOURCE})),
    "next page+total": ("/graphql", ""),  # the page after the first, its cursor read at warm-up (``Server.bodies``)
    "page": ("/graphql", page_body(first=PAGE_SIZE)),
    "raw page": ("/bench/raw-page", page_body(first=PAGE_SIZE)),
    "queue page+total": ("/graphql", _queue_with_total(first=PAGE_SIZE)),
    "queue thread page+total": ("/graphql", _queue_with_total(first=PAGE_SIZE, filter={"threadId": THREAD})),
    "queue resource page+total": ("/graphql", _queue_with_total(first=PAGE_SIZE, filter={"resourceId": RESOURCE})),
}
"""Scenario -> (path, body)."""


@dataclass(kw_only=True)
class Server:
    """One running ``bench.serve`` process: a version of the code over one store at one size."""

    version: str
    store: str
    runs: int
    url: str
    rounds: dict[str, list[float]] = field(default_factory=dict)
    """Scenario -> its median milliseconds in each round."""
    totals: dict[str, int] = field(default_factory=dict)
    """Scenario -> the ``totalCount`` answered (checked equal across versions)."""
    bodies: dict[str, str] = field(default_factory=dict)
    """Scenario -> its body on this server, where it depends on the server's answers."""

    def median(self, scenario: str) -> float:
        return statistics.median(self.rounds[scenario])


def _env(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNSGATE_") and k != "MONGODB_URI"}
    env.update({"RUNSGATE_LOG_LEVEL": "WARNING", "RUNSGATE_AUTH": "off", "RUNSGATE_SWEEP_INTERVAL": "3600"})
    env["RUNSGATE_AGENTS"] = "runtime.demo:AGENTS"  # required to serve; an older checkout ignores it
    env.update(variables)
    return env


@contextlib.contextmanager
def serve(source: Path, log: Path, **variables: str) -> Iterator[str]:
    """``python -m bench.serve`` run from ``source`` (a checkout), until the block ends; yields its URL."""
    port = free_port()
    command = [sys.executable, "-m", "bench.serve", "--port", str(port)]
    env = _env(**variables)
    env["PYTHONPATH"] = str(source)
    with listening_process(command, port, log, cwd=source, env=env, timeout=1800, stop_timeout=30, marked=False):
        yield f"http://127.0.0.1:{port}"


def seed(runs: int, source: Path = ROOT, **variables: str) -> float:
    """``runsgate seed`` (run from ``source``) into the store the variables name; seconds taken."""
    began = time.monotonic()
    command = [sys.executable, "-m", "server", "seed", "--runs", str(runs), "--threads", str(THREADS)]
    command += ["--resources", str(RESOURCES), "--seed", "44"]
    env = {**_env(**variables), "PYTHONPATH": str(source)}
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"runsgate seed failed: {done.stderr[-3000:]}")
    return time.monotonic() - began


def sqlite_file(folder: Path, runs: int) -> Path:
    """``folder/sqlite-N.db``, seeded first when missing."""
    path = folder / f"sqlite-{runs}.db"
    if not path.exists():
        print(f"seeding {path} ({runs:,} runs)...", flush=True)
        print(f"  {seed(runs, RUNSGATE_STORE=f'sqlite:///{path}'):.0f} s", flush=True)
    return path


def documentdb_database(base: str, runs: int, version: str, source: Path) -> str:
    """The URI of database ``bench_totals_VERSION_N`` on the server at ``base``, seeded first by the
    code at ``source`` when it holds fewer runs (each version its own database: a version's open
    makes its own listing indexes, which would change the other's plans)."""
    uri = with_database(base, f"bench_totals_{version}_{runs}")
    client: MongoClient[dict[str, Any]]
    with MongoClient(uri) as client:
        # an exact count: DocumentDB's estimate comes from PostgreSQL's statistics, short after a seed
        held = client.get_default_database()["run_snapshots"].count_documents({})
    if held < runs:
        print(f"seeding {uri} ({runs:,} runs)...", flush=True)
        print(f"  {seed(runs, source, MONGODB_URI=uri):.0f} s", flush=True)
    return uri


def one_round(client: httpx.Client, server: Server, per_round: int) -> None:
    """``per_round`` sequential requests of each scenario against ``server``; records each median."""
    for name, (path, body) in SCENARIOS.items():
        body = server.bodies.get(name, body)
        timings = []
        for _ in range(per_round):
            began = time.perf_counter()
            response = client.post(server.url + path, content=body, headers={"content-type": "application/json"})
            timings.append((time.perf_counter() - began) * 1000)
            response.raise_for_status()
            answer = response.json()
            if answer.get("errors"):
                raise RuntimeError(f"{server.version} {server.store} {name}: {answer['errors']}")
        [page] = answer["data"].values()  # suspendedRuns or reviewQueue
        expected = min(PAGE_SIZE, page.get("totalCount", PAGE_SIZE))
        if len(page["edges"]) != expected:
            raise RuntimeError(f"{server.version} {server.store} {name}: {len(page['edges'])} runs, not {expected}")
        if "totalCount" in page:
            server.totals[name] = page["totalCount"]
        server.rounds.setdefault(name, []).append(statistics.median(timings))


def paired(servers: list[Server], a: Server, b: Server, name: str, other: str | None = None) -> float:
    """Median over the rounds of ``b``'s figure / ``a``'s (``other``: ``b``'s scenario, when it differs)."""
    return statistics.median(y / x for x, y in zip(a.rounds[name], b.rounds[other or name], strict=True))


def report(servers: list[Server]) -> str:
    """The figures as Markdown: each scenario's median, then the paired ratios."""
    lines = ["| store | runs | version | " + " | ".join(f"{name} ms" for name in SCENARIOS) + " | GraphQL/raw |"]
    lines.append("| --- | ---: | --- |" + " ---: |" * (len(SCENARIOS) + 1))
    for s in servers:
        ratio = paired(servers, s, s, "page", "raw page")
        cells = " | ".join(f"{s.median(name):.2f}" for name in SCENARIOS)
        lines.append(f"| {s.store} | {s.runs:,} | {s.version} | {cells} | {ratio:.2f} |")
    lines.append("")
    for s in servers:  # issue 45's target: a queue page costs what the listing's of the same filter does
        ratios = ", ".join(
            f"{name} {paired(servers, s, s, name, 'queue ' + name):.2f}"
            for name in ("page+total", "thread page+total", "resource page+total")
        )
        lines.append(f"- {s.store} {s.version}, {s.runs:,} runs, queue / listing of the same filter: {ratios}")
    for store in dict.fromkeys(s.store for s in servers):
        for version in dict.fromkeys(s.version for s in servers):
            mine = sorted((s for s in servers if s.store == store and s.version == version), key=lambda s: s.runs)
            if len(mine) >= 2:
                small, large = mine[0], mine[-1]
                growth = ", ".join(f"{name} {paired(servers, small, large, name):.2f}" for name in SCENARIOS)
                lines.append(f"- {store} {version}, {large.runs:,} / {small.runs:,} runs: {growth}")
        for runs in sorted({s.runs for s in servers if s.store == store}):
            pair = {s.version: s for s in servers if s.store == store and s.runs == runs}
            if {"before", "after"} <= set(pair):
                change = ", ".join(
                    f"{name} {paired(servers, pair['before'], pair['after'], name):.2f}" for name in SCENARIOS
                )
                lines.append(f"- {store}, {runs:,} runs, after / before: {change}")
                if pair["before"].totals != pair["after"].totals:
                    lines.append(f"  - **totals differ**: {pair['before'].totals} against {pair['after'].totals}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.listing_totals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqlite", default="10000,1000000", help="SQLite sizes ('' to skip)")
    parser.add_argument("--documentdb", default="10000,100000", help="DocumentDB sizes ('' to skip)")
    parser.add_argument("--files", type=Path, default=Path("/tmp/runsgate-bench-totals"), help="seeded SQLite files")
    parser.add_argument("--documentdb-uri", default="", help="a running FerretDB 2.5 (else one is started)")
    parser.add_argument("--before", type=Path, help="a checkout of the code before the change, served too")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write every round's figures here")
    args = parser.parse_args(argv)
    sizes = {
        store: [int(n) for n in text.split(",") if n.strip()]
        for store, text in (("sqlite", args.sqlite), ("documentdb", args.documentdb))
    }
    versions = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    args.files.mkdir(parents=True, exist_ok=True)
    print("load average at start:", " ".join(Path("/proc/loadavg").read_text().split()[:3]), flush=True)
    with contextlib.ExitStack() as stack:
        stores: list[tuple[str, int, str, dict[str, str]]] = []
        for runs in sizes["sqlite"]:
            file = sqlite_file(args.files, runs)  # one file for both versions: no planner to mislead
            stores += [("sqlite", runs, version, {"RUNSGATE_STORE": f"sqlite:///{file}"}) for version in versions]
        if sizes["documentdb"]:
            base = args.documentdb_uri or stack.enter_context(documentdb())
            for runs in sizes["documentdb"]:
                for version, source in versions.items():
                    uri = documentdb_database(base, runs, version, source)
                    stores.append(("documentdb", runs, version, {"MONGODB_URI": uri}))
        servers = []
        for store, runs, version, variables in stores:
            log = args.files / f"{store}-{runs}-{version}.log"
            url = stack.enter_context(serve(versions[version], log, **variables))
            servers.append(Server(version=version, store=store, runs=runs, url=url))
        client = stack.enter_context(httpx.Client(timeout=600))
        for server in servers:  # warm-up: imports, caches, connections; the second page's cursor
            for name, (path, body) in SCENARIOS.items():
                if name == "next page+total":
                    continue
                answer = client.post(server.url + path, content=body, headers={"content-type": "application/json"})
                if name == "page+total":
                    cursor = answer.json()["data"]["suspendedRuns"]["pageInfo"]["endCursor"]
                    server.bodies["next page+total"] = _with_total(first=PAGE_SIZE, after=cursor)
        for number in range(args.rounds):
            turn = servers[number % len(servers) :] + servers[: number % len(servers)]  # rotate who goes first
            for server in turn:
                one_round(client, server, args.per_round)
            print(
                f"round {number + 1}/{args.rounds} done, load {Path('/proc/loadavg').read_text().split()[0]}",
                flush=True,
            )
    print("load average at end:", " ".join(Path("/proc/loadavg").read_text().split()[:3]), flush=True)
    print(report(servers), flush=True)
    if args.json:
        args.json.write_text(json.dumps([s.__dict__ for s in servers], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
