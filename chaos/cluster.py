"""The processes of a chaos run: N runsgate instances on one store, and the faults done to them.

A ``Cluster`` starts ``python -m server serve`` N times on fixed loopback ports (so a restarted
instance answers at the same URL), on one SQLite file or one MongoDB database (FerretDB 1.24, or
FerretDB 2.5 on PostgreSQL with DocumentDB), with the chaos agents, a short claim TTL and a fast
sweeper. ``Faults`` draws a schedule from a seed and applies it: SIGKILL (restart after a delay),
SIGSTOP/SIGCONT longer than the claim TTL, the store stopped and restarted (FerretDB 1.24; for
DocumentDB, PostgreSQL crashed or FerretDB killed, in turns) or its file held under ``BEGIN
IMMEDIATE`` by another connection (SQLite).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests import _processes
from tests._documentdb import DocumentDB, free_port, listening

ROOT = Path(__file__).resolve().parent.parent

STORES = ("sqlite", "ferretdb", "documentdb")
"""``--store``: a SQLite file, FerretDB 1.24 (SQLite backend), FerretDB 2.5 on DocumentDB."""


@dataclass
class Instance:
    index: int
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    """N runsgate processes sharing one store. ``store`` is one of ``STORES``."""

    workdir: Path
    store: str = "sqlite"
    size: int = 3
    claim_ttl: float = 2.0
    sweep_interval: float = 0.5
    broken_claim: bool = False
    ready_within: float = 90.0
    """Seconds an instance gets to answer ``/healthz`` after it is started (more on a loaded machine)."""
    retention: float | None = None
    """Every retention setting of the instances (events, keys, deliveries, run updates); None: their defaults."""
    instances: list[Instance] = field(default_factory=list)
    ferretdb: subprocess.Popen[bytes] | None = None
    ferretdb_port: int = 0
    documentdb: DocumentDB | None = None

    @property
    def ledger(self) -> Path:
        return self.workdir / "ledger.jsonl"

    @property
    def sqlite_path(self) -> Path:
        return self.workdir / "runsgate.db"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNSGATE_", "OTEL_", "CHAOS_"))}
        env.pop("MONGODB_URI", None)
        env.update(
            RUNSGATE_AGENTS="chaos.agents:AGENTS",
            RUNSGATE_AUTH="off",
            RUNSGATE_LOG_LEVEL="WARNING",
            RUNSGATE_GRAPHIQL="false",
            RUNSGATE_CLAIM_TTL=str(self.claim_ttl),
            RUNSGATE_SWEEP_INTERVAL=str(self.sweep_interval),
            CHAOS_LEDGER=str(self.ledger),
        )
        if self.broken_claim:
            env["CHAOS_BREAK_CLAIM"] = "1"
        if self.retention is not None:
            for name in ("EVENT", "IDEMPOTENCY_KEY", "WEBHOOK_DELIVERY", "RUN_UPDATES"):
                env[f"RUNSGATE_{name}_RETENTION"] = str(self.retention)
        if self.store == "sqlite":
            env["RUNSGATE_STORE"] = f"sqlite:///{self.sqlite_path}"
        elif self.documentdb is not None:
            env["MONGODB_URI"] = f"{self.documentdb.uri}chaos"
        else:
            env["MONGODB_URI"] = f"mongodb://127.0.0.1:{self.ferretdb_port}/chaos"
        return env

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ledger.touch()
        if self.store == "ferretdb":
            self.ferretdb_port = free_port()
            await self.start_store()
        elif self.store == "documentdb":
            # in a folder of its own, which PostgreSQL's user can reach (pytest's are closed to it);
            # its log is copied into the workdir at the end
            # its owner file lets a later test session remove it if this process dies first
            data = Path(tempfile.mkdtemp(prefix="runsgate-chaos-documentdb-"))
            _processes.own(data)
            self.documentdb = DocumentDB(data)
            await asyncio.to_thread(self.documentdb.start)
        self.instances = [Instance(i, free_port(), self.workdir / f"instance-{i}.log") for i in range(self.size)]
        for instance in self.instances:
            self._spawn(instance)
        for instance in self.instances:
            await self.wait_healthy(instance)

    def _spawn(self, instance: Instance) -> None:
        with open(instance.log, "ab") as out:
            instance.process = subprocess.Popen(
                [sys.executable, "-m", "server", "serve", "--port", str(instance.port)],
                cwd=ROOT,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, ended by stop()
            )
        _processes.track(instance.process)  # killed at the test session's end if stop() never ran

    async def wait_healthy(self, instance: Instance) -> None:
        within = self.ready_within
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < deadline:
                if instance.process is not None and instance.process.poll() is not None:
                    raise RuntimeError(f"instance {instance.index} exited: {instance.log.read_text()[-2000:]}")
                try:
                    if (await client.get(f"{instance.url}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"instance {instance.index} not healthy in {within:g} s: {instance.log.read_text()[-2000:]}")

    async def restart(self, instance: Instance) -> None:
        self._spawn(instance)
        await self.wait_healthy(instance)

    async def start_store(self, part: str = "ferretdb") -> None:
        """Start the store again: FerretDB 1.24, or DocumentDB's ``part`` (``postgres``, ``ferretdb``)."""
        if self.documentdb is not None:
            start = self.documentdb.start_postgres if part == "postgres" else self.documentdb.start_ferretdb
            await asyncio.to_thread(start)
            return
        self._spawn_ferretdb()
        deadline = time.monotonic() + self.ready_within
        while not listening(self.ferretdb_port):
            if time.monotonic() > deadline or (self.ferretdb is not None and self.ferretdb.poll() is not None):
                raise RuntimeError("FerretDB did not start")
            await asyncio.sleep(0.1)

    def _spawn_ferretdb(self) -> None:
        binary = os.environ.get("FERRETDB_BIN")
        if not binary:
            raise RuntimeError("--store ferretdb needs FERRETDB_BIN (scripts/install-ferretdb.sh prints it)")
        data = self.workdir / "ferretdb"
        data.mkdir(exist_ok=True)
        with open(self.workdir / "ferretdb.log", "ab") as out:
            self.ferretdb = subprocess.Popen(
                [
                    binary,
                    "--handler=sqlite",
                    f"--sqlite-url=file:{data}/",
                    f"--state-dir={data}",
                    f"--listen-addr=127.0.0.1:{self.ferretdb_port}",
                    "--debug-addr=-",
                    "--telemetry=disable",
                    "--log-level=error",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _processes.track(self.ferretdb)

    def stop_store(self, part: str = "ferretdb") -> None:
        """Crash the store: FerretDB killed (SIGKILL), or DocumentDB's PostgreSQL in an immediate
        shutdown (SIGQUIT, recovered from its WAL at the next start) when ``part`` is ``postgres``."""
        if self.documentdb is not None:
            if part == "postgres":
                self.documentdb.stop_postgres(crash=True)
            else:
                self.documentdb.stop_ferretdb(kill=True)
            return
        if self.ferretdb is not None and self.ferretdb.poll() is None:
            self.ferretdb.send_signal(signal.SIGKILL)
            self.ferretdb.wait()

    def stop(self) -> None:
        """End every instance and the store: SIGTERM, SIGKILL after 15 s, then SIGKILL to what is
        left of each one's process group."""
        try:
            self._stop()
        finally:
            for proc in [*(i.process for i in self.instances), self.ferretdb]:
                if proc is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    _processes.untrack(proc)

    def _stop(self) -> None:
        for instance in self.instances:
            proc = instance.process
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for instance in self.instances:
            proc = instance.process
            if proc is not None:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self.ferretdb is not None and self.ferretdb.poll() is None:
            self.ferretdb.terminate()
            self.ferretdb.wait(timeout=15)
        if self.documentdb is not None:
            self.documentdb.stop()
            if self.documentdb.log.exists():
                shutil.copyfile(self.documentdb.log, self.workdir / "documentdb.log")
            shutil.rmtree(self.documentdb.data, ignore_errors=True)
            _processes.disown(self.documentdb.data)


@dataclass(frozen=True)
class Fault:
    after: float
    """Seconds after the previous fault ended."""
    kind: str
    """``kill``, ``pause``, ``store`` (FerretDB 1.24 stopped), ``postgres`` or ``ferretdb`` (DocumentDB's
    PostgreSQL or FerretDB stopped) or ``lock`` (SQLite file locked)."""
    target: int
    """Instance index (kill, pause)."""
    duration: float
    """Seconds down, paused, stopped or locked."""


STORE_KINDS = frozenset({"store", "postgres", "ferretdb", "lock"})
"""The kinds of fault that make the store unavailable (``STORE_UNAVAILABLE``) while they last."""

FAULT_KINDS = {
    "sqlite": ("kill", "pause", "lock"),
    "ferretdb": ("kill", "pause", "store"),
    "documentdb": ("kill", "pause", "postgres", "ferretdb"),
}
"""The kinds of fault each store's runs take turns with."""


def schedule(seed: int, store: str, claim_ttl: float, every: float, count: int = 10_000) -> list[Fault]:
    """The fault schedule of ``seed``: the same seed gives the same faults in the same order."""
    rng = random.Random(seed)
    kinds = FAULT_KINDS[store]
    faults = []
    for i in range(count):
        kind = kinds[i % len(kinds)] if rng.random() < 0.7 else rng.choice(kinds)
        duration = {
            "kill": rng.uniform(0.2, 3.0),
            "pause": rng.uniform(1.5 * claim_ttl, 3.0 * claim_ttl),
            "store": rng.uniform(0.5, 3.0),
            "postgres": rng.uniform(0.5, 3.0),
            "ferretdb": rng.uniform(0.5, 3.0),
            "lock": rng.uniform(0.5, 3.0),
        }[kind]
        faults.append(Fault(rng.uniform(0.5, 1.5) * every, kind, rng.randrange(1_000_000), round(duration, 3)))
    return faults


class Faults:
    """Applies a schedule to a cluster until ``stop`` is set; counts what it injected by kind."""

    def __init__(self, cluster: Cluster, faults: list[Fault]) -> None:
        self.cluster = cluster
        self.faults = faults
        self.injected: Counter[str] = Counter()
        self.log: list[dict[str, object]] = []
        self._reached: dict[int, asyncio.Event] = {}
        self._store_down = False
        self._store_up_at = float("-inf")

    def store_calm(self) -> float:
        """Seconds (monotonic) since the last store fault ended, its restart included; 0 while one
        is in progress, infinite before the first."""
        return 0.0 if self._store_down else time.monotonic() - self._store_up_at

    def reached(self, count: int) -> asyncio.Event:
        """An event set once ``count`` faults were injected (at once for 0)."""
        event = self._reached.setdefault(count, asyncio.Event())
        if len(self.log) >= count:
            event.set()
        return event

    async def run(self, stop: asyncio.Event) -> None:
        for fault in self.faults:
            try:
                await asyncio.wait_for(stop.wait(), fault.after)
                return
            except TimeoutError:
                pass
            started = time.time()
            self._store_down = fault.kind in STORE_KINDS
            try:
                await self.apply(fault)
            finally:
                if self._store_down:
                    self._store_down, self._store_up_at = False, time.monotonic()
            self.injected[fault.kind] += 1
            self.log.append({"at": started, "kind": fault.kind, "target": fault.target, "duration": fault.duration})
            for count, event in self._reached.items():
                if len(self.log) >= count:
                    event.set()

    async def apply(self, fault: Fault) -> None:
        cluster = self.cluster
        instance = cluster.instances[fault.target % len(cluster.instances)]
        proc = instance.process
        if fault.kind == "kill" and proc is not None:
            proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            await asyncio.sleep(fault.duration)
            await cluster.restart(instance)
        elif fault.kind == "pause" and proc is not None:
            proc.send_signal(signal.SIGSTOP)
            await asyncio.sleep(fault.duration)
            proc.send_signal(signal.SIGCONT)
        elif fault.kind in ("store", "postgres", "ferretdb"):
            part = "postgres" if fault.kind == "postgres" else "ferretdb"
            cluster.stop_store(part)
            await asyncio.sleep(fault.duration)
            await cluster.start_store(part)
        elif fault.kind == "lock":
            await asyncio.to_thread(_hold_lock, cluster.sqlite_path, fault.duration)


def _hold_lock(path: Path, seconds: float) -> None:
    """Hold the SQLite file's write lock (``BEGIN IMMEDIATE``) for ``seconds`` from another connection."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        time.sleep(seconds)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
