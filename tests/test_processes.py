"""Every process a test starts is in its own process group, and that group is ended with it (tests/_processes.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest

from . import _processes
from ._servers import ROOT

STARTS_A_PROCESS = re.compile(
    r"\bsubprocess\.(Popen|run|call|check_call|check_output|getoutput|getstatusoutput)\(|"
    r"\bcreate_subprocess_(exec|shell)\(|\bos\.(system|popen|fork|spawn\w*|exec\w*)\(|\bmultiprocessing\b"
)
FAMILY = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""
"""A process that starts a child and waits: the child is what a plain ``proc.kill()`` leaves behind."""


def test_no_test_starts_a_process_outside_tests_processes() -> None:
    # given every Python file of the suite and of the chaos harness the suite drives
    files = [p for p in [*ROOT.glob("tests/**/*.py"), *ROOT.glob("chaos/*.py")] if "node_modules" not in p.parts]
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        if path.name not in {"_processes.py", "test_processes.py", "cluster.py"}
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if STARTS_A_PROCESS.search(line)
    ]
    # then none starts a process except through tests/_processes.py (chaos/cluster.py has its own groups)
    assert offenders == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _wait_dead(pid: int) -> bool:
    deadline = time.monotonic() + _processes.scaled(10)
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _fail_inside(pids: list[int]) -> None:
    with _processes.started([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True, grace=2) as proc:
        assert proc.stdout is not None
        pids.extend([proc.pid, int(proc.stdout.readline())])
        raise RuntimeError("the test failed")


@pytest.mark.process
def test_a_failing_block_ends_the_whole_group_of_its_process() -> None:
    # given a process, started in its own group, that started a child
    # when the test fails inside the block
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="the test failed"):
        _fail_inside(pids)
    leader, child = pids
    # then the child is gone too, not left to init
    assert _wait_dead(child)
    assert not _alive(leader)


@pytest.mark.process
def test_each_process_leads_its_own_group() -> None:
    with _processes.started([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True, grace=2) as proc:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
        assert os.getpgid(child) == proc.pid
    assert _wait_dead(child)


@pytest.mark.process
def test_a_command_past_its_timeout_is_killed_with_its_children() -> None:
    script = FAMILY.replace("print(child.pid, flush=True)", "open(sys.argv[1], 'w').write(str(child.pid))")
    pid_file = ROOT / ".pytest_cache" / f"child-{os.getpid()}.pid"
    pid_file.parent.mkdir(exist_ok=True)
    try:
        # when a command that started a child runs past its timeout
        with pytest.raises(subprocess.TimeoutExpired):
            _processes.run([sys.executable, "-c", script, str(pid_file)], timeout=3)
        # then the child was killed with it
        assert _wait_dead(int(pid_file.read_text()))
    finally:
        pid_file.unlink(missing_ok=True)


@pytest.mark.process
def test_groups_left_at_the_end_are_killed() -> None:
    # given a group nobody stopped (a test killed before its cleanup)
    proc = _processes.start([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())

    # when the session ends (here: this group alone; the session's FerretDB is one of the others)
    left = _processes.kill_leftovers([proc])

    # then the group is killed and named
    assert any(FAMILY.strip()[:20] in command for command in left), left
    assert _wait_dead(child)


def test_the_wait_scale_multiplies_the_readiness_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_processes.WAIT_SCALE_VARIABLE, "2.5")
    assert _processes.scaled(30) == 75
    monkeypatch.setenv(_processes.WAIT_SCALE_VARIABLE, "0")
    with pytest.raises(ValueError, match="RUNSGATE_TEST_WAIT_SCALE must be a positive number, got '0'"):
        _processes.scaled(30)
    monkeypatch.delenv(_processes.WAIT_SCALE_VARIABLE)
    assert _processes.scaled(30) == 30


@pytest.mark.process
def test_sigterm_to_pytest_ends_the_groups_its_tests_started(tmp_path: Path) -> None:
    # given a pytest session whose test started a process group and waits
    (tmp_path / "test_waits.py").write_text(
        "import subprocess, sys, time\n"
        "from tests import _processes\n"
        "def test_waits():\n"
        f"    with _processes.started([sys.executable, '-c', {FAMILY!r}], stdout=subprocess.PIPE, text=True) as p:\n"
        f"        open({str(tmp_path / 'pid')!r}, 'w').write(p.stdout.readline())\n"
        "        time.sleep(600)\n"
    )
    pid_file = tmp_path / "pid"
    command = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest"),
        *("--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), str(tmp_path / "test_waits.py")),
    ]
    with _processes.started(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as session:
        deadline = time.monotonic() + _processes.scaled(60)
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        child = int(pid_file.read_text())
        # when pytest alone gets SIGTERM
        session.send_signal(signal.SIGTERM)
        session.wait(timeout=_processes.scaled(60))
    # then the test's process group ended with the session
    assert _wait_dead(child)


@pytest.mark.process
def test_the_groups_of_a_killed_xdist_worker_are_killed_when_the_session_ends(tmp_path: Path) -> None:
    # given a pytest-xdist session whose worker started a process group, then died before any
    # teardown or exit handler ran (as a worker that xdist kills, or that crashes)
    pid_file = tmp_path / "pids"
    (tmp_path / "test_dies.py").write_text(
        "import os, signal, subprocess, sys\n"
        "from tests import _processes\n"
        "def test_dies():\n"
        f"    p = _processes.start([sys.executable, '-c', {FAMILY!r}], stdout=subprocess.PIPE, text=True)\n"
        f"    open({str(pid_file)!r}, 'w').write(f'{{p.pid}} {{p.stdout.readline()}}')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    command = [
        *(sys.executable, "-m", "pytest", "-n", "1", "--dist", "loadfile", "--max-worker-restart", "0"),
        *("-p", "no:cacheprovider", "-p", "tests.conftest"),
        *("--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), str(tmp_path / "test_dies.py")),
    ]
    try:
        # when the session ends
        result = _processes.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert pid_file.exists(), result.stdout + result.stderr
        leader, child = map(int, pid_file.read_text().split())
        # then the controller killed the group the dead worker left, and named it
        assert "crashed" in result.stdout, result.stdout
        assert _wait_dead(child), result.stdout
        assert not _alive(leader)
        assert "killed 1 process group(s) left running by tests" in result.stdout, result.stdout
    finally:
        if pid_file.exists() and pid_file.read_text().strip():
            with suppress(ProcessLookupError):
                os.killpg(int(pid_file.read_text().split()[0]), signal.SIGKILL)


@pytest.mark.process
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_pytest_killed_with_sigkill_leaves_no_process_it_started(tmp_path: Path) -> None:
    # given a pytest session whose test started a server-like process and waits
    pid_file = tmp_path / "pid"
    (tmp_path / "test_waits.py").write_text(
        "import sys, time\n"
        "from tests import _processes\n"
        "def test_waits():\n"
        "    p = _processes.start([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "    time.sleep(600)\n"
    )
    command = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest"),
        *("--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), str(tmp_path / "test_waits.py")),
    ]
    child = 0
    try:
        with _processes.started(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT) as session:
            deadline = time.monotonic() + _processes.scaled(60)
            while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.1)
            child = int(pid_file.read_text())
            # when pytest alone is killed with SIGKILL: no teardown, no exit handler runs
            os.kill(session.pid, signal.SIGKILL)
            session.wait(timeout=_processes.scaled(30))
            # then the process its test started died with it (its own group, not pytest's)
            assert _wait_dead(child)
    finally:
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def _dead_pid() -> int:
    """The pid of a process that has exited and been waited for."""
    proc = _processes.start([sys.executable, "-c", "pass"])
    proc.wait()
    _processes.stop(proc)
    return proc.pid


def test_a_leftover_folder_whose_owner_is_dead_is_removed_and_one_whose_owner_lives_is_kept(tmp_path: Path) -> None:
    # given two server folders as a session leaves them: one of a dead process, one of this one
    dead, live = tmp_path / "runsgate-documentdb-dead", tmp_path / "runsgate-ferretdb-live"
    for folder in (dead, live):
        (folder / "data").mkdir(parents=True)
    (tmp_path / "runsgate-documentdb-dead.owner").write_text(f'{{"pid": {_dead_pid()}, "since": "1"}}')
    _processes.own(live)

    # when a session starts
    removed = _processes.sweep_leftovers(tmp_path)

    # then only the dead owner's folder and owner file are gone
    assert removed == [dead.name]
    assert not dead.exists()
    assert not (tmp_path / "runsgate-documentdb-dead.owner").exists()
    assert (live / "data").is_dir()
    assert (tmp_path / "runsgate-ferretdb-live.owner").exists()


def test_a_groups_file_whose_owner_is_dead_has_its_groups_killed(tmp_path: Path) -> None:
    # given a groups file of a dead session that lists a group still running
    groups = tmp_path / "runsgate-test-groups-dead.jsonl"
    proc = _processes.start([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        groups.write_text(f'{{"start": {proc.pid}, "since": "{_processes._leader_since(proc.pid)}", "command": "x"}}\n')
        (tmp_path / f"{groups.name}.owner").write_text(f'{{"pid": {_dead_pid()}, "since": "1"}}')

        # when a session starts
        removed = _processes.sweep_leftovers(tmp_path)

        # then the group is killed and the file removed
        assert removed == [groups.name]
        assert proc.wait(timeout=_processes.scaled(10)) == -signal.SIGKILL
        assert not groups.exists()
    finally:
        _processes.stop(proc)


def test_an_owner_file_without_a_start_time_is_judged_by_its_pid(tmp_path: Path) -> None:
    # given owner files as a system without /proc writes them: a pid, no start time
    live, dead = tmp_path / "runsgate-ferretdb-live", tmp_path / "runsgate-ferretdb-dead"
    for folder, pid in ((live, os.getpid()), (dead, _dead_pid())):
        folder.mkdir()
        (tmp_path / f"{folder.name}.owner").write_text(f'{{"pid": {pid}, "since": null}}')

    # when a session starts, then only the dead pid's folder is removed
    assert _processes.sweep_leftovers(tmp_path) == [dead.name]
    assert live.is_dir()
