"""`mlperf lr-find`: which benchmarks have it, in `--help` and in the one line that refuses
another (issue 47: the README listed it for all; it ran for gpt3 alone)."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO

from harness.run import lr_find


def _mlperf(*args):
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "lr-find", *args], cwd=REPO, capture_output=True, text=True
    )


def test_help_lists_the_benchmarks_and_another_is_refused_in_one_line(tmp_path):
    have = lr_find.supported()
    assert "llama2_70b_lora" in have and "gpt3" in have and "gnn" not in have
    r = _mlperf("--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())  # click wraps the epilog
    assert f"Benchmarks with an LR range test: {', '.join(have)}." in text
    # (a tmp tree and data folder: a refusal that came too late writes nothing into the checkout)
    r = _mlperf(
        "gnn", "--system", "cpu-local", "--results-dir", str(tmp_path), "--data-dir", str(tmp_path / "d")
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == f"error: gnn has no LR range test; `mlperf lr-find` runs {', '.join(have)}"
