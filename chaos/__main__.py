"""``python -m chaos`` (``./dev chaos``): a soak and chaos run of runsgate; see docs/chaos.md.

Exit status 0 when the checker found no violation, 1 when it found some (or its window outgrew
``--retention``), 2 on a usage error, a window outside ``--retention`` among them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .checker import Checker
from .cluster import STORES, Cluster, Faults, schedule
from .driver import GIVE_UP_AFTER, Driver

CHECK_ALLOWANCE = 120.0
"""Seconds the checker's reads after the drain are allowed in the planned window."""
DEFAULT_RETENTION = 86_400.0
"""The shortest of the instances' retention defaults (``RUNSGATE_IDEMPOTENCY_KEY_RETENTION``)."""


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--instances", type=int, default=3)
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--runs", type=int, default=None, help="runs to start (default 2000)")
    amount.add_argument("--seconds", type=float, default=None, help="start runs for this long instead")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8, help="runs driven at once")
    parser.add_argument("--fault-every", type=float, default=6.0, help="mean seconds between faults (0: none)")
    parser.add_argument(
        "--faults", type=int, default=0, help="go on starting runs until this many faults were injected (default 0)"
    )
    parser.add_argument("--claim-ttl", type=float, default=2.0, help="RUNSGATE_CLAIM_TTL of the instances")
    parser.add_argument("--sweep-interval", type=float, default=0.5, help="RUNSGATE_SWEEP_INTERVAL")
    parser.add_argument("--run-seconds", type=float, default=60.0, help="max seconds one run is driven")
    parser.add_argument("--drain", type=float, default=60.0, help="max seconds to wait for stalled runs")
    parser.add_argument("--workdir", type=Path, default=None, help="logs, ledger, store, report.json")
    parser.add_argument(
        "--ready-within", type=float, default=90.0, help="seconds an instance gets to start (more on a loaded machine)"
    )
    parser.add_argument("--broken-claim", action="store_true", help="break the claim's compare-and-set (checker test)")
    parser.add_argument(
        "--retention",
        type=float,
        default=None,
        help="every retention setting of the instances, seconds (events, keys, deliveries, run updates)",
    )
    args = parser.parse_args(argv)
    if args.runs is None and args.seconds is None:
        args.runs = 2000
    return args


def planned_window(args: argparse.Namespace) -> float:
    """Seconds from the first run's start to the checker's last read, at most: the workload (each
    run driven up to ``--run-seconds``; with ``--runs``, ceil(runs / concurrency) of them in a row;
    with ``--faults``, until the schedule's faults were injected), the drain and ``CHECK_ALLOWANCE``.
    At least ``GIVE_UP_AFTER``: the driver repeats a request with its idempotency key that long."""
    if args.seconds is not None:
        workload = args.seconds + args.run_seconds
    else:
        workload = math.ceil(args.runs / args.concurrency) * args.run_seconds
    if args.faults and args.fault_every > 0:
        faults = schedule(args.seed, args.store, args.claim_ttl, args.fault_every, args.faults)
        workload = max(workload, sum(f.after + f.duration for f in faults) + args.run_seconds)
    return max(float(workload + args.drain + CHECK_ALLOWANCE), GIVE_UP_AFTER)


def window_refusal(args: argparse.Namespace) -> str | None:
    """Why the run must not start (its planned window is not inside ``--retention``), or None."""
    if args.retention is None:
        return None
    if args.retention <= 5.0:
        return f"chaos: --retention {args.retention:g} must exceed RUNSGATE_SUBSCRIPTION_LOOKBACK (5 s)"
    window = planned_window(args)
    if window >= args.retention:
        return (
            f"chaos: the checker's window, up to {window:g} s (workload, drain, checks; at least the driver's "
            f"{GIVE_UP_AFTER:g} s of key replays), is not inside --retention {args.retention:g}: the instances "
            "would delete events and keys it reads back; raise --retention or shorten the run (--seconds)"
        )
    return None


async def drain(cluster: Cluster, driver: Driver, seconds: float) -> None:
    """Wait until no run is RESUMING or decided-but-unclaimed (the sweepers take those over)."""
    deadline = time.monotonic() + seconds
    from .checker import _client

    checker = Checker(driver, cluster.ledger)
    async with _client(driver):
        while time.monotonic() < deadline:
            busy = 0
            for agent in set(driver.runs.values()):
                for node in (await checker.listed(agent)).values():
                    decided = all(c["decision"] is not None for c in node["toolCalls"])
                    if node["status"] == "RESUMING" or (decided and node["lastError"] is None):
                        busy += 1
            if not busy:
                return
            await asyncio.sleep(1.0)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    refusal = window_refusal(args)
    if refusal is not None:
        raise ValueError(refusal)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="runsgate-chaos-"))
    cluster = Cluster(
        workdir,
        store=args.store,
        size=args.instances,
        claim_ttl=args.claim_ttl,
        sweep_interval=args.sweep_interval,
        broken_claim=args.broken_claim,
        ready_within=args.ready_within,
        retention=args.retention,
    )
    try:
        await cluster.start()  # inside: an instance that does not start must not leave the others running
        faults = Faults(cluster, schedule(args.seed, args.store, args.claim_ttl, args.fault_every))
        driver = Driver(
            [i.url for i in cluster.instances],
            seed=args.seed,
            concurrency=args.concurrency,
            run_seconds=args.run_seconds,
            store_calm=faults.store_calm if args.fault_every > 0 else None,
        )
        stop = asyncio.Event()
        injecting = asyncio.create_task(faults.run(stop)) if args.fault_every > 0 else None
        # The workload lasts until its faults were injected: a quiet machine gets through its runs
        # sooner, and would otherwise end before the schedule's later faults.
        until = faults.reached(args.faults) if injecting is not None else None
        if injecting is not None and until is not None:
            injecting.add_done_callback(lambda _: until.set())  # a failed injector ends the wait too
        await driver.run(args.runs, args.seconds, until=until)
        stop.set()
        if injecting is not None:
            await injecting
        await drain(cluster, driver, args.drain)
        checker = Checker(driver, cluster.ledger)
        await checker.check()
        window = time.monotonic() - driver.started_at
        retention = args.retention if args.retention is not None else DEFAULT_RETENTION
        report = checker.report()
        report.update(
            retention=retention,
            retentionSet=args.retention is not None,
            plannedWindow=planned_window(args),
            windowSeconds=round(window, 1),
            windowInsideRetention=window < retention,
            store=args.store,
            seed=args.seed,
            instances=args.instances,
            claimTtl=args.claim_ttl,
            faults=dict(faults.injected),
            faultLog=faults.log,
            workdir=str(workdir),
            brokenClaim=args.broken_claim,
        )
        (workdir / "report.json").write_text(json.dumps(report, indent=1, default=str))
        (workdir / "history.json").write_text(json.dumps(driver.history, default=str))
        return report
    finally:
        cluster.stop()


def summary(report: dict[str, Any]) -> str:
    keys = [
        "store",
        "seed",
        "runs",
        "outcomes",
        "requests",
        "decisionsAcknowledged",
        "effects",
        "faults",
        "seconds",
        "runsPerSecond",
        "decisionsPerSecond",
        "violationCount",
        "violationsByRule",
        "retention",
        "windowSeconds",
        "windowInsideRetention",
        "workdir",
    ]
    return "\n".join(f"{key}: {report[key]}" for key in keys)


def run(argv: list[str]) -> int:
    args = parse(argv)
    refusal = window_refusal(args)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    report = asyncio.run(main(args))
    print(summary(report))
    return 1 if report["violationCount"] or not report["windowInsideRetention"] else 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
