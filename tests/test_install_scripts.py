"""The install scripts take turns: two ``./dev test`` started at once (two terminals, or a
helper's beside CI) build FerretDB once, and the second uses the first's binary. One that waits
for another's build says so, naming what it waits for and the lock. A build's output goes to a
log file under the cache folder, and only its end is shown, when the build fails."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from . import _processes
from ._servers import ROOT

FAKE_GO = """#!/usr/bin/env bash
# `go mod download -json MODULE`: a module folder; `go build -o OUT ...`: counted, slow, noisy, a
# binary (or a failure, with FAKE_GO_FAIL set)
set -euo pipefail
if [ "$1" = mod ]; then
  echo '{"Dir": "%(src)s"}'
  exit 0
fi
echo built >> "%(builds)s"
for module in one two three; do
  echo "go: downloading example.com/$module v1.0.0" >&2
done
if [ -n "${FAKE_GO_FAIL:-}" ]; then
  echo "fake-go: undefined: setGOMAXPROCS" >&2
  exit 1
fi
sleep 2
out="$3"
printf '#!/bin/sh\\necho "version: fake"\\n' > "$out"
chmod +x "$out"
"""

SCRIPT = str(ROOT / "scripts" / "install-ferretdb.sh")
VERSION = "v1.24.2"


def _fake_go(tmp_path: Path, **variables: str) -> dict[str, str]:
    """The environment of an install with a Go that takes 2 s to build, and an empty cache."""
    src, tools = tmp_path / "module", tmp_path / "tools"
    (src / "build" / "version").mkdir(parents=True)
    tools.mkdir()
    go = tools / "go"
    go.write_text(FAKE_GO % {"src": src, "builds": tmp_path / "builds"})
    go.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "RUNSGATE_CACHE": str(tmp_path / "cache"),
        **variables,
    }


def test_two_ferretdb_installs_at_once_build_once_and_both_print_the_binary(tmp_path: Path) -> None:
    # given a Go that takes 2 s to build, and no FerretDB built yet
    env = _fake_go(tmp_path)

    # when two installs start together
    with (
        _processes.started(["bash", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as a,
        _processes.started(["bash", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as b,
    ):
        results = [(p.communicate(timeout=_processes.scaled(60)), p.returncode) for p in (a, b)]

    # then one built, and both printed the binary's path
    binary = str(tmp_path / "cache" / "bin" / f"ferretdb-{VERSION}")
    for (out, err), status in results:
        assert status == 0, err
        assert out.strip() == binary, (out, err)
    assert (tmp_path / "builds").read_text().splitlines() == ["built"]
    assert sorted(p.name for p in (tmp_path / "cache" / "bin").iterdir()) == [
        f"ferretdb-{VERSION}",
        f"ferretdb-{VERSION}.lock",
    ]


def test_an_install_waiting_for_another_build_says_what_it_waits_for(tmp_path: Path) -> None:
    # given another build holding the lock
    env = _fake_go(tmp_path)
    lock = tmp_path / "cache" / "bin" / f"ferretdb-{VERSION}.lock"
    lock.parent.mkdir(parents=True)
    errors = tmp_path / "install.err"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        # when an install starts
        with (
            open(errors, "w") as err,
            _processes.started(["bash", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=err, text=True) as install,
        ):
            # then it says what it waits for, and the lock, before the other build ends
            deadline = time.monotonic() + _processes.scaled(30)
            while "waiting" not in errors.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            waiting = errors.read_text()
            assert f"install-ferretdb: waiting for another build of FerretDB {VERSION}" in waiting, waiting
            assert str(lock) in waiting, waiting
            assert install.poll() is None, waiting
            # and once the other build ends, it builds and prints the binary
            fcntl.flock(held, fcntl.LOCK_UN)
            out, _ = install.communicate(timeout=_processes.scaled(60))
    assert install.returncode == 0, errors.read_text()
    assert out.strip() == str(tmp_path / "cache" / "bin" / f"ferretdb-{VERSION}")
    assert "the other build of FerretDB" in errors.read_text()


def test_a_build_keeps_its_output_in_a_log_under_the_cache(tmp_path: Path) -> None:
    # when FerretDB is built by a noisy Go
    result = _processes.run(["bash", SCRIPT], env=_fake_go(tmp_path), capture_output=True, text=True, timeout=60)

    # then the install prints the binary, says where the log is, and none of Go's lines
    log = tmp_path / "cache" / "logs" / f"ferretdb-{VERSION}.log"
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "cache" / "bin" / f"ferretdb-{VERSION}")
    assert str(log) in result.stderr
    assert "go: downloading" not in result.stderr
    assert len(result.stderr.splitlines()) <= 2, result.stderr
    # which are in the log
    assert "go: downloading example.com/three v1.0.0" in log.read_text()


def test_a_failed_build_shows_the_end_of_its_log_and_where_it_is(tmp_path: Path) -> None:
    # when the Go build fails
    env = _fake_go(tmp_path, FAKE_GO_FAIL="1")
    result = _processes.run(["bash", SCRIPT], env=env, capture_output=True, text=True, timeout=60)

    # then the install fails, showing the end of the build's output and naming the whole log
    log = tmp_path / "cache" / "logs" / f"ferretdb-{VERSION}.log"
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert "fake-go: undefined: setGOMAXPROCS" in result.stderr
    assert "go: downloading example.com/three v1.0.0" in result.stderr
    assert f"install-ferretdb: building FerretDB {VERSION} failed" in result.stderr
    assert str(log) in result.stderr.splitlines()[-1]
    assert not (tmp_path / "cache" / "bin" / f"ferretdb-{VERSION}").exists()
