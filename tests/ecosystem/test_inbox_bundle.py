"""The inbox's committed files are what its sources build to.

``scripts/vendor-inbox.sh`` bundles ``scripts/inbox/src`` (with the versions pinned by
``scripts/inbox/package-lock.json``) into ``server/static/inbox``; runsgate serves those committed
files. This test builds them again into a temporary folder and compares, so a change to the
sources without a rebuild (or a rebuild without its hashes) fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .. import _processes
from .._servers import ROOT

pytestmark = pytest.mark.usefixtures("node_tools")

COMMITTED = ROOT / "server" / "static" / "inbox"


def test_the_committed_inbox_files_are_the_build_of_its_sources(tmp_path: Path) -> None:
    # when the sources are built again
    built = _processes.run(
        ["bash", str(ROOT / "scripts" / "vendor-inbox.sh"), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]

    # then every file is byte for byte the committed one
    for name in ("inbox.js", "inbox.css", "integrity.json"):
        assert (tmp_path / name).read_bytes() == (COMMITTED / name).read_bytes(), (
            f"server/static/inbox/{name} is stale: run scripts/vendor-inbox.sh and commit what it writes"
        )
    assert sorted(p.name for p in COMMITTED.iterdir()) == ["inbox.css", "inbox.js", "integrity.json"]
