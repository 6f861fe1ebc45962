"""The documentation stands alone: every relative link of the Markdown files resolves to a file
of the repository (and, with ``#anchor``, to a heading of that file), and no file names the
design document that lives outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from . import _processes

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", ROOT / "SECURITY.md", ROOT / "bench" / "RESULTS.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
OUTSIDE = "DESIGN" + ".md"  # spelled in two parts so that this file does not name it
CODE_PATH = re.compile(r"`((?:server|resolvers|runtime|storage|tests|bench|examples|scripts|docs)/[\w./*-]*)`")
NOT_IN_GIT = {
    "tests/ecosystem/output/graphiql-suspended-runs.png",  # written by the browser test, git-ignored
}


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file (lower case, punctuation dropped, spaces to '-')."""
    seen: dict[str, int] = {}
    found = set()
    for title in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_the_docs_folder_exists_with_the_architecture() -> None:
    assert (ROOT / "docs" / "architecture.md").is_file()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    # given a Markdown file of the repository
    broken = []
    for target in relative_links(doc):
        # when a link points to a file (and maybe a heading) of the repository
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        # then the file exists, and so does the heading
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert broken == []


def test_no_file_names_the_outside_design_document() -> None:
    # given every file git tracks or would track
    listed = _processes.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\n")
    # then none of them names the design document kept outside the repository
    naming = []
    for name in filter(None, listed):
        path = ROOT / name
        if path.is_file() and OUTSIDE in path.read_text(errors="ignore"):
            naming.append(name)
    assert naming == []


def test_git_tracks_no_symlink() -> None:
    # given every file git tracks, with its mode (120000: a symlink)
    staged = _processes.run(
        ["git", "ls-files", "--stage"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    # then none is a symlink: one into a checkout (node_modules) points elsewhere in every other clone
    assert [line.split("\t")[-1] for line in staged if line.startswith("120000 ")] == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_repository_path_exists(doc: Path) -> None:
    # given a Markdown file naming files of the repository in backticks (`server/app.py`)
    named = set(CODE_PATH.findall(doc.read_text())) - NOT_IN_GIT
    # then each of them exists (a glob matches something)
    missing = sorted(p for p in named if not (list(ROOT.glob(p.rstrip("/"))) if "*" in p else (ROOT / p).exists()))
    assert missing == []
