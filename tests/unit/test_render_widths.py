"""No number is cut or split at 80, 100 or 120 columns: `mlperf plan`, `results score` and
`results compare` in text (harness/commands/tables.py). Before, rich folded cells, so 43.7 became
'43.…' or '43.' over '7', and `results score` packed ten runs' minutes into one folded cell.

Each command runs in-process (click's runner) with COLUMNS forced, as a narrow terminal would;
the numbers of a very wide rendering and those of its --json document must all be whole tokens
of the narrow text, no cell may end in '…', and no line may pass the width."""

from __future__ import annotations

import json
import random
import re

import pytest
from click.testing import CliRunner
from fixtures import fixture_path
from rich.cells import cell_len

from harness.cli import cli
from harness.review.results.compare import short_accelerator

WIDTHS = (80, 100, 120)
NUM = re.compile(r"\d+(?:[.,]\d+)*")


def mlperf(*args: str, columns: int | None = None):
    env = {"COLUMNS": str(columns) if columns else None, "NO_COLOR": "1"}
    res = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def whole(text: str, number: str) -> bool:
    return re.search(rf"(?<![\d.,]){re.escape(number)}(?![\d]|[.,]\d)", text) is not None


def assert_fits(
    args: tuple, expected: list[str], abbreviated: set[str] | frozenset[str] = frozenset()
) -> None:
    """`expected`: cells the --json document says the table holds, as the table writes them;
    `abbreviated`: numbers a narrow table leaves out by design (141 of NVIDIA H200-SXM5-141GB)."""
    wide = mlperf(*args, columns=400).stdout
    tokens = set(NUM.findall(wide)) - set(abbreviated)
    assert all(whole(wide, n) for n in expected), [n for n in expected if not whole(wide, n)]
    for w in WIDTHS:
        text = mlperf(*args, columns=w).stdout
        long = [ln for ln in text.splitlines() if cell_len(ln) > w]
        assert not long, (w, long)
        assert "…" not in text, (w, text)
        cut = sorted(n for n in tokens if not whole(text, n))
        assert not cut, (w, cut, text)
        assert all(whole(text, n) for n in expected), (w, text)


def test_plan_at_80_100_120():
    args = ("plan", "gpt3", "--system", "dgx-h100x8", "--top", "3")
    doc = json.loads(mlperf(*args, "--json").stdout)
    expected = []
    for o in doc["options"]:
        expected += [f"{o['predicted_min']:.2f}", f"{o['step_s']:.3f}", f"{o['memory_total_gib']:.1f}"]
        expected += [str(o["layout"]["gbs"]), f"{o['samples_to_converge']:,.0f}"]
    assert_fits(args, expected)


@pytest.mark.parametrize("tree", ["mlperf_v4.0", "rounds"])
def test_results_score_one_row_per_result(tree):
    """v4.0: one line per result at 80 columns; rounds: names of 41 characters, a block each."""
    args = ("results", "score", str(fixture_path(tree)), "--no-check")
    rows = json.loads(mlperf(*args, "--json").stdout)["results"]
    assert all(len(r["run_minutes"]) == r["runs"] for r in rows)  # the runs' minutes: in --json
    expected = [f"{r['score_min']:.3f}" for r in rows] + [f"{r['scaling_factor']:.4f}" for r in rows]
    expected += [str(r["accelerators"]) for r in rows] + [n for r in rows for n in NUM.findall(r["system"])]
    short = {n for r in rows for n in NUM.findall(short_accelerator(r["accelerator"]))}
    assert_fits(args, expected, {n for r in rows for n in NUM.findall(r["accelerator"])} - short)
    text = mlperf(*args, columns=80).stdout
    assert "minutes per run" not in text  # ten of them made one cell, folded over five lines
    if tree == "mlperf_v4.0":
        body = [ln for ln in text.splitlines() if re.match(r"\S+_nemo|\S+_dgl", ln)]
        assert len(body) == len(rows)  # a line a result
        assert "same in every result: submitter NVIDIA, ruleset 4.0.0, division closed" in text


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from harness.review.results.ingest import ingest

    base = tmp_path_factory.mktemp("db") / "db"
    ingest(str(fixture_path("mlperf_v4.0")), "v4.0", str(base), check=False)
    for r in ("v4.1", "v5.0"):
        ingest(str(fixture_path("rounds") / r), r, str(base), check=False)
    return base


@pytest.mark.parametrize("by", ["time", "energy"])
def test_results_compare_at_80_100_120(db, by):
    args = ("results", "compare", "-b", "llama2_70b_lora", "--db", str(db), "--by", by)
    doc = json.loads(mlperf(*args, "--json").stdout)
    scale = 1e-6 if by == "energy" else 1.0
    expected = [f"{r['best'] * scale:.3f}" for r in doc["rounds"]] + [
        str(r["results"]) for r in doc["rounds"]
    ]
    assert_fits(args, expected)


def test_any_table_any_width():
    """The layouts themselves (full, compact, split, records): random tables at random widths."""
    import io

    from rich.console import Console

    from harness.commands.tables import Col, show

    rng = random.Random(5)
    for _ in range(60):
        cols = [Col("name", left=True, key=True)] + [
            Col(f"c{i} s" * rng.randint(1, 3)) for i in range(rng.randint(1, 14))
        ]
        rows = [
            [f"sys_{rng.randint(1, 10 ** rng.randint(1, 9))}_ngc24.04" * rng.randint(1, 2)]
            + [f"{rng.uniform(0, 10 ** rng.randint(0, 7)):.{rng.randint(0, 4)}f}" for _ in cols[1:]]
            for _ in range(rng.randint(1, 6))
        ]
        w = rng.randint(50, 200)  # the longest name, 44 characters, fits
        buf = io.StringIO()
        show(Console(file=buf, width=w, no_color=True), "a title with 12.5 in it", cols, rows)
        text = buf.getvalue()
        assert max(cell_len(ln) for ln in text.splitlines()) <= w, text
        assert "…" not in text
        for r in rows:
            assert all(whole(text, x) for x in r[1:]), (w, r, text)
            assert all(whole(text, n) for n in NUM.findall(r[0])), (w, r, text)
