"""FerretDB 2 on PostgreSQL with DocumentDB: the MongoDB test server with a real query planner.

``scripts/install-documentdb.sh`` installs the PostgreSQL extensions and builds FerretDB v2.5.0;
``DocumentDB`` starts a PostgreSQL 15 cluster of its own (initdb on first use, in ``data``) with
the extensions loaded, then FerretDB in front of it, both on loopback ports. Tests, benchmarks,
chaos runs and ``./dev documentdb`` start it through this module, which needs only the standard
library (``python3 -m tests._documentdb --help``).

PostgreSQL refuses to run as root: as root, its processes run as the ``postgres`` user, which
then owns ``data/postgres`` (every folder above it must let that user through). The cluster
trusts every connection from 127.0.0.1 (no password): a server for one machine's tests and trials,
never for production.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from . import _processes
from ._processes import scaled

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "shared_preload_libraries": "'pg_cron,pg_documentdb_core,pg_documentdb'",
    "cron.database_name": "'postgres'",
}
"""What DocumentDB needs in ``postgresql.conf``; every other setting is PostgreSQL's default."""


WORKER_PORTS = (20000, 250, 12, 4)
"""``(first, block, workers, slots)``: the test ports, below the kernel's ephemeral range (32768 up).
A test session holds one of ``slots`` port slots (``take_port_slot``); in slot S, worker ``gwN``
(N below ``workers``; a session without workers: N = 0) takes ports from its block of ``block``
ports at ``first + (S * workers + N) * block``. Two sessions, two workers, or a worker and a
client socket never pick one port between the pick and the bind (docs/testing.md "Parallel runs")."""
SLOT_VARIABLE = "RUNSGATE_TEST_PORT_SLOT"
"""The session's port slot, set by its controller and inherited by its pytest-xdist workers."""
_handed: set[int] = set()
_slot_lock: int | None = None
"""The open lock file of the slot this process took: its flock lasts as long as the process."""


def lock_port_slot(folder: str | None = None) -> tuple[int, int] | None:
    """``(slot, fd)``: the first port slot S whose lock file ``runsgate-test-ports-S.lock`` (in
    ``folder``, the temporary folder by default) this call could flock, held while ``fd`` is
    open; None when every slot is held."""
    base = folder or tempfile.gettempdir()
    for slot in range(WORKER_PORTS[3]):
        fd = os.open(os.path.join(base, f"runsgate-test-ports-{slot}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return slot, fd
    return None


def take_port_slot() -> int | None:
    """Hold the first free port slot for the rest of this process (``lock_port_slot``) and name
    it in ``RUNSGATE_TEST_PORT_SLOT``, for the workers started after; None, with the variable
    unset, when other sessions hold every slot (the kernel picks the ports then)."""
    global _slot_lock
    taken = lock_port_slot()
    if taken is None:
        os.environ.pop(SLOT_VARIABLE, None)
        return None
    if _slot_lock is not None:
        os.close(_slot_lock)
    slot, _slot_lock = taken
    os.environ[SLOT_VARIABLE] = str(slot)
    return slot


def slot_ports(slot: int) -> range:
    """Every port of slot ``slot``: its workers' blocks, in worker order (``WORKER_PORTS``)."""
    first, size, workers, _ = WORKER_PORTS
    return range(first + slot * workers * size, first + (slot + 1) * workers * size)


def port_block() -> range | None:
    """This process's ports (``WORKER_PORTS``): its slot's block for its worker, or None outside
    a session holding a slot (and for a worker past ``workers``)."""
    first, size, workers, slots = WORKER_PORTS
    slot = os.environ.get(SLOT_VARIABLE, "")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    number = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else workers
    if not slot.isdigit() or int(slot) >= slots or number >= workers:
        return None
    start = first + (int(slot) * workers + number) * size
    return range(start, start + size)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now: one of this process's block (``port_block``), from a
    random start and never twice in one process until the block is used up; else the kernel's."""
    block = port_block()
    if block is not None:
        size = len(block)
        if len(_handed.intersection(block)) >= size // 2:
            _handed.difference_update(block)
        start = random.randrange(size)
        for offset in range(size):
            port = block[(start + offset) % size]
            if port not in _handed and _bindable(port):
                _handed.add(port)
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def ferretdb2_binary() -> str:
    """The FerretDB v2.5.0 binary: ``FERRETDB2_BIN``, else what ``scripts/install-documentdb.sh``
    builds (and installs the extensions with; ``RUNSGATE_VENDOR_DIR`` names the source archives).

    Raises:
        RuntimeError: The script failed; the message is its output.
    """
    binary = os.environ.get("FERRETDB2_BIN")
    if binary and os.access(binary, os.X_OK):
        return binary
    script = ROOT / "scripts" / "install-documentdb.sh"
    result = _processes.run(["bash", str(script)], timeout=3600, capture_output=True, text=True)  # a cold build
    if result.returncode == 0 and result.stdout.strip():
        return result.stdout.strip().splitlines()[-1]
    raise RuntimeError(f"scripts/install-documentdb.sh failed:\n{result.stderr.strip()}")


class DocumentDB:
    """PostgreSQL (its cluster in ``data/postgres``) and FerretDB (``data/ferretdb``), started and
    stopped separately (the store-outage tests and chaos runs stop either).

    Args:
        data: The folder of both; created when missing. The cluster is made on the first start
            and kept, so a later start on the same folder finds the same databases.
        port: FerretDB's MongoDB port (free by default).
        binary: The FerretDB v2 binary (``ferretdb2_binary()`` by default).
        log_level: FerretDB's ``--log-level``.
    """

    def __init__(
        self, data: Path, *, port: int | None = None, binary: str | None = None, log_level: str = "error"
    ) -> None:
        self.data = data.resolve()
        self.port = port or free_port()
        self.postgres_port = free_port()
        self.binary = binary or ferretdb2_binary()
        self.log_level = log_level
        self.postgres: subprocess.Popen[bytes] | None = None
        self.ferretdb: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """The base ``mongodb://`` URI (no database)."""
        return f"mongodb://127.0.0.1:{self.port}/"

    @property
    def cluster(self) -> Path:
        return self.data / "postgres"

    @property
    def log(self) -> Path:
        """PostgreSQL's and FerretDB's output, appended."""
        return self.data / "documentdb.log"

    def _user(self) -> dict[str, str]:
        """``Popen`` arguments that run PostgreSQL as ``postgres`` when we are root."""
        return {"user": "postgres", "group": "postgres"} if os.geteuid() == 0 else {}

    def _fail(self, what: str) -> RuntimeError:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return RuntimeError(f"{what}\n{tail}")

    def _initdb(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            self.data.chmod(self.data.stat().st_mode | 0o111)  # let the postgres user through
        scratch = self.data / "postgres.new"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(mode=0o700)
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(scratch, owner.pw_uid, owner.pw_gid)
        with open(self.log, "ab") as out:
            result = _processes.run(
                [str(POSTGRES_BIN / "initdb"), "-D", str(scratch), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                timeout=120,
                stdout=out,
                stderr=subprocess.STDOUT,
                **self._user(),  # type: ignore[call-overload]
            )
        if result.returncode != 0:
            raise self._fail(f"initdb failed (exit status {result.returncode}); is {self.data} reachable by postgres?")
        with open(scratch / "postgresql.conf", "a") as conf:
            conf.write("\n# runsgate (tests/_documentdb.py)\n")
            conf.writelines(f"{name} = {value}\n" for name, value in SETTINGS.items())
        scratch.rename(self.cluster)

    def start_postgres(self, timeout: float = 60.0) -> None:
        """Start PostgreSQL (initdb and ``CREATE EXTENSION documentdb`` the first time) and wait
        until it accepts queries.

        Raises:
            RuntimeError: It exited or did not answer within ``timeout`` seconds (with its log).
        """
        if not (self.cluster / "PG_VERSION").exists():
            self._initdb()
        with open(self.log, "ab") as out:
            self.postgres = _processes.start(
                [str(POSTGRES_BIN / "postgres"), "-D", str(self.cluster), "-p", str(self.postgres_port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                **self._user(),  # type: ignore[call-overload]
            )
        deadline = time.monotonic() + scaled(timeout)  # more on a loaded machine
        while True:
            if self.postgres.poll() is not None:
                raise self._fail(f"PostgreSQL exited with {self.postgres.returncode}")
            if self._psql("CREATE EXTENSION IF NOT EXISTS documentdb CASCADE") == 0:
                return
            if time.monotonic() > deadline:
                raise self._fail(f"PostgreSQL did not answer within {scaled(timeout):g} s")
            time.sleep(0.1)

    def _psql(self, sql: str) -> int:
        command = [str(POSTGRES_BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.postgres_port), "-U", "postgres"]
        with open(self.log, "ab") as out:
            return _processes.run(
                [*command, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qc", sql],
                timeout=60,
                stdout=subprocess.DEVNULL,
                stderr=out,
            ).returncode

    def stop_postgres(self, *, crash: bool = False, timeout: float = 30.0) -> None:
        """Stop PostgreSQL: a fast shutdown (SIGINT: open transactions rolled back, clients
        disconnected), or with ``crash`` an immediate one (SIGQUIT: no checkpoint, WAL replayed at
        the next start, as after a crash). No-op when it is not running."""
        _stop(self.postgres, signal.SIGQUIT if crash else signal.SIGINT, timeout)

    def start_ferretdb(self, timeout: float = 30.0) -> None:
        """Start FerretDB and wait until its port accepts connections.

        Raises:
            RuntimeError: It exited or did not listen within ``timeout`` seconds (with its log).
        """
        state = self.data / "ferretdb"
        state.mkdir(parents=True, exist_ok=True)
        command = [
            self.binary,
            f"--postgresql-url=postgres://postgres@127.0.0.1:{self.postgres_port}/postgres",
            f"--listen-addr=127.0.0.1:{self.port}",
            f"--state-dir={state}",
            "--no-auth",
            "--debug-addr=-",
            "--telemetry=disable",
            f"--log-level={self.log_level}",
        ]
        with open(self.log, "ab") as out:
            self.ferretdb = _processes.start(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + scaled(timeout)  # more on a loaded machine
        while not listening(self.port):
            if self.ferretdb.poll() is not None:
                raise self._fail(f"FerretDB exited with {self.ferretdb.returncode}")
            if time.monotonic() > deadline:
                raise self._fail(f"FerretDB did not listen on 127.0.0.1:{self.port} within {scaled(timeout):g} s")
            time.sleep(0.05)

    def stop_ferretdb(self, *, kill: bool = False, timeout: float = 15.0) -> None:
        """Stop FerretDB: SIGTERM (SIGKILL with ``kill``, or after ``timeout`` seconds). No-op when
        it is not running."""
        _stop(self.ferretdb, signal.SIGKILL if kill else signal.SIGTERM, timeout)

    def start(self) -> None:
        """PostgreSQL, then FerretDB (``start_postgres``, ``start_ferretdb``)."""
        try:
            self.start_postgres()
            self.start_ferretdb()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """FerretDB, then PostgreSQL (a fast shutdown)."""
        self.stop_ferretdb()
        self.stop_postgres()


def _stop(proc: subprocess.Popen[bytes] | None, sig: signal.Signals, timeout: float) -> None:
    if proc is None or proc.poll() is not None:
        if proc is not None:
            _processes.kill(proc)  # its group: whatever it left behind
        return
    with suppress(ProcessLookupError):
        proc.send_signal(sig)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=scaled(timeout))
    _processes.kill(proc)  # the leader if it did not stop in time, and what is left of its group


@contextmanager
def documentdb(data: Path | None = None, **options: object) -> Iterator[DocumentDB]:
    """A started ``DocumentDB``, stopped when the block ends; in a temporary folder (removed
    afterwards, or at the next session's start if this process dies: ``_processes.owned_folder``)
    unless ``data`` names one (kept). ``options`` go to ``DocumentDB``."""
    with _processes.owned_folder("runsgate-documentdb-") as scratch:  # removed at session start if we die
        server = DocumentDB(data or scratch, **options)  # type: ignore[arg-type]
        server.start()
        try:
            yield server
        finally:
            server.stop()


def main(argv: list[str]) -> int:
    """``./dev documentdb``: serve on 127.0.0.1 until SIGINT or SIGTERM; exit status 0 then."""
    parser = argparse.ArgumentParser(prog="./dev documentdb", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=27017, help="FerretDB's port (27017)")
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".runsgate" / "documentdb", help="kept across starts")
    args = parser.parse_args(argv)
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        server = DocumentDB(args.data_dir, port=args.port, log_level="warn")
        server.start()
    except RuntimeError as exc:
        print(f"dev documentdb: {exc}", file=sys.stderr)
        return 1
    try:
        print(
            f"dev: FerretDB 2 on PostgreSQL with DocumentDB (data in {server.data}, log {server.log}) listens on "
            f"127.0.0.1:{server.port} until Ctrl-C; in another shell:",
            flush=True,
        )
        print(f"MONGODB_URI=mongodb://127.0.0.1:{server.port}/runsgate ./dev serve", flush=True)
        while not stopping:
            for name, proc in (("PostgreSQL", server.postgres), ("FerretDB", server.ferretdb)):
                if proc is not None and proc.poll() is not None:
                    print(f"dev documentdb: {name} exited with {proc.returncode}; see {server.log}", file=sys.stderr)
                    return 1
            time.sleep(0.2)
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
