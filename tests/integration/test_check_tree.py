"""`mlperf check` on submission trees: package, system-description, seed and RCP checkers."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import fixture_path

from harness.review.check import check_path

REPO = Path(__file__).resolve().parents[2]
V40, LOGS = fixture_path("mlperf_v4.0"), fixture_path("logs")

SYSTEM = {
    k: ""
    for k in (
        "submitter division status system_name number_of_nodes host_processors_per_node host_processor_model_name "
        "host_processor_core_count host_processor_vcpu_count host_processor_frequency host_processor_caches "
        "host_processor_interconnect host_memory_capacity host_storage_type host_storage_capacity host_networking "
        "host_networking_topology host_memory_configuration accelerators_per_node accelerator_model_name "
        "accelerator_host_interconnect accelerator_frequency accelerator_on-chip_memories "
        "accelerator_memory_configuration accelerator_memory_capacity accelerator_interconnect "
        "accelerator_interconnect_topology cooling hw_notes framework other_software_stack operating_system sw_notes"
    ).split()
}


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def nvidia():
    before = _digest(V40)
    rep = check_path(V40)
    assert _digest(V40) == before, "the check must not touch the tree (scaling.json!)"
    return rep


def test_nvidia_logs_pass_and_only_the_system_status_fails(nvidia):
    assert nvidia.kind == "tree" and len(nvidia.logs) == 43
    assert all(r.passed for r in nvidia.logs)
    errors = [f for f in nvidia.all_findings() if f.severity == "error"]
    assert len(errors) == 4 and all(f.tool == "system-desc" and "onprem" in f.message for f in errors)
    assert nvidia.exit_code == 4


def test_nvidia_rcp_verdicts_and_scaling(nvidia):
    pkg = {t["target"]: t for t in nvidia.tools if t["tool"] == "package checker"}
    rcp = {k.split("/")[-2] + "/" + k.split("/")[-1]: v["rcp"] for k, v in pkg.items()}
    assert rcp == {
        "eos_n64_ngc24.04_nemo/gpt3": "RCP Interpolation",
        "eos_n8_ngc24.04_nemo/llama2_70b_lora": "RCP found",
        "h200_ngc24.04_dgl/gnn": "RCP Interpolation",
        "h200_ngc24.04_nemo/llama2_70b_lora": "RCP found",
        "h200_ngc24.04_nemo/stable_diffusion": "RCP found",
    }
    assert all(t["passed"] for t in pkg.values())
    n8 = next(v for k, v in pkg.items() if "eos_n8" in k)
    assert n8["scaling_factor"] == pytest.approx(1.0033670033670032)
    assert not any(f.tool == "rcp" for f in nvidia.findings)  # committed scaling.json agrees
    assert sum("logs more than one seeds" in f.message for f in nvidia.findings) == 10


def _org(tmp: Path, logs: dict[str, list[Path]], division="open", systems=("sysA",)) -> Path:
    org = tmp / "Org"
    for bench_dir, files in logs.items():
        d = org / "results" / bench_dir
        d.mkdir(parents=True)
        for i, f in enumerate(files):
            shutil.copyfile(f, d / f"result_{i}.txt")
    (org / "systems").mkdir(parents=True, exist_ok=True)
    for s in systems:
        desc = {
            **SYSTEM,
            "submitter": "Org",
            "division": division,
            "status": "Available on-premise",
            "system_name": s,
            "number_of_nodes": "1",
            "accelerators_per_node": "1",
        }
        (org / "systems" / f"{s}.json").write_text(json.dumps(desc))
    return org


def test_open_tree_passes(tmp_path):
    org = _org(tmp_path, {"sysA/gnn": [LOGS / "open_gnn_tiny.txt"] * 10})
    rep = check_path(org)
    assert rep.passed, [f.one_line() for f in rep.all_findings()]
    assert rep.exit_code == 0 and len(rep.logs) == 10


def test_tree_problems_are_reported_not_crashed(tmp_path):
    org = _org(
        tmp_path,
        {
            "sysA/gnn": [LOGS / "open_gnn_tiny.txt"] * 9,  # one short
            "sysB/gnn": [LOGS / "broken_gnn_line_without_metadata.txt"],  # no systems/sysB.json
        },
    )
    rep = check_path(org)
    lines = [f.one_line() for f in rep.all_findings()]
    assert any("9 result files, gnn needs 10" in x and "missing: result_9.txt" in x for x in lines), lines
    assert any("missing systems/sysB.json" in x and "mlperf systems export" in x for x in lines)
    assert any("KeyError: 'metadata'" in x for x in lines)
    assert rep.exit_code == 4 and len(rep.logs) == 10


def test_closed_tree_seed_and_count_findings(tmp_path):
    org = _org(tmp_path, {"sysA/gpt3": [LOGS / "closed_gpt3_minimal.txt"] * 3}, division="closed")
    rep = check_path(org)
    lines = [f.one_line() for f in rep.all_findings()]
    assert any("[seed]" in x and "logs no seed" in x for x in lines), lines
    assert rep.exit_code == 4


def test_bad_input_corpus_cli(tmp_path):
    org = _org(tmp_path, {"sysA/gnn": [LOGS / "open_gnn_tiny.txt"] * 3})
    d = org / "results" / "sysA" / "gnn"
    (d / "result_3.txt").write_bytes(b"")
    (d / "result_4.txt").write_bytes(os.urandom(2048))
    (d / "result_5.txt").write_bytes((LOGS / "open_gnn_tiny.txt").read_bytes()[:-200])  # truncated
    (d / "result_6.txt").write_bytes(b":::MLLOG {" + b"y" * 10_000_000 + b"}\n")
    (d / "result_7.txt").write_bytes(
        (LOGS / "open_gnn_tiny.txt").read_bytes().replace(b"ExampleOrg", b"Org\xe9\xff")
    )
    os.symlink("result_9.txt", d / "result_8.txt")
    os.symlink("result_8.txt", d / "result_9.txt")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(org), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in p.stderr and p.returncode == 4, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    by_file = {Path(r["path"]).name: r for r in doc["logs"]}
    assert len(by_file) == 10
    assert by_file["result_0.txt"]["passed"] and by_file["result_7.txt"]["passed"]
    for name in (
        "result_3.txt",
        "result_4.txt",
        "result_5.txt",
        "result_6.txt",
        "result_8.txt",
        "result_9.txt",
    ):
        assert not by_file[name]["passed"] and by_file[name]["findings"], name
    msgs = json.dumps(doc)
    assert "Too many levels of symbolic links" in msgs and "quadratic" in msgs


TINY_TREE = REPO / "tests" / "data" / "tiny_tree"


def test_tree_from_our_tiny_runs_passes_and_scores(tmp_path):
    org = tmp_path / "MyOrg"
    shutil.copytree(TINY_TREE / "MyOrg", org)
    rep = check_path(org)
    assert rep.passed, [f.one_line() for f in rep.all_findings()]
    assert rep.exit_code == 0 and len(rep.logs) == 3
    assert all(r.tiny and r.rules.endswith("tiny_common.yaml") for r in rep.logs)
    (pkg,) = [t for t in rep.tools if t["tool"] == "package checker"]
    assert pkg["passed"] and pkg["division"] == "open" and pkg["rcp"] is None  # open: no seed/RCP checks
    from harness.review.results.score import score_tree

    (row,) = score_tree(org)
    assert row["runs"] == 3 and row["tiny"] and row["division"] == "open"
    assert row["score_min"] == sorted(row["run_minutes"])[1]


def test_closed_rcp_failure_reports_the_numbers(tmp_path):
    fast = tmp_path / "fast.txt"
    fast.write_text((LOGS / "closed_gnn.txt").read_text().replace('"epoch_num": 0.8}', '"epoch_num": 0.7}'))
    org = _org(tmp_path, {"sysA/gnn": [fast] * 10}, division="closed")
    rep = check_path(org)
    (rcp,) = [f for f in rep.findings if f.tool == "rcp"]
    assert (
        "RCP found" in rcp.message
        and "submission mean 0.7000" in rcp.message
        and "lowest accepted" in rcp.message
    )
    seeds = [f for f in rep.findings if f.tool == "seed"]
    assert len(seeds) == 9 and all(f.file.endswith(".txt") for f in seeds)  # same seed on the same line
    assert rep.exit_code == 4


def test_a_result_that_is_a_directory_and_impossible_counts_are_findings(tmp_path):
    """Both passed before: the package checker globs result_*.txt and silently dropped the
    directory ("all checks passed: 2 logs"), and the official system-description checker takes
    any string for a count."""
    org = tmp_path / "MyOrg"
    shutil.copytree(TINY_TREE / "MyOrg", org)
    result = org / "results" / "cpu-local" / "gpt3" / "result_2.txt"
    result.unlink()
    result.mkdir()
    desc_path = org / "systems" / "cpu-local.json"
    desc = json.loads(desc_path.read_text())
    desc_path.write_text(json.dumps({**desc, "number_of_nodes": "-4", "accelerators_per_node": "0"}))
    rep = check_path(org)
    lines = [f.one_line() for f in rep.all_findings() if f.severity == "error"]
    assert any(
        x.startswith("results/cpu-local/gpt3/result_2.txt: error:") and "not a file" in x for x in lines
    )
    assert any("2 result files, gpt3 needs 3" in x for x in lines), lines  # the package checker now sees it
    for key, value in (("number_of_nodes", "-4"), ("accelerators_per_node", "0")):
        assert any(x.startswith("systems/cpu-local.json") and f'"{key}" is "{value}"' in x for x in lines)
    assert rep.exit_code == 4


def test_a_dangling_scaling_json_link_is_not_written_through(tmp_path):
    """The RCP step writes scaling.json; the mirror linked it, so a dangling link's target was
    created by a command that only reads (here beside the org folder)."""
    src = V40 / "NVIDIA"
    org = tmp_path / "NVIDIA"
    system = "eos_n8_ngc24.04_nemo"
    shutil.copytree(src / "results" / system, org / "results" / system)
    (org / "systems").mkdir()
    shutil.copyfile(src / "systems" / f"{system}.json", org / "systems" / f"{system}.json")
    scaling = org / "results" / system / "llama2_70b_lora" / "scaling.json"
    scaling.unlink()
    scaling.symlink_to("../../../../made_by_check.json")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    rep = check_path(org)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing made, inside or beside
    assert scaling.is_symlink() and not scaling.exists()
    lines = [f.one_line() for f in rep.all_findings()]
    assert any("scaling.json is a link or not a file" in x for x in lines), lines
