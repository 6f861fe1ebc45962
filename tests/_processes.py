"""Every process a test starts: in its own process group, ended with the group; waits scaled for load.

- ``start`` (a ``subprocess.Popen``) and ``run`` (a ``subprocess.run``) put the process in a
  new session, so whatever it starts in turn (uvicorn's workers, npm's node, Chromium) is in its
  group. ``stop`` ends the group: SIGTERM, then SIGKILL after a grace period. ``run`` ends the
  group on its timeout and on any exception (Ctrl-C included); ``started`` does at the end of
  its block, however the block ends.
- Groups still alive when the session ends are killed (``kill_leftovers``, called by
  ``tests/conftest.py`` and at exit), so a test stopped half-way leaves no server behind.
- ``scaled(seconds)``: every readiness wait of the suite is ``seconds`` times
  ``RUNSGATE_TEST_WAIT_SCALE`` (default 1; docs/testing.md "A busy machine").

No test calls ``subprocess`` or ``asyncio.create_subprocess_*`` itself (``tests/test_processes.py``).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

WAIT_SCALE_VARIABLE = "RUNSGATE_TEST_WAIT_SCALE"


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
    return proc


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
        _GROUPS.pop(proc.pid, None)
        _close_pipes(proc)


def _close_pipes(proc: subprocess.Popen[Any]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc``'s whole group at once and wait for the leader."""
    _signal_group(proc, signal.SIGKILL)
    proc.wait()
    _GROUPS.pop(proc.pid, None)


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
        _GROUPS.pop(proc.pid, None)
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


atexit.register(kill_leftovers)
