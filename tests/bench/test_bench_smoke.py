"""The benchmark machinery at a tiny size, so it cannot rot (no timing is asserted).

It starts real ``python -m bench.serve`` processes as ``python -m bench`` does: one on the
memory store seeded at start, one on a SQLite file and one on MongoDB seeded by ``runsgate
seed``, and one and two workers on that SQLite file. Before measuring,
``bench.runner.bodies`` checks that each scenario answers a page without errors, that
``/bench/raw-page`` answers exactly the JSON of ``/graphql``, and that the 90% cursor page equals
the 90% ``page``/``perPage`` page. wrk is used when installed (``./dev bench`` installs it);
otherwise the same scenarios are sent one after another.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from pydantic_ai import models

from bench.__main__ import bulk_lines, ratios, table, workers_lines
from bench.__main__ import main as bench_main
from bench.bulk import measure as bulk_measure
from bench.runner import (
    SCENARIOS,
    Settings,
    SizeResult,
    bench_memory,
    bench_mongo,
    bench_sqlite,
    bench_workers,
    median_round,
    paired_ratio,
)
from bench.wrk import LoadResult, parse

models.ALLOW_MODEL_REQUESTS = False

WRK_OUTPUT = """Running 2s test @ http://127.0.0.1:18123/graphql
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.10ms    1.20ms  20.00ms   90.00%
    Req/Sec     1.90k   100.00     2.00k    80.00%
  Latency Distribution
     50%    4.80ms
     75%    5.50ms
     90%    6.60ms
     99%  950.00us
  3800 requests in 2.00s, 9.10MB read
  Non-2xx or 3xx responses: 2
Requests/sec:   1899.50
Transfer/sec:      4.55MB
"""

SETTINGS = Settings(seconds=2, rounds=2, connections=2, round_trips=2, seed_threads=10, sequential_samples=2)


def test_wrk_output_is_read_with_its_units() -> None:
    result = parse(WRK_OUTPUT)

    assert result.requests_per_second == 1899.5
    assert result.p50_ms == 4.8
    assert result.p99_ms == pytest.approx(0.95)
    assert result.requests == 3800
    assert result.errors == 2


def test_a_scenario_keeps_its_median_round() -> None:
    def load(rps: float) -> LoadResult:
        return LoadResult(requests_per_second=rps, p50_ms=1000 / rps, p99_ms=2000 / rps, requests=int(rps), errors=0)

    assert median_round([load(900), load(1200), load(700)]).requests_per_second == 900
    assert median_round([load(900), load(700)]).requests_per_second == 700  # the lower middle
    assert Settings(seconds=10, rounds=3).round_seconds == 3
    assert Settings(seconds=1, rounds=3).round_seconds == 1


def test_a_ratio_is_the_median_of_its_ratios_within_rounds() -> None:
    def load(rps: float) -> LoadResult:
        return LoadResult(requests_per_second=rps, p50_ms=1000 / rps, p99_ms=2000 / rps, requests=int(rps), errors=0)

    def rps(load: LoadResult) -> float:
        return load.requests_per_second

    # the machine was slow during raw's second run only (the two median rounds differ: 600 / 520)
    rounds = {"graphql first": [load(300), load(600), load(660)], "raw first": [load(500), load(520), load(1100)]}
    result = SizeResult(store="memory", runs=10, rounds=rounds)
    result.loads = {name: median_round(loads) for name, loads in rounds.items()}

    assert paired_ratio(result, "graphql first", "raw first", rps) == pytest.approx(0.6)  # 0.6, 1.15, 0.6
    # without rounds (sequential samples): the ratio of the two scenarios' figures
    unpaired = SizeResult(store="ferretdb", runs=10, loads=result.loads)
    assert paired_ratio(unpaired, "graphql first", "raw first", rps) == pytest.approx(600 / 520)


def test_wrk_output_without_figures_is_an_error() -> None:
    with pytest.raises(ValueError, match="not understood"):
        parse("unable to connect to 127.0.0.1:1 Connection refused")


@pytest.mark.process
def test_memory_bench_at_a_tiny_size(tmp_path: Path) -> None:
    result = bench_memory(60, SETTINGS, tmp_path, with_wrk=shutil.which("wrk") is not None)

    assert set(result.loads) == set(SCENARIOS)
    assert all(load.requests > 0 and load.errors == 0 for load in result.loads.values())
    assert result.round_trip_ms is not None
    assert result.peak_rss_mb is not None
    assert result.peak_rss_mb > 0
    assert "| memory | 60 | graphql first |" in "\n".join(table([result]))
    assert len(ratios([result])) == 3


@pytest.mark.mongo
@pytest.mark.process
def test_mongo_bench_at_a_tiny_size(tmp_path: Path, mongodb_uri: str) -> None:
    result = bench_mongo(mongodb_uri, 40, SETTINGS, tmp_path)

    assert set(result.loads) == set(SCENARIOS)
    assert all(load.requests == 2 for load in result.loads.values())
    assert result.round_trip_ms is not None


@pytest.mark.process
@pytest.mark.skipif(
    shutil.which("wrk") is None, reason="the SQLite rows are measured with wrk (./dev bench installs it)"
)
def test_sqlite_bench_and_workers_at_a_tiny_size(tmp_path: Path) -> None:
    result = bench_sqlite(tmp_path / "bench.db", 60, SETTINGS, tmp_path)

    assert set(result.loads) == set(SCENARIOS)
    assert all(load.requests > 0 and load.errors == 0 for load in result.loads.values())
    assert result.store_open_seconds is not None
    assert "| sqlite | 60 | graphql first |" in "\n".join(table([result]))

    workers = bench_workers(tmp_path / "bench.db", 60, SETTINGS, tmp_path)
    assert len(workers.one) == len(workers.two) == SETTINGS.rounds
    assert workers.ratio > 0
    assert "--workers 2 / one worker" in workers_lines([workers])[0]


@pytest.mark.process
@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_bulk_bench_at_a_tiny_size(store: str) -> None:
    figures = bulk_measure(store, 1, 3)

    assert figures["sequential_ms"] > 0
    assert figures["bulk_ms"] > 0
    assert figures["ratio"] == figures["bulk_ms"] / figures["sequential_ms"]
    (line,) = bulk_lines({store: {**figures, "rounds": 1, "calls": 3}})
    assert line.startswith(f"- {store}, 3 approvals: one decideToolCalls / 3 sequential approveToolCall = ")


@pytest.mark.process
def test_the_bounded_memory_benchmark_runs_at_a_tiny_size() -> None:
    from bench.bounded_memory import measure_receiver, measure_replay

    receiver = measure_receiver(1, deliveries=2)
    replay = measure_replay(50, subscriptions=2)

    assert receiver.deliveries == 2
    assert receiver.rss_mib > 0
    assert (replay.events, replay.received) == (50, 100)


def test_the_event_retention_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    import asyncio

    from bench.event_retention import _count, measure, seed
    from storage import utcnow

    # 150 finished runs, 120 of them past the period: one pass deletes 100, the rest wait
    now = utcnow()
    path = tmp_path / "runs.db"
    seed(path, 150, 120, now)
    assert _count(path) == (150, 750)

    ms, deleted = asyncio.run(measure(path, now))

    assert deleted == 100
    assert ms > 0
    assert _count(path) == (50, 250)


def test_the_report_names_every_option_it_was_measured_with(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    options = ["--memory", "", "--sqlite", "", "--workers-runs", "0", "--bulk-rounds", "0", "--documentdb", ""]
    options += ["--approval-rounds", "0"]
    measured_with = ["--samples", "7", "--round-trips", "5", "--mongo-round-trips", "4", "--rounds", "2"]

    assert bench_main([*options, *measured_with, "--out", str(out)]) == 0

    command = next(line for line in out.read_text().splitlines() if line.startswith("Command: "))
    recorded = shlex.split(command.split("`")[1])
    assert recorded[:2] == ["./dev", "bench"]
    for option, value in zip(measured_with[::2], measured_with[1::2], strict=True):
        assert option in recorded
        assert recorded[recorded.index(option) + 1] == value, option


@pytest.mark.process
def test_the_cost_attacks_benchmark_runs_at_a_tiny_size() -> None:
    from bench.cost_attacks import SHAPES, check_times, fragment_bomb, measure_attacks

    checked = check_times({"bomb": fragment_bomb(10), **dict(list(SHAPES.items())[:1])}, repeat=1)
    rounds = measure_attacks(3, 1, [1], 0.5, ["bomb", "big", "atlimit", "overlimit"], 64 * 1024)

    assert [c.outcome for c in checked] == ["cost 3", "Validation aborted."]
    assert [(r.attack, r.clients) for r in rounds] == [("idle", 0)] + [
        (attack, 1) for attack in ("bomb", "big", "atlimit", "overlimit")
    ]
    assert [r.outcome for r in rounds[1:]] == ["answered", "QUERY_TOO_COSTLY", "answered", "RESPONSE_TOO_LARGE"]
    assert all(r.healthz for r in rounds)
