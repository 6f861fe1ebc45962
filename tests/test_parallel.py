"""What a pytest-xdist worker keeps to itself (docs/testing.md "Parallel runs"): its ports."""

from __future__ import annotations

import sys

import pytest

from . import _documentdb, _processes, _servers
from ._servers import ROOT


def test_each_worker_picks_ports_of_its_own_block_and_never_one_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    first, size, _ = _documentdb.WORKER_PORTS
    for worker in (0, 2):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        ports = [_servers.free_port() for _ in range(100)]
        assert len(set(ports)) == len(ports)
        assert all(first + worker * size <= port < first + (worker + 1) * size for port in ports), ports


def test_outside_a_worker_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    first, size, blocks = _documentdb.WORKER_PORTS
    assert not first <= _servers.free_port() < first + size * blocks


@pytest.mark.process
@pytest.mark.parametrize("dist", [[], ["--dist", "worksteal"]])
def test_workers_are_refused_with_another_distribution_than_loadfile(dist: list[str]) -> None:
    target = f"{__file__}::test_outside_a_worker_the_kernel_picks"
    result = _processes.run(
        [sys.executable, "-m", "pytest", "-n", "2", *dist, "-p", "no:cacheprovider", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage error
    assert "runs on pytest-xdist workers with --dist loadfile only, not --dist " in result.stderr
