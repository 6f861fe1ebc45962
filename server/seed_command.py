"""``runsgate seed``: the data generator on the command line, with a progress bar (``rich``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from storage import DuplicateRunError, MongoSnapshotStore, StoreUnavailableError

from .config import ConfigError, load_settings
from .seed import SeedPlan, seed_store


def run_seed_command(args: argparse.Namespace) -> int:
    """Seed the configured MongoDB store; returns the exit status (2: bad arguments or config, 1: store error)."""
    try:
        settings = load_settings()
        plan = SeedPlan(
            runs=args.runs,
            agents=args.agents,
            threads=args.threads,
            resources=args.resources,
            days=args.days,
            seed=args.seed,
        )
    except (ConfigError, ValueError) as exc:
        print(f"runsgate seed: {exc}", file=sys.stderr)
        return 2
    if not settings.mongodb_uri:
        print(
            "runsgate seed: MONGODB_URI is not set. The memory store lives inside the server process, so seed it "
            "at start instead: RUNSGATE_SEED_RUNS=N runsgate serve",
            file=sys.stderr,
        )
        return 2
    try:
        written, seconds = asyncio.run(_seed(settings.mongodb_uri, settings.mongodb_timeout, plan, reset=args.reset))
    except (StoreUnavailableError, DuplicateRunError) as exc:
        print(f"runsgate seed: {exc}", file=sys.stderr)
        return 1
    rate = written / seconds if seconds else 0.0
    print(f"wrote {written} suspended runs in {seconds:.1f} s ({rate:,.0f} runs/s)")
    return 0


async def _seed(uri: str, selection_timeout: float, plan: SeedPlan, *, reset: bool) -> tuple[int, float]:
    store = MongoSnapshotStore(uri, server_selection_timeout=selection_timeout)
    await store.open()
    try:
        if reset:
            await store.drop_all()
            await store.open()
        started = time.monotonic()
        with Progress(
            TextColumn("seeding"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=False,
        ) as bar:
            task = bar.add_task("runs", total=plan.runs)
            written = await seed_store(store, plan, progress=lambda n: bar.update(task, completed=n))
        return written, time.monotonic() - started
    finally:
        await store.close()
