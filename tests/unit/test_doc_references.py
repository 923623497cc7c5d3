"""Every file a doc or a docstring points to exists: NOTES.md, the READMEs and the code's own
comments name paths (`harness/run/execute.py`) and dotted modules (`harness.core.mllog`) that a
newcomer follows; a rename that leaves one of them behind fails here."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# (not systems/: docs also name <org>/systems/<system>.json inside result trees)
ROOTS = ("harness", "benchmarks", "reference_impls", "tests", "bench", ".ci")
_ROOTS_RE = "|".join(re.escape(r) for r in ROOTS)
PATH_RE = re.compile(rf"(?<![\w./-])((?:{_ROOTS_RE})/[\w./-]*\w)")
MODULE_RE = re.compile(r"(?<![\w./-])((?:harness|benchmarks|reference_impls)(?:\.\w+)+)")


def sources() -> list[Path]:
    files = [
        REPO / "NOTES.md",
        REPO / "README.md",
        *REPO.glob("*/**/README.md"),
        *sorted((REPO / "docs").glob("*.md")),
    ]
    for root in ROOTS[:-1] + ("systems",):
        files += sorted((REPO / root).rglob("*.py"))
    skip = {REPO / "tests" / "unit" / "test_layers.py"}  # builds a made-up tree out of path strings
    return [
        f
        for f in files
        if ".venv" not in f.parts and "data" not in f.relative_to(REPO).parts[:2] and f not in skip
    ]


def exists(ref: str) -> bool:
    ref = ref.rstrip(".")
    if (REPO / ref).exists():
        return True
    parts = ref.split(".")  # a dotted module, maybe followed by an attribute
    for n in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:n])
        if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
            return True
    return False


def test_every_referenced_path_and_module_exists():
    missing = []
    for f in sources():
        text = f.read_text(errors="replace")
        for m in PATH_RE.finditer(text):
            ref = m.group(1)
            if "<" in ref or "*" in ref or ref.endswith("/"):
                continue
            if not (REPO / ref.rstrip(".")).exists():
                missing.append(f"{f.relative_to(REPO)}: {ref}")
        for m in MODULE_RE.finditer(text):
            if not exists(m.group(1)):
                missing.append(f"{f.relative_to(REPO)}: {m.group(1)}")
    assert missing == []


LINK_RE = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](image)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in md.read_text().splitlines() if line.startswith("#")}


def markdown_docs() -> list[Path]:
    return [REPO / "README.md", REPO / "NOTES.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_markdown_link_resolves():
    """A link in the README, NOTES.md or docs/ that names a missing file or a missing heading fails
    (a page moved or a heading renamed); web links are not fetched."""
    broken = []
    for md in markdown_docs():
        for target in LINK_RE.findall(md.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            if not dest.exists():
                broken.append(f"{md.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{md.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_is_read_in_ten_minutes():
    """The README stays an overview (issue 47: <= 2,000 words); details go to docs/, one topic a page."""
    words = len((REPO / "README.md").read_text().split())
    assert words <= 2000, f"README.md has {words} words: move detail to docs/"
