"""GraphQL over HTTP conformance, audited by graphql-http's own suite (``auditServer``).

``audit.mjs`` runs every server audit of the pinned ``graphql-http`` against a real runsgate
process. No MUST audit may fail. The SHOULD audits that fail must be exactly those docs/api.md
lists, with their reasons (section "Ecosystem", "GraphQL over HTTP"), and its counts must be
the audit's, so the documentation stays true. The results are left in
``tests/ecosystem/output/graphql-http-audit.json``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from .._servers import ROOT, runsgate_process
from ._node import OUTPUT, run_node_json

pytestmark = pytest.mark.usefixtures("node_tools")

COUNTS = re.compile(r"(\d+) MUST, (\d+) SHOULD and (\d+) MAY audits pass")
FAILED_SHOULD = re.compile(r"^- `([0-9A-F]{4})` SHOULD ", re.MULTILINE)


def readme_conformance_section() -> str:
    """The "GraphQL over HTTP" subsection of "Ecosystem" in docs/api.md."""
    readme = (ROOT / "docs" / "api.md").read_text()
    match = re.search(r"^### GraphQL over HTTP\n(.*?)(?=^#)", readme, re.MULTILINE | re.DOTALL)
    assert match, "docs/api.md has no '### GraphQL over HTTP' section"
    return match.group(1)


def test_runsgate_passes_graphql_http_server_audit_as_the_readme_says(tmp_path: Path) -> None:
    # given a runsgate process
    with runsgate_process(tmp_path / "runsgate.log") as base_url:
        # when graphql-http's server audit runs against its /graphql
        results = run_node_json("audit.mjs", f"{base_url}/graphql")
    OUTPUT.mkdir(exist_ok=True)
    (OUTPUT / "graphql-http-audit.json").write_text(json.dumps(results, indent=1))

    level = {r["id"]: r["name"].split()[0] for r in results}
    failed = [r for r in results if r["status"] != "ok"]
    passed = Counter(level[r["id"]] for r in results if r["status"] == "ok")

    # then no MUST audit fails
    assert [r for r in failed if level[r["id"]] == "MUST"] == []
    assert passed["MUST"] > 0
    # and the failing SHOULD audits are exactly those docs/api.md lists
    section = readme_conformance_section()
    failed_should = {r["id"]: r for r in failed if level[r["id"]] == "SHOULD"}
    assert set(failed_should) == set(FAILED_SHOULD.findall(section)), failed_should
    # and the documented counts are the audit's
    counts = COUNTS.search(section)
    assert counts, "docs/api.md does not give the audit counts"
    assert tuple(int(n) for n in counts.groups()) == (passed["MUST"], passed["SHOULD"], passed["MAY"])
