"""Real servers for tests: the MongoDB test servers (or ``MONGODB_URI``) and runsgate itself under uvicorn.

Storage tests run against a real MongoDB wire-protocol server, never a mock. With
``MONGODB_URI`` set, that server is used; otherwise FerretDB v2.5.0 on PostgreSQL with
DocumentDB (``tests/_documentdb.py``; ``FERRETDB2_BIN`` or ``scripts/install-documentdb.sh``)
is started on free loopback ports with its data in a temporary directory and stopped after the
session. The storage suites also run on FerretDB v1.24.2 (SQLite backend, ``ferretdb()``; the
binary from ``FERRETDB_BIN``, ``PATH`` or ``scripts/install-ferretdb.sh``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from server.settings import DEMO_AGENTS
from storage import MongoSnapshotStore

from . import _documentdb, _processes
from ._processes import scaled

ROOT = Path(__file__).resolve().parent.parent

CURRENT_TEST: Any = None
"""The pytest item being run (set by ``tests/conftest.py``), or None outside pytest (benchmarks)."""


def require_process_marker(what: str) -> None:
    """Fail the running test unless it carries the ``process`` marker, so that
    ``pytest -m "not process"`` (the fast inner loop) never starts ``what``.

    Raises:
        AssertionError: The test starts a process and is not marked.
    """
    item = CURRENT_TEST
    if item is not None and item.get_closest_marker("process") is None:
        raise AssertionError(
            f"{item.nodeid} starts {what} without the `process` marker: add @pytest.mark.process "
            "(or put it in a folder of tests/conftest.py's PROCESS_FOLDERS)"
        )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, of the worker's own block under pytest-xdist (``_documentdb.free_port``)."""
    return _documentdb.free_port()


STORE_SELECTION_WAIT = 60.0
"""Seconds a test's MongoDB store waits for its server, before ``scaled`` (the product's default,
5 s, which a busy machine's FerretDB can miss on a first ``hello``; a test of that timeout passes
its own)."""


def mongo_store(uri: str, **options: Any) -> MongoSnapshotStore:
    """``MongoSnapshotStore(uri, **options)`` waiting ``scaled(STORE_SELECTION_WAIT)`` seconds for its server."""
    return MongoSnapshotStore(uri, server_selection_timeout=scaled(STORE_SELECTION_WAIT), **options)


READY_WAIT = 90.0
"""Seconds a started server gets to listen and answer, before ``scaled`` (a runsgate process
imports for seconds, tens of seconds on a loaded machine)."""


def wait_for_port(port: int, timeout: float = READY_WAIT, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Return once 127.0.0.1:``port`` accepts connections, waiting at most ``scaled(timeout)``.

    Raises:
        RuntimeError: ``proc`` exited first.
        TimeoutError: Nothing listened in time.
    """
    within = scaled(timeout)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {within:g} s ({_processes.WAIT_SCALE_VARIABLE})")


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """End ``proc``'s process group: SIGTERM (a graceful shutdown), then SIGKILL after ``timeout``
    seconds; no-op if it exited (``tests._processes.stop``)."""
    _processes.stop(proc, timeout)


@contextmanager
def listening_process(
    command: Sequence[str],
    port: int,
    log: Path,
    *,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = READY_WAIT,
    stop_timeout: float = 15.0,
    marked: bool = True,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` (output appended to ``log``, in its own process group) until the block
    ends; yield it once ``port`` accepts connections on 127.0.0.1. The running test must carry the
    ``process`` marker unless ``marked`` is False (FerretDB, started once per session).

    Raises:
        RuntimeError: The process exited, or did not listen within ``scaled(timeout)`` seconds;
            the message ends with the tail of ``log``.
    """
    if marked:
        require_process_marker(Path(command[0]).name)
    with _processes.logged(command, log, grace=stop_timeout, cwd=cwd, env=env) as proc:
        try:
            wait_for_port(port, timeout=timeout, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{command[0]} did not start: {exc}\n{log_tail(log)}") from exc
        yield proc


def log_tail(log: Path, size: int = 3000) -> str:
    """The last ``size`` characters of ``log`` (a started process's output), or a note that it is empty."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return f"--- last {min(size, len(text))} characters of {log} ---\n{text[-size:]}" if text else f"({log} is empty)"


def ferretdb_binary() -> str | None:
    candidates = [os.environ.get("FERRETDB_BIN"), shutil.which("ferretdb")]
    for candidate in candidates:
        if candidate and _runs(candidate):
            return candidate
    script = ROOT / "scripts" / "install-ferretdb.sh"
    result = _processes.run(["bash", str(script)], capture_output=True, text=True, timeout=1800)
    if result.returncode == 0 and result.stdout.strip():
        return result.stdout.strip().splitlines()[-1]
    sys.stderr.write(result.stderr)
    return None


def _runs(binary: str) -> bool:
    """A plain ``go install`` build of FerretDB 1.24 panics at start; accept only one that runs."""
    try:
        return _processes.run([binary, "--version"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextmanager
def documentdb() -> Iterator[str]:
    """Start FerretDB 2 on PostgreSQL with DocumentDB on free loopback ports, in a temporary
    folder; yield its base URI (no database).

    Raises:
        RuntimeError: It could not be built or started (the message says why).
    """
    with _documentdb.documentdb() as server:
        yield server.uri


@contextmanager
def ferretdb() -> Iterator[str]:
    """Start FerretDB 1.24 on a free loopback port; yield its base URI (no database)."""
    with _processes.owned_folder("runsgate-ferretdb-") as data, ferretdb_process(data) as uri:
        yield uri


@contextmanager
def ferretdb_process(data: Path, port: int | None = None) -> Iterator[str]:
    """Start FerretDB with its SQLite files in ``data`` on ``port`` (free by default).

    Yields its base URI; stops it (SIGTERM) when the block ends, keeping ``data``, so starting it
    again on the same folder and port brings the same databases back (store-outage tests).
    """
    binary = ferretdb_binary()
    if binary is None:
        raise RuntimeError("FerretDB could not be built: see scripts/install-ferretdb.sh output above")
    port = port or free_port()
    command = [
        binary,
        "--handler=sqlite",
        f"--sqlite-url=file:{data}/",
        f"--state-dir={data}",
        f"--listen-addr=127.0.0.1:{port}",
        "--debug-addr=-",
        "--telemetry=disable",
        "--log-level=error",
    ]
    with listening_process(command, port, data / "ferretdb.log", stop_timeout=10, marked=False):
        yield f"mongodb://127.0.0.1:{port}/"


def shared_store_env(request: pytest.FixtureRequest, kind: str, directory: Path) -> dict[str, str]:
    """Settings naming one fresh store that several runsgate processes share: a SQLite file in
    ``directory`` (``kind`` ``sqlite``) or a fresh database on the MongoDB test server (``mongo``)."""
    if kind == "sqlite":
        return {"RUNSGATE_STORE": f"sqlite:///{directory / 'runsgate.db'}"}
    return {"MONGODB_URI": with_database(request.getfixturevalue("mongodb_server"))}


def with_database(uri: str, name: str | None = None) -> str:
    """``uri`` with its path replaced by a database name (fresh by default)."""
    parts = urlsplit(uri)
    return urlunsplit(parts._replace(path="/" + (name or f"rg_{uuid.uuid4().hex[:12]}")))


SERVE = [sys.executable, "-m", "server", "serve"]
"""The command that starts runsgate, as docs/operations.md's ``python -m server serve``."""


def server_env(**variables: str) -> dict[str, str]:
    """The test's environment without runsgate or OpenTelemetry settings, plus the demo agents
    (``RUNSGATE_AGENTS``, which ``runsgate serve`` requires) and ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNSGATE_", "OTEL_")) and k != "MONGODB_URI"}
    env.update({"RUNSGATE_AGENTS": DEMO_AGENTS, **variables})
    return env


@dataclass
class RunsgateServer:
    """A started ``python -m server serve`` process."""

    url: str
    """Base URL, e.g. ``http://127.0.0.1:41234``."""
    process: subprocess.Popen[bytes]
    log: Path
    """Its stdout and stderr."""


@contextmanager
def runsgate_servers(
    logs: list[Path], command: Sequence[str] = SERVE, **variables: str
) -> Iterator[list[RunsgateServer]]:
    """Start one ``python -m server serve`` (or ``command``) per log file, all at once (cwd: the repository).

    Each runs in its own process group. Yields them once each answers ``/healthz`` (within
    ``scaled(READY_WAIT)``; else AssertionError with the tail of its log); ends their groups
    (SIGTERM, uvicorn's graceful shutdown, then SIGKILL after 15 s) when the block ends. ``variables``
    are the settings every process gets (``RUNSGATE_LOG_LEVEL`` defaults to ``WARNING``; ``RUNSGATE_AUTH``
    to ``off``, allowed since the processes listen on 127.0.0.1: tests of authentication pass
    ``RUNSGATE_AUTH="on"`` and ``RUNSGATE_API_KEYS``; ``RUNSGATE_AGENTS`` to the demo agents, ``server_env``).
    """
    require_process_marker("runsgate")
    env = server_env(**{"RUNSGATE_LOG_LEVEL": "WARNING", "RUNSGATE_AUTH": "off", **variables})
    started: list[tuple[subprocess.Popen[bytes], int, Path]] = []
    try:
        for log in logs:
            port = free_port()
            with open(log, "ab") as out:
                proc = _processes.start(
                    [*command, "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
                )
            started.append((proc, port, log))
        servers = []
        for proc, port, log in started:
            url = f"http://127.0.0.1:{port}"
            try:
                wait_for_port(port, proc=proc)
                _wait_healthy(url, proc)
            except (RuntimeError, TimeoutError) as exc:
                raise AssertionError(f"runsgate did not start: {exc}\n{log_tail(log)}") from exc
            servers.append(RunsgateServer(url, proc, log))
        yield servers
    finally:
        for proc, _, _ in started:  # all at once: each takes up to a few seconds to shut down
            if proc.poll() is None:
                proc.terminate()
        for proc, _, _ in started:
            stop_process(proc)


def store_variables(request: pytest.FixtureRequest, folder: Path) -> dict[str, str]:
    """The variables putting a runsgate process's store where ``request.param`` (one of
    ``STORE_KINDS``) says: the memory store (none), a SQLite file in ``folder``, or a fresh
    database on the ``mongodb_server`` fixture's server."""
    if request.param == "sqlite":
        return {"RUNSGATE_STORE": f"sqlite:///{folder / 'runsgate.db'}"}
    if request.param == "mongo":
        return {"MONGODB_URI": with_database(request.getfixturevalue("mongodb_server"))}
    return {}


@contextmanager
def runsgate_processes(logs: list[Path], command: Sequence[str] = SERVE, **variables: str) -> Iterator[list[str]]:
    """``runsgate_servers``, yielding only the base URLs."""
    with runsgate_servers(logs, command, **variables) as servers:
        yield [server.url for server in servers]


@contextmanager
def runsgate_process(log: Path, command: Sequence[str] = SERVE, **variables: str) -> Iterator[str]:
    """One runsgate process (see ``runsgate_servers``); yields its base URL."""
    with runsgate_processes([log], command, **variables) as urls:
        yield urls[0]


def _wait_healthy(base_url: str, proc: subprocess.Popen[bytes], timeout: float = READY_WAIT) -> None:
    within = scaled(timeout)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=scaled(5)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{base_url}/healthz did not answer 200 in {within:g} s ({_processes.WAIT_SCALE_VARIABLE})")
