"""Helpers over the published result folders of the review tests (`fixture_path("rounds")`,
tests/data/fixtures.md)."""

from __future__ import annotations

import csv
import hashlib
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def expected(rounds: Path) -> dict:
    """{(round, submitter folder, system folder, benchmark): row} of expected_scores.csv."""
    with open(rounds / "expected_scores.csv") as f:
        return {
            (r["round"], r["submitter_folder"], r["system_folder"], r["benchmark"]): r
            for r in csv.DictReader(f)
        }


def key(row: dict) -> tuple:
    """The expected_scores.csv key of a score row."""
    path = Path(row["path"])
    return (path.parents[3].name, row["submitter"], row["system"], path.name)


def small_copy(result_dir: Path, dest_round: Path, n: int = 3, files: list[str] | None = None) -> Path:
    """<dest_round>/<Org>/{systems/<system>.json, results/<system>/<bench>/ with n result files,
    scaling.json and the power logs of those runs}; returns the new result folder."""
    system, org = result_dir.parent, result_dir.parents[2]
    out = dest_round / org.name / "results" / system.name / result_dir.name
    out.mkdir(parents=True)
    (dest_round / org.name / "systems").mkdir(exist_ok=True)
    shutil.copy(org / "systems" / f"{system.name}.json", dest_round / org.name / "systems")
    names = files or sorted(p.name for p in result_dir.glob("result_*.txt"))[:n]
    for name in names:
        shutil.copy(result_dir / name, out / name)
        power = result_dir / "power" / name[: -len(".txt")]
        if power.is_dir():
            shutil.copytree(power, out / "power" / power.name)
    if (result_dir / "scaling.json").exists():
        shutil.copy(result_dir / "scaling.json", out)
    return out


def digest(root: Path) -> str:
    """Names, contents and modes of everything under root (symlinks as their targets' names)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_symlink():
            h.update(str(p.readlink()).encode())
        elif p.is_file():
            h.update(p.read_bytes() + oct(p.stat().st_mode).encode())
    return h.hexdigest()
