"""Cost attacks (issue 42, part A): what a fragment bomb and a big answer do to a real server.

Three measurements:

- **validation**: the time to check the fragment bomb document (each fragment spreading the one
  before it twice, ``{ agents { ...F<n-1> } }``) at n levels, in process, as the server checks a
  document: parse with its token limit, validate with its rules, cost it (``resolvers.documents.cost``);
  the median of ``--repeat`` runs. Also the shapes that made checks grow faster than the
  document (fields repeated in one selection set, fragments spread side by side), and, with
  ``--before``, Strawberry 0.341's depth and alias limiters on the smaller bombs.
- **healthz**: on one ``python -m server serve`` process (authentication off, on loopback, a
  SQLite store holding ``--runs`` refund runs started with ``--prompt-kib`` KiB prompts), each
  attack sent by 1 to 8 clients at once (``--clients``), each client sending it again as soon as
  it is answered, for ``--seconds``; meanwhile one client asks ``/healthz`` every 10 ms, and the
  same is measured idle first. Prints p50, p99 and the slowest ``/healthz``, the attacks answered,
  and the server's peak RSS (``VmHWM``, reset first) against its RSS before.
- The attacks: ``bomb``, the 40-level fragment bomb; ``big``, issue 42's big answer (20 aliased
  ``conversation(maxBytes: 1048576)`` for each of 100 runs: refused for its cost); ``atlimit``,
  20 aliased ``conversation(maxBytes: 32768)`` of as many runs as make an answer just within
  ``--limit`` (``RUNSGATE_MAX_RESPONSE_BYTES``; 6 runs, 3.9 MB, for 4 MiB; within the cost
  limit: answered); ``overlimit``, the same for 4 more runs (past the limit: refused once that
  much is encoded); ``events``, every run's ``events { data }`` (3.3 MB, cost 2,101: answered),
  whose reads from the store are what its cost cannot tell.

    ./dev run python -m bench.cost_attacks [--runs 100] [--prompt-kib 32] [--clients 1,2,4,8] [--seconds 10]

Figures: bench/RESULTS.md "Cost attacks (issue 42, part A)".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
from graphql import GraphQLError, parse, specified_rules, validate

from .bounded_memory import memory_kib, reset_peak, serve

MIB = 1 << 20
DEFAULT_LIMIT = 4 * MIB
"""``RUNSGATE_MAX_RESPONSE_BYTES``' default (``server.settings``)."""
START = "mutation S($input: StartRunInput!) { startRun(input: $input) { __typename ... on RunOutcome { status } } }"
AGENT = "refund-agent"


def fragment_bomb(levels: int, body: str = "id") -> str:
    """``F0 { <body> }``, then ``F<i> { ...F<i-1> ...F<i-1> }`` up to ``F<levels-1>``, spread by
    ``{ agents { ... } }``: about 20 bytes a level, 2^(levels-1) copies of ``body`` once inlined."""
    fragments = [f"fragment F0 on Agent {{ {body} }}"] + [
        f"fragment F{i} on Agent {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels)
    ]
    return f"query {{ agents {{ ...F{levels - 1} }} }}\n" + "\n".join(fragments)


def page(selection: str, size: int = 100) -> str:
    return f'{{ suspendedRuns(agentId: "{AGENT}", first: {size}) {{ nodes {{ {selection} }} }} }}'


def conversations(max_bytes: int) -> str:
    """20 aliased conversations of a run, each of up to ``max_bytes`` of text."""
    return " ".join(f"c{i}: conversation(maxBytes: {max_bytes}) {{ messages {{ text }} }}" for i in range(20))


def attacks(at_limit: int) -> dict[str, str]:
    """Each attack's document; ``at_limit`` runs' 20 conversations of 32 KiB make an answer just
    within the budget, 4 more runs' pass it."""
    return {
        "bomb": fragment_bomb(40),
        "big": page(conversations(1048576)).replace("first: 100", "page: {page: 0, perPage: 100}"),
        "atlimit": page(conversations(32768), at_limit),
        "overlimit": page(conversations(32768), at_limit + 4),
        "events": page("events { data }"),
    }


ATTACKS = attacks(6)
"""The attacks' names, and their documents for the default budget and 32 KiB prompts."""

SHAPES = {
    "fields sharing a name (1,990 x `id`)": "{ agents { " + "id " * 1990 + "} }",
    "fields sharing a name, with selections (300 x `suspendedRuns { totalCount }`)": (
        "{ agents { " + "suspendedRuns { totalCount } " * 300 + "} }"
    ),
    "fragments spread side by side (200)": (
        "{ agents { "
        + " ".join(f"...F{i}" for i in range(200))
        + " } } "
        + " ".join(f"fragment F{i} on Agent {{ id }}" for i in range(200))
    ),
    "aliases (600, refused)": "{ agents { " + " ".join(f"a{i}: id" for i in range(600)) + " } }",
}
"""Documents within the token limit whose checks grew faster than their size."""


# -- validation -------------------------------------------------------------------------------------------
@dataclass
class Checked:
    name: str
    size: int
    parse_ms: float
    validate_ms: float
    cost_ms: float
    outcome: str


def check_times(documents: dict[str, str], repeat: int) -> list[Checked]:
    """Parse, validate and cost each document as the server does, ``repeat`` times: the medians."""
    from strawberry.extensions import AddValidationRules
    from strawberry.schema.schema import validate_document

    from resolvers.documents.cost import CostLimits, document_cost, schema_of
    from resolvers.schema import build_schema
    from server.http.limits import graphql_extensions
    from server.settings import Settings

    settings = Settings(mongodb_uri=None, auth=False)
    extensions = graphql_extensions(settings)
    schema = build_schema(extensions=extensions, compiled_execution=False)
    rules: tuple[Any, ...] = tuple(
        rule
        for factory in extensions
        if isinstance(ext := factory(), AddValidationRules)
        for rule in ext.validation_rules
    )
    rules = (*specified_rules, *rules)
    graphql = schema_of(schema)
    limits = CostLimits(max_page_size=settings.max_page_size, agents=3)
    results = []
    for name, text in documents.items():
        parses, validations, costs = [], [], []
        outcome = "valid"
        for _ in range(repeat):
            started = time.perf_counter()
            try:
                document = parse(text, max_tokens=settings.max_query_tokens)
            except GraphQLError as error:
                outcome = error.message[:60]
                break
            parsed = time.perf_counter()
            errors = validate_document(graphql, document, rules)
            validated = time.perf_counter()
            found = None if errors else document_cost(graphql, document, None, None, limits)
            costed = time.perf_counter()
            parses.append(parsed - started)
            validations.append(validated - parsed)
            costs.append(costed - validated)
            if errors:
                outcome = errors[0].message[:60]
            elif found is not None:
                outcome = f"cost {found[0]:,}"
        results.append(
            Checked(
                name,
                len(text),
                statistics.median(parses or [0]) * 1000,
                statistics.median(validations or [0]) * 1000,
                statistics.median(costs or [0]) * 1000,
                outcome,
            )
        )
    return results


def strawberry_limiter_times(levels: list[int]) -> list[tuple[int, float]]:
    """Strawberry 0.341's depth and alias limiters alone on the bombs of ``levels``, ms."""
    from strawberry.extensions import max_aliases, query_depth_limiter

    from resolvers.documents.cost import schema_of
    from resolvers.schema import schema

    graphql = schema_of(schema)
    rules = [query_depth_limiter.create_validator(10, None, None), max_aliases.create_validator(20)]
    found = []
    for n in levels:
        document = parse(fragment_bomb(n))
        started = time.perf_counter()
        validate(graphql, document, rules)
        found.append((n, (time.perf_counter() - started) * 1000))
    return found


# -- encoding -------------------------------------------------------------------------------------------
ENCODED = {
    "20 conversations of 32 KiB for 6 runs (3.9 MB: one orjson call)": {
        "data": {"suspendedRuns": {"nodes": [{f"c{i}": {"messages": [{"text": "y" * 32700}]} for i in range(20)}] * 6}}
    },
    "the same for 10 runs (6.5 MB: refused)": {
        "data": {"suspendedRuns": {"nodes": [{f"c{i}": {"messages": [{"text": "y" * 32700}]} for i in range(20)}] * 10}}
    },
    "50,000 texts of 60 characters (3.7 MB: written piece by piece)": {
        "data": {"items": [{"text": "x" * 60, "n": n} for n in range(50_000)]}
    },
}
"""Answers to encode within a 4 MiB budget, as ``server.http.encoding`` does."""


async def _longest_hold(answer: Any, limit: int) -> tuple[float, float, int]:
    """``encode_within(answer, limit)``: its time, the longest time another task waited for a
    turn of the event loop meanwhile (ms), and the bytes written (0: refused)."""
    from server.http.encoding import encode_within

    longest = 0.0
    done = False

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    started = time.perf_counter()
    encoded = await encode_within(answer, limit)
    took = time.perf_counter() - started
    done = True
    await ticker
    return took * 1000, longest * 1000, sum(map(len, encoded or []))


def encoding_holds(limit: int, repeat: int) -> list[tuple[str, float, float, int]]:
    """Each of ``ENCODED``: the median time to encode it, the median longest hold, its bytes."""
    found = []
    for name, answer in ENCODED.items():
        runs = [asyncio.run(_longest_hold(answer, limit)) for _ in range(repeat)]
        found.append((name, statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2]))
    return found


# -- attacks ----------------------------------------------------------------------------------------------
@dataclass
class Round:
    attack: str
    clients: int
    answered: int
    answer_bytes: int
    outcome: str
    healthz: list[float]
    rss_mib: float
    peak_growth_mib: float


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _probe(url: str, seconds: float, results: Connection) -> None:
    """In a process of its own (so the attacking clients' work never delays it): ``/healthz``
    every 10 ms for ``seconds``; each answer's time, ms, sent through ``results``."""
    found = []
    with httpx.Client(base_url=url, timeout=60) as client:
        client.get("/healthz")
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            started = time.perf_counter()
            response = client.get("/healthz")
            found.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
            time.sleep(0.01)
    results.send(found)


async def _attack(url: str, document: str, until: float, seen: dict[str, Any]) -> int:
    """Send ``document`` again as soon as it is answered until ``until``: the answers. A bare
    HTTP/1.1 client (one keep-alive connection) that reads each answer by its ``Content-Length``
    and parses only the first: the client's own work stays small beside the server's."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"query": document}).encode()
    request = (
        f"POST /graphql HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    reader, writer = await asyncio.open_connection(host, int(port))
    answered = 0
    try:
        while time.perf_counter() < until:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            answer = await reader.readexactly(length)
            answered += 1
            seen["bytes"] = max(seen.get("bytes", 0), length)
            if "outcome" not in seen:
                errors = json.loads(answer).get("errors") or []
                seen["outcome"] = errors[0]["extensions"].get("code", "error") if errors else "answered"
    finally:
        writer.close()
    return answered


async def _round(
    url: str, document: str | None, clients: int, seconds: float
) -> tuple[list[float], int, dict[str, Any]]:
    """``clients`` sending ``document`` (none: idle) for ``seconds``, and ``/healthz`` meanwhile."""
    receiving, sending = multiprocessing.Pipe(duplex=False)
    probe = multiprocessing.Process(target=_probe, args=(url, seconds, sending))
    probe.start()
    until = time.perf_counter() + seconds
    seen: dict[str, Any] = {}
    attacks = [] if document is None else [_attack(url, document, until, seen) for _ in range(clients)]
    answered = sum(await asyncio.gather(*attacks)) if attacks else 0
    healthz: list[float] = await asyncio.to_thread(receiving.recv)
    probe.join()
    return healthz, answered, seen


def seed(url: str, runs: int, prompt_bytes: int) -> None:
    prompt = "Please refund order 1042. "
    prompt += "Details follow. " * ((prompt_bytes - len(prompt)) // 16)
    prompt += "x" * (prompt_bytes - len(prompt))
    with httpx.Client(base_url=url, timeout=120) as client:
        for _ in range(runs):
            variables = {"input": {"agentId": AGENT, "prompt": prompt}}
            answer = client.post("/graphql", json={"query": START, "variables": variables}).json()
            assert answer["data"]["startRun"]["status"] == "SUSPENDED", answer


WARM_UP = ["{ agents { id } }", '{ suspendedRuns(agentId: "refund-agent", first: 1) { nodes { runId } } }']
"""Requests that load every module a round uses, and hold nothing afterwards."""


def measure_attacks(
    runs: int, prompt_kib: int, clients: list[int], seconds: float, names: list[str], limit: int
) -> list[Round]:
    """A round per attack and number of clients (and one idle first), each on a fresh server
    process answering at most ``limit`` bytes, over one SQLite file holding the runs: its RSS
    before is its RSS once warmed up, its peak growth what the round added to it."""
    rounds = []
    documents = attacks(max(1, int(0.95 * limit) // (20 * min(prompt_kib * 1024, 32768) + 4000)))
    with tempfile.TemporaryDirectory(prefix="runsgate-bench-") as folder:
        database = Path(folder) / "runsgate.db"
        env = {
            "RUNSGATE_STORE": f"sqlite:///{database}",
            "RUNSGATE_SWEEP_INTERVAL": "0",
            "RUNSGATE_TOOL_RULES": "[]",
            "RUNSGATE_MAX_RESPONSE_BYTES": str(limit),
        }
        with serve(Path(folder) / "seed.log", **env) as server:
            seed(server.url, runs, prompt_kib * 1024)
        for attack, count in [("idle", 0)] + [(attack, count) for attack in names for count in clients]:
            with serve(Path(folder) / f"{attack}-{count}.log", **env) as server:
                for document in WARM_UP:
                    httpx.post(f"{server.url}/graphql", json={"query": document}, timeout=300)
                before = memory_kib(server.pid)["VmRSS"]
                reset_peak(server.pid)
                healthz, answered, seen = asyncio.run(_round(server.url, documents.get(attack), count, seconds))
                peak = memory_kib(server.pid)["VmHWM"]
            rounds.append(
                Round(
                    attack,
                    count,
                    answered,
                    seen.get("bytes", 0),
                    seen.get("outcome", ""),
                    healthz,
                    before / 1024,
                    (peak - before) / 1024,
                )
            )
            print(_round_line(rounds[-1]), flush=True)
    return rounds


def _latency(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} | {_percentile(values, 0.99):.1f} | {max(values):.1f} | {len(values)}"


def _round_line(r: Round) -> str:
    return (
        f"| {r.attack} | {r.clients} | {r.answered} | {r.outcome} | {r.answer_bytes:,} | {_latency(r.healthz)} "
        f"| {r.rss_mib:.0f} MiB | {r.peak_growth_mib:+.1f} MiB |"
    )


@contextmanager
def _section(title: str) -> Iterator[None]:
    print(f"\n{title}", flush=True)
    yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="refund runs in the store")
    parser.add_argument("--prompt-kib", type=int, default=32, help="each run's prompt, KiB")
    parser.add_argument("--clients", default="1,2,4,8", help="attacking clients at once")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each round")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="which attacks")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="the server's RUNSGATE_MAX_RESPONSE_BYTES (default: its default)",
    )
    parser.add_argument("--levels", default="10,20,40,80,150", help="fragment bomb levels to check ('' to skip)")
    parser.add_argument("--repeat", type=int, default=20, help="checks of each document (the median)")
    parser.add_argument("--before", default="10,14,18", help="levels for Strawberry's limiters ('' to skip)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    if args.levels:
        with _section(f"checking a document (median of {args.repeat}), ms"):
            print("| document | bytes | parse | validate | cost | outcome |")
            print("| --- | ---: | ---: | ---: | ---: | --- |")
            documents = {f"fragment bomb, {n} levels": fragment_bomb(n) for n in map(int, args.levels.split(","))}
            documents.update(SHAPES)
            for c in check_times(documents, args.repeat):
                times = f"{c.parse_ms:.2f} | {c.validate_ms:.2f} | {c.cost_ms:.2f}"
                print(f"| {c.name} | {c.size:,} | {times} | {c.outcome} |", flush=True)
    with _section(f"encoding an answer within {args.limit:,} bytes (median of 5), ms"):
        print("| answer | encoding | longest wait for the event loop | bytes written |")
        print("| --- | ---: | ---: | ---: |")
        for name, took, hold, size in encoding_holds(args.limit, 5):
            print(f"| {name} | {took:.1f} | {hold:.1f} | {size:,} |", flush=True)
    if args.before:
        with _section("Strawberry 0.341's depth and alias limiters alone (before), ms"):
            for n, ms in strawberry_limiter_times([int(n) for n in args.before.split(",")]):
                print(f"- {n} levels: {ms:.1f}", flush=True)
    with _section(
        f"attacks on {args.runs} runs with {args.prompt_kib} KiB prompts, answers of at most {args.limit:,} bytes, "
        f"{args.seconds:g} s per round; "
        "/healthz every 10 ms (ms: p50 | p99 | max | answers)"
    ):
        print(
            "| attack | clients | attacks answered | answer | largest answer, bytes | p50 | p99 | max | n "
            "| server RSS before | peak growth |"
        )
        print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        measure_attacks(
            args.runs,
            args.prompt_kib,
            [int(n) for n in args.clients.split(",")],
            args.seconds,
            [name for name in args.attacks.split(",") if name],
            args.limit,
        )
    print(f"\nload average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
