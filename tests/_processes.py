"""Every process a test starts: in its own process group, ended with the group; waits scaled for load.

- ``start``/``run``/``started`` lead a new session; ``stop`` ends the group (SIGTERM, then SIGKILL).
- On Linux a process started from the main thread dies with its starter (PR_SET_PDEATHSIG).
- Groups alive at the session's end are killed (``kill_leftovers``); so are those a dead xdist
  worker recorded in the ``RUNSGATE_TEST_GROUPS`` file (``record_groups``, ``kill_recorded``).
- Server folders and the groups file have an owner file (``own``); at session start
  ``sweep_leftovers`` ends and removes those of dead owners. ``scaled``: waits times
  ``RUNSGATE_TEST_WAIT_SCALE``. No test calls ``subprocess`` itself (``tests/test_processes.py``).
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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


_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _die_with_parent(parent: int) -> None:
    """In the child, before its command: SIGKILL when the parent dies (the thread that forked it,
    hence main-thread starts only), and now if it already did (between fork and prctl)."""
    if _LIBC is not None and _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0 and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def dies_with_parent() -> dict[str, Any]:
    """``Popen`` options that make the child die with this process (``_die_with_parent``): on
    Linux, from the main thread; none elsewhere (a pool thread's exit would kill the child)."""
    if _LIBC is None or threading.current_thread() is not threading.main_thread():
        return {}
    parent = os.getpid()
    return {"preexec_fn": lambda: _die_with_parent(parent)}


def start(command: Sequence[str | os.PathLike[str]], **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **options)`` as the leader of a new process group, dying with
    this process (``dies_with_parent``)."""
    if "start_new_session" in options or "process_group" in options or "preexec_fn" in options:
        raise TypeError("tests._processes.start puts every process in its own group itself")
    proc: subprocess.Popen[Any] = subprocess.Popen(
        list(command), start_new_session=True, **dies_with_parent(), **options
    )
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
    own(_RECORDING)
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
    left = _kill_groups_of(path)
    disown(path)
    return left


def _kill_groups_of(path: Path) -> list[str]:
    """``kill_recorded`` for the groups file ``path``, which is removed."""
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


OWNER_SUFFIX = ".owner"


def _owner_file(path: Path) -> Path:
    return path.with_name(path.name + OWNER_SUFFIX)


def own(path: Path) -> Path:
    """Write ``path``'s owner file (``NAME.owner`` beside it): this process's pid and start time,
    so that ``sweep_leftovers`` leaves ``path`` alone while this process lives. Its path."""
    owner = _owner_file(path)
    owner.write_text(json.dumps({"pid": os.getpid(), "since": _leader_since(os.getpid())}))
    return owner


def disown(path: Path) -> None:
    """Remove ``path``'s owner file, once ``path`` is removed (``own``)."""
    _owner_file(path).unlink(missing_ok=True)


@contextmanager
def owned_folder(prefix: str) -> Iterator[Path]:
    """A new temporary folder with an owner file (``own``), both removed when the block ends."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    own(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        disown(folder)


def _owner_alive(owner: Path) -> bool:
    """Whether the process an owner file names still runs (same pid, same start time)."""
    try:
        entry = json.loads(owner.read_text())
        pid, since = int(entry["pid"]), entry["since"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # unreadable (its writer died half-way): nobody owns it
    if since is None:  # written without /proc (not Linux): the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return _leader_since(pid) == since


def _stop_postmaster(folder: Path) -> None:
    """SIGKILL the PostgreSQL server of a DocumentDB folder (``postgres/postmaster.pid``) if it
    still runs from that folder."""
    with suppress(OSError, ValueError, IndexError):
        pid = int((folder / "postgres" / "postmaster.pid").read_text().split()[0])
        if str(folder) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            os.kill(pid, signal.SIGKILL)


def sweep_leftovers(folder: Path | None = None) -> list[str]:
    """End and remove what a dead owner left in ``folder`` (the temporary folder by default):
    for each ``runsgate-*.owner`` whose process is gone, the groups it names still alive are
    killed (a groups file) or its PostgreSQL killed and the folder removed. Their names."""
    base = Path(folder or tempfile.gettempdir())
    removed = []
    for owner in sorted(base.glob(f"runsgate-*{OWNER_SUFFIX}")):
        if _owner_alive(owner):
            continue
        target = owner.with_name(owner.name[: -len(OWNER_SUFFIX)])
        if target.is_dir():
            _stop_postmaster(target)
            shutil.rmtree(target, ignore_errors=True)
        elif target.exists():
            _kill_groups_of(target)
        owner.unlink(missing_ok=True)
        removed.append(target.name)
    return removed


atexit.register(kill_recorded)
atexit.register(kill_leftovers)  # first: atexit runs the last registered first
