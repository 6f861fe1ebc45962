"""``runsgate seed``: the data generator on the command line, with a progress bar (``rich``), into
the SQLite or MongoDB store the settings (or ``--store``) name."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from runtime.seed import SeedPlan, seed_store
from storage import DuplicateRunError, MongoSnapshotStore, NewerSchemaError, SQLiteSnapshotStore, StoreUnavailableError

from ..settings import ConfigError, Settings, load_settings
from . import INVALID


def run_seed_command(args: argparse.Namespace) -> int:
    """Seed the configured SQLite or MongoDB store; returns the exit status (2: bad arguments or
    config, 1: store error)."""
    try:
        store_url = getattr(args, "store", None)
        settings = load_settings(**({"store": store_url} if store_url else {}))
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    try:
        plan = SeedPlan(
            runs=args.runs,
            agents=args.agents,
            threads=args.threads,
            resources=args.resources,
            days=args.days,
            seed=args.seed,
        )
    except ValueError as exc:  # "runs must be >= 0": the message begins with the option's name
        option, _, why = str(exc).partition(" ")
        print(f"{INVALID}--{option}: {why} (got {getattr(args, option, '?')})", file=sys.stderr)
        return 2
    if settings.sqlite_path is None and not settings.mongodb_uri:
        print(
            f"{INVALID}the store is the memory store (neither RUNSGATE_STORE nor MONGODB_URI names a SQLite "
            "or MongoDB store). The memory store lives inside the server process, so seed it at start instead: "
            "RUNSGATE_SEED_RUNS=N runsgate serve",
            file=sys.stderr,
        )
        return 2
    try:
        written, seconds = asyncio.run(_seed(settings, plan, reset=args.reset))
    except (StoreUnavailableError, DuplicateRunError, NewerSchemaError) as exc:
        print(f"runsgate seed: {exc}", file=sys.stderr)
        return 1
    rate = written / seconds if seconds else 0.0
    print(f"wrote {written} suspended runs in {seconds:.1f} s ({rate:,.0f} runs/s)")
    return 0


async def _seed(settings: Settings, plan: SeedPlan, *, reset: bool) -> tuple[int, float]:
    store: SQLiteSnapshotStore | MongoSnapshotStore
    if settings.sqlite_path is not None:
        store = SQLiteSnapshotStore(settings.sqlite_path)
    else:  # run_seed_command checked that a MongoDB URI is set
        store = MongoSnapshotStore(settings.mongodb_uri or "", server_selection_timeout=settings.mongodb_timeout)
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
