"""Real servers for tests: FerretDB (or ``MONGODB_URI``) and runsgate itself under uvicorn.

Storage tests run against a real MongoDB wire-protocol server, never a mock. With
``MONGODB_URI`` set, that server is used; otherwise FerretDB v1.24.2 (SQLite backend) is
started on a free loopback port with its data in a temporary directory and stopped after the
session. The binary comes from ``FERRETDB_BIN``, ``PATH`` or ``scripts/install-ferretdb.sh``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 20.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def ferretdb_binary() -> str | None:
    candidates = [os.environ.get("FERRETDB_BIN"), shutil.which("ferretdb")]
    for candidate in candidates:
        if candidate and _runs(candidate):
            return candidate
    script = ROOT / "scripts" / "install-ferretdb.sh"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if result.returncode == 0 and result.stdout.strip():
        return result.stdout.strip().splitlines()[-1]
    sys.stderr.write(result.stderr)
    return None


def _runs(binary: str) -> bool:
    """A plain ``go install`` build of FerretDB 1.24 panics at start; accept only one that runs."""
    try:
        return subprocess.run([binary, "--version"], capture_output=True, timeout=10, check=False).returncode == 0
    except OSError:
        return False


@contextmanager
def ferretdb() -> Iterator[str]:
    """Start FerretDB on a free loopback port; yield its base URI (no database)."""
    binary = ferretdb_binary()
    if binary is None:
        raise RuntimeError("FerretDB could not be built: see scripts/install-ferretdb.sh output above")
    port = free_port()
    with (
        tempfile.TemporaryDirectory(prefix="runsgate-ferretdb-") as data,
        open(Path(data) / "ferretdb.log", "wb") as log,
    ):
        proc = subprocess.Popen(
            [
                binary,
                "--handler=sqlite",
                f"--sqlite-url=file:{data}/",
                f"--state-dir={data}",
                f"--listen-addr=127.0.0.1:{port}",
                "--debug-addr=-",
                "--telemetry=disable",
                "--log-level=error",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            try:
                wait_for_port(port, proc=proc)
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(f"{exc}: {(Path(data) / 'ferretdb.log').read_text()[-2000:]}") from exc
            yield f"mongodb://127.0.0.1:{port}/"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def with_database(uri: str, name: str | None = None) -> str:
    """``uri`` with its path replaced by a database name (fresh by default)."""
    parts = urlsplit(uri)
    return urlunsplit(parts._replace(path="/" + (name or f"rg_{uuid.uuid4().hex[:12]}")))
