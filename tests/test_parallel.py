"""What a test session and each of its pytest-xdist workers keep to themselves (docs/testing.md
"Parallel runs"): their ports, in the session's port slot."""

from __future__ import annotations

import itertools
import os
import re
import sys
from pathlib import Path

import pytest

from . import _documentdb, _processes, _servers
from ._servers import ROOT


def test_each_worker_picks_ports_of_its_own_block_in_its_slot_and_never_one_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, size, workers, _ = _documentdb.WORKER_PORTS
    monkeypatch.setenv(_documentdb.SLOT_VARIABLE, "1")
    # none handed out yet: this worker may be gw0 of slot 1 itself, whose earlier ports would make
    # free_port start the block over (after half of it) within these 100
    monkeypatch.setattr(_documentdb, "_handed", set())
    for worker in (0, 2):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        ports = [_servers.free_port() for _ in range(100)]
        assert len(set(ports)) == len(ports)
        start = first + (workers + worker) * size
        assert all(start <= port < start + size for port in ports), ports
        assert all(port in _documentdb.slot_ports(1) for port in ports)


def test_a_session_without_workers_picks_from_its_slots_first_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_documentdb.SLOT_VARIABLE, "2")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    first, size, workers, _ = _documentdb.WORKER_PORTS
    assert first + 2 * workers * size <= _servers.free_port() < first + (2 * workers + 1) * size


def test_without_a_slot_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_documentdb.SLOT_VARIABLE, raising=False)
    first, size, workers, slots = _documentdb.WORKER_PORTS
    assert not first <= _servers.free_port() < first + size * workers * slots


def test_the_slots_lie_below_the_ephemeral_ports_and_never_overlap() -> None:
    slots = [_documentdb.slot_ports(slot) for slot in range(_documentdb.WORKER_PORTS[3])]
    assert all(a.stop == b.start for a, b in itertools.pairwise(slots))
    assert slots[-1].stop <= 32768


def test_each_lock_holder_gets_the_first_slot_nobody_holds(tmp_path: Path) -> None:
    # given slot 0 held, as by another session
    held = [_documentdb.lock_port_slot(str(tmp_path))]
    assert held[0] is not None
    assert held[0][0] == 0
    try:
        # when more sessions take slots until none is left, and one of them ends
        for _ in range(_documentdb.WORKER_PORTS[3] - 1):
            held.append(_documentdb.lock_port_slot(str(tmp_path)))
        none_left = _documentdb.lock_port_slot(str(tmp_path))
        ended = held.pop(2)
        assert ended is not None
        os.close(ended[1])
        again = _documentdb.lock_port_slot(str(tmp_path))
        if again is not None:
            held.append(again)

        # then each got the next slot, none was left, and the ended one's slot is free again
        assert [taken[0] for taken in held if taken is not None] == [0, 1, 3, 2]
        assert none_left is None
    finally:
        for taken in held:
            if taken is not None:
                os.close(taken[1])


@pytest.mark.process
def test_a_second_session_takes_another_slot_and_its_workers_share_it(tmp_path: Path) -> None:
    # given this session's slot, and a second session on one pytest-xdist worker that records
    # the slot and a port its worker picks
    ours = os.environ.get(_documentdb.SLOT_VARIABLE)
    (tmp_path / "test_slot.py").write_text(
        "import os, pathlib\n"
        "from tests import _servers\n"
        "def test_slot():\n"
        f"    seen = pathlib.Path({str(tmp_path / 'seen')!r})\n"
        f"    seen.write_text(os.environ[{_documentdb.SLOT_VARIABLE!r}] + ' ' + str(_servers.free_port()))\n"
    )
    command = [
        *(sys.executable, "-m", "pytest", "-n", "1", "--dist", "loadfile", "-p", "no:cacheprovider"),
        *("-p", "tests.conftest", "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), str(tmp_path)),
    ]

    # when it runs
    result = _processes.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)

    # then its header names a slot other than ours, which its worker used
    assert result.returncode == 0, result.stdout + result.stderr
    [header] = re.findall(r"^port slot (\d+) ", result.stdout, re.MULTILINE)
    slot, port = map(int, (tmp_path / "seen").read_text().split())
    assert str(slot) == header != ours
    assert port in _documentdb.slot_ports(slot)


@pytest.mark.process
@pytest.mark.parametrize("dist", [[], ["--dist", "worksteal"]])
def test_workers_are_refused_with_another_distribution_than_loadfile(dist: list[str]) -> None:
    target = f"{__file__}::test_without_a_slot_the_kernel_picks"
    result = _processes.run(
        [sys.executable, "-m", "pytest", "-n", "2", *dist, "-p", "no:cacheprovider", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage error
    assert "runs on pytest-xdist workers with --dist loadfile only, not --dist " in result.stderr
