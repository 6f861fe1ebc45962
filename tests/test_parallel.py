"""What a pytest-xdist worker keeps to itself (docs/testing.md "Parallel runs"): its ports."""

from __future__ import annotations

import pytest

from . import _documentdb, _servers


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
