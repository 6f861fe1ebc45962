"""No test depends on a fixed port: in CI (and with ``RUNSGATE_TEST_HOLD_PORT=1``) the session holds
runsgate's default port (``tests/conftest.py`` ``hold_default_port``), so a test that starts a server
without choosing a free port fails at once, whether or not a ``./dev serve`` listens on this machine.
Elsewhere the port is left free, so a developer's ``./dev serve`` starts while tests run."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from .conftest import DEFAULT_PORT, DEFAULT_PORT_HOSTS, _holds_default_port


def _bind_as_runsgate_does(host: str, port: int) -> None:
    """Bind ``host:port`` with ``SO_REUSEADDR``, as ``runsgate serve`` and uvicorn do, then listen."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()


@pytest.mark.parametrize("host", [*DEFAULT_PORT_HOSTS, "0.0.0.0", "::"])
def test_no_test_can_bind_runsgates_default_port(host: str) -> None:
    if not _holds_default_port():
        pytest.skip("the default port is held in CI, or with RUNSGATE_TEST_HOLD_PORT=1")
    try:
        _bind_as_runsgate_does(host, 0)
    except OSError as exc:  # no IPv6 here
        pytest.skip(f"{host} is not an address of this machine ({exc.strerror})")
    with pytest.raises(OSError, match=os.strerror(errno.EADDRINUSE)):
        _bind_as_runsgate_does(host, DEFAULT_PORT)
