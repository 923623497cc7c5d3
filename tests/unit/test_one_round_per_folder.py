"""One submission folder holds one round's runs at one size. Our logs name their ruleset and size
(`harness_ruleset`, `harness_size`); a run under another ruleset, or of another size, than the
folder's logs is refused before anything is written, and a folder that mixes them anyway is an
error of `mlperf check` and a warning of `results score`.
The defect these catch: `mlperf run --ruleset 5.0.0` appending result_2.txt to a folder of 6.1.0
runs, then the package checker judging all of them under the first log's ruleset, silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "tests" / "data" / "tiny_tree" / "MyOrg"


def _tree(tmp_path: Path, rulesets: list[str | None]) -> Path:
    """A copy of the tiny tree whose gpt3 result_<i>.txt names rulesets[i] (None: names none, as
    logs written before runs named their ruleset)."""
    root = tmp_path / "tree"
    shutil.copytree(TREE, root / "MyOrg")
    folder = root / "MyOrg" / "results" / "cpu-local" / "gpt3"
    for i, rs in enumerate(rulesets):
        if rs is None:
            continue
        log = folder / f"result_{i}.txt"
        lines = log.read_text().splitlines(keepends=True)
        rec = {"namespace": "", "time_ms": 0, "event_type": "POINT_IN_TIME", "key": "harness_ruleset"}
        lines.insert(3, ":::MLLOG " + json.dumps({**rec, "value": rs, "metadata": {}}) + "\n")
        log.write_text("".join(lines))
    return root


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_run_under_another_ruleset_than_the_folders_logs_is_refused_and_writes_nothing(tmp_path, mlperf):
    root = _tree(tmp_path, ["4.1.0", "4.1.0", None])
    before = _listing(root)
    p = mlperf("run", "gpt3", "--ruleset", "4.0.0", "--runs", "1", "--results-dir", str(root))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"error: {root}/MyOrg/results/cpu-local/gpt3 holds runs made under ruleset 4.1.0 (result_0.txt, "
        "result_1.txt), this run's is 4.0.0: one submission folder is one round's runs at one size; pass "
        "--ruleset 4.1.0, or --results-dir with another tree"
    ]
    assert _listing(root) == before  # no plan, no run folder, no system JSON rewritten


def test_check_and_score_name_a_folder_that_mixes_rulesets(tmp_path, mlperf):
    mixed = "its logs ran under 2 rulesets (4.1.0: result_0.txt, result_2.txt; 4.0.0: result_1.txt)"
    root = _tree(tmp_path, ["4.1.0", "4.0.0", "4.1.0"])
    before = _listing(root)
    p = mlperf("check", str(root))
    assert p.returncode != 0 and mixed in " ".join((p.stdout + p.stderr).split()), p.stdout + p.stderr
    s = mlperf("results", "score", str(root / "MyOrg"))
    assert (
        f"{mixed}; one submission folder holds one round's runs at one size: all scored under 4.1.0"
        in s.stderr
    )
    assert _listing(root) == before  # a tree you only read stays untouched
    # one ruleset (and logs that name none) is not a mixed folder
    same = _tree(tmp_path / "same", ["4.1.0", None, "4.1.0"])
    p = mlperf("check", str(same))
    assert "rulesets (" not in p.stdout + p.stderr


def test_a_tiny_run_into_a_folder_of_full_size_runs_is_refused_and_check_names_the_sizes(tmp_path, mlperf):
    """A tiny smoke run on the submission system must not land beside its full-size results."""
    root = _tree(tmp_path, ["4.1.0", "4.1.0", "4.1.0"])
    log = root / "MyOrg" / "results" / "cpu-local" / "gpt3" / "result_1.txt"
    text = log.read_text()
    assert text.count('"key": "harness_size", "value": "tiny"') == 1
    log.write_text(
        text.replace('"key": "harness_size", "value": "tiny"', '"key": "harness_size", "value": "full"')
    )
    before = _listing(root)
    p = mlperf("run", "gpt3", "--ruleset", "4.1.0", "--runs", "1", "--results-dir", str(root))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"error: {root}/MyOrg/results/cpu-local/gpt3 holds runs made at size full (result_1.txt), this run's "
        "is tiny: one submission folder is one round's runs at one size; pass --results-dir with another "
        "tree"
    ]
    p = mlperf("check", str(root))
    assert (
        "its logs ran under 2 sizes (tiny: result_0.txt, result_2.txt; full: result_1.txt)"
        in " ".join((p.stdout + p.stderr).split())  # the text wraps findings at the console's width
    )
    assert p.returncode != 0
    assert _listing(root) == before
