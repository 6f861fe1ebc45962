"""Every process a test starts: in its own process group, ended with the group; waits scaled for load.

- ``start`` (a ``subprocess.Popen``) and ``run`` (a ``subprocess.run``) put the process in a
  new session, so whatever it starts in turn (uvicorn's workers, npm's node, Chromium) is in its
  group. ``stop`` ends the group: SIGTERM, then SIGKILL after a grace period. ``run`` ends the
  group on its timeout and on any exception (Ctrl-C included); ``started`` does at the end of
  its block, however the block ends.
- Groups still alive when the session ends are killed (``kill_leftovers``, called by
  ``tests/conftest.py`` and at exit), so a test stopped half-way leaves no server behind. Under
  pytest-xdist the controller also kills those of workers that died first: every process records
  its groups in the file ``RUNSGATE_TEST_GROUPS`` names (``record_groups``, ``kill_recorded``).
- ``scaled(seconds)``: every readiness wait of the suite is ``seconds`` times
  ``RUNSGATE_TEST_WAIT_SCALE`` (default 1; docs/testing.md "A busy machine").

No test calls ``subprocess`` or ``asyncio.create_subprocess_*`` itself (``tests/test_processes.py``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

WAIT_SCALE_VARIABLE = "RUNSGATE_TEST_WAIT_SCALE"
GROUPS_VARIABLE = "RUNSGATE_TEST_GROUPS"
"""Names the file where every process of a test session records the groups it starts and ends."""


def wait_scale() -> float:
    """``RUNSGATE_TEST_WAIT_SCALE`` as a positive number (default 1).

    Raises:
        ValueError: The variable is set to something else.
    """
    text = os.environ.get(WAIT_SCALE_VARIABLE, "1")
    try:
        scale = float(text)
    except ValueError:
        scale = 0.0
    if not scale > 0:
        raise ValueError(f"{WAIT_SCALE_VARIABLE} must be a positive number, got {text!r}")
    return scale


def scaled(seconds: float) -> float:
    """``seconds`` (a readiness wait or a per-request timeout of the suite) times the wait scale."""
    return seconds * wait_scale()


_GROUPS: dict[int, subprocess.Popen[Any]] = {}
"""Process groups started and not yet ended, by group id (the leader's pid)."""


def start(command: Sequence[str | os.PathLike[str]], **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **options)`` as the leader of a new process group."""
    if "start_new_session" in options or "process_group" in options or "preexec_fn" in options:
        raise TypeError("tests._processes.start puts every process in its own group itself")
    proc: subprocess.Popen[Any] = subprocess.Popen(list(command), start_new_session=True, **options)
    _GROUPS[proc.pid] = proc
    track(proc)
    return proc


def track(proc: subprocess.Popen[Any]) -> None:
    """Record in ``RUNSGATE_TEST_GROUPS`` (when set) that ``proc`` leads a new process group, so
    that the session's controller kills the group if nobody ends it (``kill_recorded``). For
    groups started without ``start`` (the chaos harness's); ``untrack`` once it is ended."""
    _record({"start": proc.pid, "since": _leader_since(proc.pid), "command": " ".join(map(str, proc.args))})


def untrack(proc: subprocess.Popen[Any]) -> None:
    """Record that ``proc``'s group was ended (``track``)."""
    _record({"end": proc.pid})


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get(GROUPS_VARIABLE)
    if not path:
        return
    line = (json.dumps(entry) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)  # one write to a file opened for appending: lines of processes never mix
    finally:
        os.close(fd)


def _leader_since(pid: int) -> str | None:
    """When process ``pid`` started (``/proc/PID/stat`` field 22, in clock ticks), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


_RECORDING: Path | None = None
"""The groups file this process made (``record_groups``): it alone kills what the file lists."""


def record_groups() -> Path:
    """Make a new groups file and name it in ``RUNSGATE_TEST_GROUPS``, for this process and the
    ones it starts (pytest-xdist's workers); the file's path. Called by the session's controller."""
    global _RECORDING
    fd, name = tempfile.mkstemp(prefix="runsgate-test-groups-", suffix=".jsonl")
    os.close(fd)
    _RECORDING = Path(name)
    os.environ[GROUPS_VARIABLE] = name
    return _RECORDING


def kill_recorded() -> list[str]:
    """SIGKILL every group that the file of ``record_groups`` lists as started and not ended and
    that is still alive (one of a pytest-xdist worker that died before its cleanup); their
    commands. Removes the file; a no-op in a process that did not make one. A group id whose
    leader is now another process (a reused pid) is left alone."""
    global _RECORDING
    if _RECORDING is None:
        return []
    path, _RECORDING = _RECORDING, None
    started: dict[int, dict[str, Any]] = {}
    with suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if "start" in entry:
                started[entry["start"]] = entry
            else:
                started.pop(entry["end"], None)
    path.unlink(missing_ok=True)
    left = []
    for pid, entry in started.items():
        since = _leader_since(pid)
        if since is not None and since != entry["since"]:
            continue
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        left.append(entry["command"])
    return left


def stop(proc: subprocess.Popen[Any], grace: float = 15.0) -> None:
    """End ``proc``'s process group: SIGCONT and SIGTERM to the group (a graceful shutdown of the
    leader, which ends its own children), then SIGKILL to what is left after ``grace`` seconds.
    Waits for the leader and closes its pipes; a no-op for a group already gone."""
    try:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGCONT)  # a paused process cannot handle SIGTERM
            _signal_group(proc, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    finally:
        _signal_group(proc, signal.SIGKILL)  # the leader's children, even when the leader exited
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        _forget(proc)
        _close_pipes(proc)


def _close_pipes(proc: subprocess.Popen[Any]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc``'s whole group at once and wait for the leader."""
    _signal_group(proc, signal.SIGKILL)
    proc.wait()
    _forget(proc)


def _forget(proc: subprocess.Popen[Any]) -> None:
    if _GROUPS.pop(proc.pid, None) is not None:
        untrack(proc)


def _signal_group(proc: subprocess.Popen[Any], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


@contextmanager
def started(
    command: Sequence[str | os.PathLike[str]], *, grace: float = 15.0, **options: Any
) -> Iterator[subprocess.Popen[Any]]:
    """``start`` for the length of a block; the group is ended (``stop``) when the block ends,
    on failure and on Ctrl-C too."""
    proc = start(command, **options)
    try:
        yield proc
    finally:
        stop(proc, grace)


@contextmanager
def logged(
    command: Sequence[str | os.PathLike[str]], log: Path, *, grace: float = 15.0, **options: Any
) -> Iterator[subprocess.Popen[bytes]]:
    """``started`` with stdout and stderr appended to ``log``."""
    with open(log, "ab") as out, started(command, grace=grace, stdout=out, stderr=subprocess.STDOUT, **options) as p:
        yield p


def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    input: str | bytes | None = None,
    capture_output: bool = False,
    check: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` in a new process group; the group is killed on the timeout (raising
    ``subprocess.TimeoutExpired``) and on any exception, and ended once the command exits (a
    daemon it left behind is not kept). ``timeout`` is required, in seconds, and scaled
    (``scaled``)."""
    if capture_output:
        options.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        options["stdin"] = subprocess.PIPE
    proc = start(command, **options)
    try:
        out, err = proc.communicate(input, timeout=scaled(timeout))
    except BaseException:
        kill(proc)
        proc.communicate()
        raise
    finally:
        _signal_group(proc, signal.SIGKILL)
        _forget(proc)
    result: subprocess.CompletedProcess[Any] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        result.check_returncode()
    return result


def kill_leftovers(procs: Sequence[subprocess.Popen[Any]] | None = None) -> list[str]:
    """SIGKILL every group still alive (a test stopped before its cleanup), or those of ``procs``
    among them; their commands."""
    left = []
    for proc in list(_GROUPS.values()) if procs is None else [p for p in procs if p.pid in _GROUPS]:
        if proc.poll() is None:
            left.append(" ".join(map(str, proc.args)))
        kill(proc)
        _close_pipes(proc)
    return left


atexit.register(kill_recorded)
atexit.register(kill_leftovers)  # first: atexit runs the last registered first
