"""`results score` on published v4.1-v5.1 folders, against the official result summarizer.

- every published folder of rounds/ in tests/data/fixtures.tar.xz (11 folders, 9 benchmarks,
  rulesets 4.1.0-5.1.0, power logs) scores as expected_scores.csv (the official tool's figures);
- the official summarizer, run here on small copies (3 runs a folder: it takes ~1 s a log) of
  ssd, retinanet, dlrm_dcnv2, llama31_8b, rgat and llama2_70b_lora (one with power logs, one
  with the published log whose corrupted line fails the compliance check), gives the same time
  and energy scores as ours;
- scoring with --rcp twice gives the same rows and leaves the tree as it was (the official tool
  rewrites scaling.json in its copy);
- bad input in a round is one warning per problem naming the folder, no traceback, the rest scored.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import fixture_path
from review_data import REPO, digest, expected, key, small_copy

from harness.review.results.score import score_tree

SMALL = [
    ("v4.1", "ASUSTeK", "ESC_N8_E11", "ssd", None),
    (
        "v4.1",
        "Lambda",
        "lambda_1cc_n4_H100-SXM-80GB_ngc24.04_nemo",
        "llama2_70b_lora",
        [f"result_240928173116824495865_{i}.txt" for i in (1, 2, 3)],  # _1 has the corrupted line
    ),
    ("v5.0", "ASUSTeK", "ESC_N8_E11", "retinanet", None),
    ("v5.0", "Lenovo", "SR780aV3-8xB200_SXM_180GB", "llama2_70b_lora", None),  # power/ logs
    ("v5.1", "AMD", "MI355X_EPYC_9575F_pytorch", "llama31_8b", None),
    ("v5.1", "Dell", "1xXE9680x8H200-SXM-141GB", "rgat", None),
    ("v5.1", "University-of-Florida", "hpg.dgxb200x8.n1", "dlrm_dcnv2", None),
]


@pytest.fixture(scope="module")
def rounds():
    return fixture_path("rounds")


def test_every_published_folder_scores_as_the_official_tool(rounds):
    exp = expected(rounds)
    before = digest(rounds)
    for check in (True, False):
        rows = score_tree(rounds, with_runs=False, check=check)
        assert sorted(key(r) for r in rows) == sorted(exp)
        for r in rows:
            e = exp[key(r)]
            assert r["ruleset"] == e["ruleset"] and r["ruleset_source"] == f"round folder '{e['round']}'"
            assert abs(r["score_min"] - float(e["score_min"])) <= 1e-6, (
                key(r),
                r["score_min"],
                e["score_min"],
            )
            assert r["scaling_factor"] == pytest.approx(float(e["rcp_scaling_factor"]), rel=1e-12)
            assert r["accelerators"] == int(e["accelerators_count"]) and r["checked"] is check
            if e["energy_j"]:
                assert r["energy_j"] == pytest.approx(float(e["energy_j"]), rel=1e-12)
            else:
                assert r["energy_j"] is None
        (lam,) = [r for r in rows if r["submitter"] == "Lambda"]
        assert lam["run_minutes"].count(None) == 1
        bad = [p for p in lam["problems"] if "result_240928173116824495865_1.txt" in p]
        assert len(bad) == 1 and ("fails the 4.1.0 compliance check" in bad[0] or not check)
    assert digest(rounds) == before


@pytest.fixture(scope="module")
def small(rounds, tmp_path_factory):
    base = tmp_path_factory.mktemp("small")
    for rnd, org, system, bench, files in SMALL:
        small_copy(rounds / rnd / org / "results" / system / bench, base / "ours" / rnd, files=files)
    shutil.copytree(base / "ours", base / "official")
    return base


@pytest.fixture(scope="module")
def official(small):
    """{(round, org, benchmark): (time, energy)} from the official summarizer, in-process."""
    import pandas as pd
    from mlperf_logging.result_summarizer import result_summarizer as rs

    out = {}
    for org in sorted((small / "official").glob("v*/*")):
        rnd = org.parent.name
        with contextlib.redirect_stdout(io.StringIO()):
            detailed = rs.summarize_results(str(org), "training", rnd[1:] + ".0")[2]
        for _, row in detailed.iterrows():
            for col in detailed.columns:
                if col.endswith(":time_to_train") and pd.notna(row[col]):
                    bench = col.split(":")[0]
                    energy = row[f"{bench}:Energy"]
                    out[(rnd, org.name, bench)] = (
                        float(row[col]),
                        None if pd.isna(energy) else float(energy),
                    )
    return out


def test_same_scores_and_energy_as_the_official_summarizer(small, official):
    rows = score_tree(small / "ours", with_runs=False)
    mine = {(k[0], k[1], k[3]): (r["score_min"], r["energy_j"]) for r in rows for k in [key(r)]}
    assert set(mine) == set(official) and len(official) == len(SMALL)
    assert len({r["ruleset"] for r in rows}) == 3
    assert {"ssd", "retinanet", "dlrm_dcnv2", "llama31_8b", "rgat"} <= {r["benchmark"] for r in rows}
    for k, (t, e) in official.items():
        assert abs(mine[k][0] - t) <= 1e-6, (k, mine[k], t)
        assert (e is None and mine[k][1] is None) or mine[k][1] == pytest.approx(e, rel=1e-12), (
            k,
            mine[k],
            e,
        )
    assert official[("v5.0", "Lenovo", "llama2_70b_lora")][1] is not None  # an energy folder compared
    (lam,) = [r for r in rows if r["submitter"] == "Lambda"]
    assert lam["run_minutes"][0] is None and None not in lam["run_minutes"][1:]  # the tool drops _1 too


def test_energy_arithmetic_is_the_summarizers(small):
    from mlperf_logging.compliance_checker.mlp_parser import parse_file
    from mlperf_logging.result_summarizer import result_summarizer as rs

    from harness.review.check.official import parse
    from harness.review.results.energy import node_energy, switch_energy

    nodes = sorted((small / "ours").rglob("node_*.txt"))
    assert len(nodes) == 3
    for f in nodes:
        assert node_energy(parse(str(f), "5.0.0")[0], 654321.0) == rs._compute_power_node(
            parse_file(str(f), "5.0.0")[0], 654321.0
        )
    sw = small / "sw_0.txt"
    recs = [(1, "conversion_eff", 0.9), (2, "interconnect_power_est", 1234.5), (3, "conversion_eff", 2)]
    sw.write_text(
        "".join(
            ":::MLLOG " + json.dumps({"time_ms": t, "key": k, "value": v, "metadata": {}}) + "\n"
            for t, k, v in recs
        )
    )
    lines = parse(str(sw), "5.0.0")[0]
    assert switch_energy(lines, 60000.0) == rs._compute_power_sw(parse_file(str(sw), "5.0.0")[0], 60000.0)


def test_scoring_with_rcp_twice_changes_nothing(small, official):
    tree = small / "ours"
    before = digest(tree)
    first = score_tree(tree, with_runs=False, rcp=True)
    second = score_tree(tree, with_runs=False, rcp=True)
    assert first == second and digest(tree) == before
    closed = [r for r in first if r["division"] == "closed"]
    assert len(closed) == len(SMALL) and all(r["rcp"] in ("pass", "fail") and r["rcp_factor"] for r in closed)
    (rgat,) = [r for r in first if r["benchmark"] == "rgat"]
    assert rgat["rcp_message"].startswith("RCP") and rgat["rcp_record"]["rcp_mean"] > 0
    assert digest(small / "official") != before  # the official tool rewrote scaling.json in its copy
    for r in closed:  # our recomputed factor is what the official tool left in its copy
        theirs = Path(r["path"].replace(str(tree), str(small / "official"))) / "scaling.json"
        factor = json.loads(theirs.read_text())["scaling_factor"] if theirs.exists() else 1.0
        assert r["rcp_factor"] == pytest.approx(factor, rel=1e-12), (r["path"], r["rcp_factor"], factor)


def _mlperf(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO, env=env
    )


def _fault(rounds, rnd, org, system, bench, dest, name):
    """A copy of a published folder as submitter `name` of round `rnd` under dest."""
    src = rounds / rnd / org / "results" / system / bench
    stage = dest.parent / f"stage-{name}"
    small_copy(src, stage, n=10)
    (dest / rnd).mkdir(parents=True, exist_ok=True)
    shutil.move(stage / org, dest / rnd / name)
    return dest / rnd / name / "results" / system / bench


def test_bad_input_is_one_line_per_problem_and_the_rest_is_scored(rounds, tmp_path):
    tree = tmp_path / "tree"
    uf = ("v5.1", "University-of-Florida", "hpg.dgxb200x8.n1", "dlrm_dcnv2")
    lenovo = ("v5.0", "Lenovo", "SR780aV3-8xB200_SXM_180GB", "llama2_70b_lora")
    _fault(rounds, *uf, tree, "University-of-Florida")  # a good folder
    d = _fault(rounds, *uf, tree, "Trunc")
    data = (d / "result_0.txt").read_bytes()
    (d / "result_0.txt").write_bytes(data[: len(data) // 2])
    d = _fault(rounds, *uf, tree, "Corrupt")
    text = (d / "result_1.txt").read_text()
    i = text.index('"key": "eval_start"')
    (d / "result_1.txt").write_text(text[:i] + text[i:].replace(', "value"', ' "value"', 1))  # a comma lost
    d = _fault(rounds, *uf, tree, "NoSystem")
    (d.parents[2] / "systems" / "hpg.dgxb200x8.n1.json").unlink()
    d = _fault(rounds, *uf, tree, "Unknown")
    d.rename(d.parent / "dlrm_v9")
    d = _fault(rounds, *uf, tree, "Foreign")  # a benchmark no ruleset has, folder and logs
    for f in d.glob("result_*.txt"):
        f.write_text(f.read_text().replace('"value": "dlrm_dcnv2"', '"value": "dlrm_v9"'))
    d.rename(d.parent / "dlrm_v9")
    d = _fault(rounds, *uf, tree, "Loop")
    (d / "result_9.txt").unlink()
    os.symlink("result_9.txt", d / "result_9.txt")
    os.symlink(".", d.parent / "again")  # a folder loop: not followed
    d = _fault(rounds, *lenovo, tree, "PowerEmpty")
    shutil.rmtree(d / "power" / "result_3")
    (d / "power" / "result_3").mkdir()
    d = _fault(rounds, *lenovo, tree, "PowerZero")
    node = d / "power" / "result_2" / "node_0.txt"
    recs = [json.loads(x.split(":::MLLOG ", 1)[1]) for x in node.read_text().splitlines()]
    start = next(r["time_ms"] for r in recs if r["key"] == "power_measurement_start")
    for r in recs:
        r["time_ms"] = start if r["key"] == "power_measurement_stop" else r["time_ms"]
    node.write_text("".join(f":::MLLOG {json.dumps(r)}\n" for r in recs))
    p = _mlperf("results", "score", str(tree), "--json", "--no-runs")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    rows = {r["submitter"]: r for r in json.loads(p.stdout)["results"]}
    warn = p.stderr.splitlines()
    causes = {
        "Trunc": "result_0.txt: not counted",
        "Corrupt": "result_1.txt: not counted (fails the 5.1.0 compliance check: unparsable MLLOG line",
        "NoSystem": "missing systems/hpg.dgxb200x8.n1.json",
        "Unknown": "folder name 'dlrm_v9' is not a benchmark; its logs say 'dlrm_dcnv2'",
        "Foreign": "unknown benchmark folder 'dlrm_v9' (no training ruleset of mlperf-logging has it)",
        "Loop": "result_9.txt: not counted (cannot read the file: Too many levels of symbolic links",
        "PowerEmpty": "power/result_3/ has no node_*.txt",
        "PowerZero": "zero-length measurement window",
    }
    exp = expected(rounds)
    good = float(exp[uf]["score_min"])
    for org, cause in causes.items():
        mine = [w for w in warn if w.startswith(f"warning: {org}/") and cause in w]
        assert len(mine) == 1, (org, [w for w in warn if org in w])
        assert rows[org]["score_min"] is not None  # one bad run of ten: still scored
    assert rows["University-of-Florida"]["score_min"] == pytest.approx(good, abs=1e-6)
    # the faulted folders are copies of the same runs: each names the one it copies, once
    twice = {w.split()[1].split("/")[0]: w for w in warn if "one result published twice" in w}
    copies = {o for o, w in twice.items() if " and University-of-Florida/" in w}
    assert copies == {"Trunc", "Corrupt", "NoSystem", "Unknown", "Loop"}, twice
    assert not [w for w in warn if "University-of-Florida" in w and w not in twice.values()]
    assert (
        rows["NoSystem"]["score_min"] == pytest.approx(good, abs=1e-6)
        and rows["NoSystem"]["accelerators"] is None
    )
    for org in ("PowerEmpty", "PowerZero"):
        assert rows[org]["energy_j"] is None
        assert rows[org]["score_min"] == pytest.approx(float(exp[lenovo]["score_min"]), abs=1e-6)
