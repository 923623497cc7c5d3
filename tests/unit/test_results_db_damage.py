"""A damaged results database (`results/db/<round>/*.parquet`) is one `error:` line, exit 2, with
how to rebuild it, for `results compare` and `diagnose --db` (issue 22). Before, all three cases
crashed with exit 1: ArrowInvalid, FileNotFoundError, KeyError 'benchmark'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TREE = Path(__file__).resolve().parents[1] / "data" / "tiny_tree"


def _damage(path: Path, how: str) -> None:
    if how == "not parquet":
        path.write_text("junk\n")
    elif how == "missing":
        path.unlink()
    else:  # a parquet, but not our table
        import pandas as pd

        pd.read_parquet(path).drop(columns=["benchmark"]).to_parquet(path)


@pytest.mark.parametrize(
    "how, message",
    [
        ("not parquet", "not a readable parquet table (ArrowInvalid)"),
        ("missing", "missing (round v4.0 is incomplete)"),
        ("foreign columns", "no benchmark column(s): not a results table"),
    ],
)
def test_a_damaged_round_table_is_one_line(mlperf, tmp_path, how, message):
    db = tmp_path / "db"
    r = mlperf("results", "ingest", str(TREE), "--round", "v4.0", "--db", str(db), "--no-check")
    assert r.returncode == 0, r.stderr
    assert mlperf("results", "compare", "-b", "gpt3", "--db", str(db)).returncode == 0
    _damage(Path(os.path.realpath(db / "v4.0")) / "results.parquet", how)
    log = next(TREE.rglob("result_0.txt"))
    for args in (["results", "compare", "-b", "gpt3"], ["diagnose", str(log)]):
        r = mlperf(*args, "--db", str(db))
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith("error: ") and message in line and "mlperf results ingest" in line, line
