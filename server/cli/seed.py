"""``runsgate seed``: the data generator on the command line, with a progress bar (``rich``), into
the store the settings (or ``--store``) name, made by the registry (``storage.store_from_url``):
any store several processes share, so that a server then serves the runs (not the memory store)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from typing import Protocol, runtime_checkable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from runtime.seed import SeedPlan, seed_store
from storage import DuplicateRunError, NewerSchemaError, SnapshotStore, StoreUnavailableError, store_from_url
from storage.registry import store_entry

from ..settings import ConfigError, load_settings
from . import INVALID, refused, store_setting

IN_PROCESS = "which lives inside the server process: seed it at start instead, RUNSGATE_SEED_RUNS=N runsgate serve"
"""Why ``runsgate seed`` refuses a store no other process can share (the memory store)."""


@runtime_checkable
class Resettable(Protocol):
    """A store ``runsgate seed --reset`` can empty: ``drop_all`` deletes every stored run, event and
    key (its tables or collections; ``open`` makes them again), as the SQLite and MongoDB stores do."""

    async def drop_all(self) -> None: ...


def run_seed_command(args: argparse.Namespace) -> int:
    """Seed the configured store; returns the exit status (2: bad arguments or config, or a store
    no other process shares, 1: store error)."""
    try:
        store_url = getattr(args, "store", None)
        settings = load_settings(**({"store": store_url} if store_url else {}))
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    try:
        # each field of the plan is the command option of its name (--runs, --agents, ...)
        plan = SeedPlan(**{option.name: getattr(args, option.name) for option in dataclasses.fields(SeedPlan)})
    except ValueError as exc:  # "runs must be >= 0": the message begins with the option's name
        option, _, why = str(exc).partition(" ")
        print(f"{INVALID}--{option}: {why} (got {getattr(args, option, '?')})", file=sys.stderr)
        return 2
    entry = store_entry(settings.store_url)  # the settings checked that a store takes it
    if not entry.shared:
        setting = store_setting(store_url, settings)
        if setting is None:  # the default
            why = (
                f"the store is the {entry.name} store (neither --store, RUNSGATE_STORE nor MONGODB_URI names another), "
            )
            print(f"{INVALID}{why}{IN_PROCESS}", file=sys.stderr)
        else:
            why = f"the store is the {entry.name} store, {IN_PROCESS}"
            print(INVALID + refused(setting, why, settings.store_url), file=sys.stderr)
        return 2
    store = store_from_url(
        settings.store_url,
        server_selection_timeout=settings.mongodb_timeout,
        socket_timeout=settings.mongodb_socket_timeout,
    )
    if args.reset and not isinstance(store, Resettable):
        print(f"{INVALID}--reset: the {entry.name} store cannot delete its runs, events and keys", file=sys.stderr)
        return 2
    try:
        written, seconds = asyncio.run(_seed(store, plan, reset=args.reset))
    except (StoreUnavailableError, DuplicateRunError, NewerSchemaError) as exc:
        print(f"runsgate seed: {exc}", file=sys.stderr)
        return 1
    rate = written / seconds if seconds else 0.0
    print(f"wrote {written} suspended runs in {seconds:.1f} s ({rate:,.0f} runs/s)")
    return 0


async def _seed(store: SnapshotStore, plan: SeedPlan, *, reset: bool) -> tuple[int, float]:
    await store.open()
    try:
        if reset and isinstance(store, Resettable):  # run_seed_command refused --reset on any other store
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
