"""``runsgate serve`` against a store it cannot reach: one line naming the host, exit status 3."""

from __future__ import annotations

import subprocess

import pytest

from storage.mongo import store_address

from .._servers import ROOT, SERVE, free_port, server_env


def _serve(uri: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVE, "--port", str(free_port())],
        cwd=ROOT,
        env=server_env(MONGODB_URI=uri, RUNSGATE_MONGODB_TIMEOUT="1", RUNSGATE_AUTH="off"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.process
@pytest.mark.parametrize("credentials", ["", "alice:s3cret-pa55@"])
def test_an_unreachable_store_at_start_is_one_line_naming_the_host_and_exit_status_3(credentials: str) -> None:
    port = free_port()  # nothing listens there
    result = _serve(f"mongodb://{credentials}127.0.0.1:{port}/runsgate?authSource=admin")
    assert result.returncode == 3, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"runsgate cannot start: the store at 127.0.0.1:{port} is unreachable ("), line
    assert line.endswith(")"), line
    assert "s3cret" not in result.stderr + result.stdout
    assert "alice" not in result.stderr + result.stdout


@pytest.mark.process
def test_a_uri_pymongo_refuses_is_a_configuration_error_with_exit_status_2() -> None:
    result = _serve("mongodb://alice:s3cret@127.0.0.1:1/bad$name")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == ["runsgate: invalid configuration: MONGODB_URI: Bad database name"]


@pytest.mark.parametrize(
    ("uri", "address"),
    [
        ("mongodb://127.0.0.1:27018/runsgate", "127.0.0.1:27018"),
        ("mongodb://db.internal", "db.internal:27017"),
        ("mongodb://alice:s3cret@h1:27017,h2/runsgate?replicaSet=rs0", "h1:27017,h2:27017"),
        ("mongodb://alice:sec/ret@h1:5/runsgate", "h1:5"),  # an unescaped "/" in the password
        ("mongodb+srv://alice:s3cret@cluster0.example.net/runsgate", "cluster0.example.net"),
    ],
)
def test_the_store_address_names_the_hosts_and_never_the_credentials(uri: str, address: str) -> None:
    assert store_address(uri) == address
