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
    files = [REPO / "NOTES.md", REPO / "README.md", *REPO.glob("*/**/README.md")]
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
