"""The install scripts take turns: two ``./dev test`` started at once (two terminals, or a
helper's beside CI) build FerretDB once, and the second uses the first's binary."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from . import _processes
from ._servers import ROOT

FAKE_GO = """#!/usr/bin/env bash
# `go mod download -json MODULE`: a module folder; `go build -o OUT ...`: counted, slow, a binary
set -euo pipefail
if [ "$1" = mod ]; then
  echo '{"Dir": "%(src)s"}'
  exit 0
fi
echo built >> "%(builds)s"
sleep 2
out="$3"
printf '#!/bin/sh\\necho "version: fake"\\n' > "$out"
chmod +x "$out"
"""


def test_two_ferretdb_installs_at_once_build_once_and_both_print_the_binary(tmp_path: Path) -> None:
    # given a Go that takes 2 s to build, and no FerretDB built yet
    src, tools, builds = tmp_path / "module", tmp_path / "tools", tmp_path / "builds"
    (src / "build" / "version").mkdir(parents=True)
    tools.mkdir()
    go = tools / "go"
    go.write_text(FAKE_GO % {"src": src, "builds": builds})
    go.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "RUNSGATE_CACHE": str(tmp_path / "cache")}

    # when two installs start together
    script = str(ROOT / "scripts" / "install-ferretdb.sh")
    with (
        _processes.started(["bash", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as a,
        _processes.started(["bash", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as b,
    ):
        results = [(p.communicate(timeout=_processes.scaled(60)), p.returncode) for p in (a, b)]

    # then one built, and both printed the binary's path
    binary = str(tmp_path / "cache" / "bin" / "ferretdb-v1.24.2")
    for (out, err), status in results:
        assert status == 0, err
        assert out.strip() == binary, (out, err)
    assert builds.read_text().splitlines() == ["built"]
    assert sorted(p.name for p in (tmp_path / "cache" / "bin").iterdir()) == [
        "ferretdb-v1.24.2",
        "ferretdb-v1.24.2.lock",
    ]
