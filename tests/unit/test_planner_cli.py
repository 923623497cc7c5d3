"""`mlperf plan`: layouts and predictions for shipped systems and official JSONs, one-line exit-2
errors for bad input, `best_config` for the runner, and no torch anywhere on the path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fixtures import fixture_path

import benchmarks
from harness import planner
from harness.commands.plan import plan as plan_cmd
from harness.core.errors import ConfigError
from harness.planner import calibration as C
from harness.resolve import systems

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_SYSTEMS = fixture_path("mlperf_v4.0/NVIDIA/systems")


def run(*args):
    res = CliRunner().invoke(plan_cmd, list(args), standalone_mode=False, catch_exceptions=True)
    return res


def run_json(*args) -> dict:
    res = run(*args, "--json")
    assert res.exception is None, res.exception
    return json.loads(res.output)


@pytest.mark.parametrize("system", ["dgx-h100x64", "dgx-h100x1452", "gb200-nvl72"])
def test_gpt3_plans_with_memory_and_breakdown(system):
    doc = run_json("gpt3", "--system", system)
    assert doc["predicted_min"] > 0
    best = doc["best"]
    assert best["memory_total_gib"] <= doc["hardware"]["memory_gib"]
    assert set(best["step_breakdown_s"]) >= {"compute", "tp", "pp_bubble", "dp_exposed", "eval"}
    assert best["overrides"]["opt_base_learning_rate"] in (2e-5, 3e-5)
    assert len(doc["options"]) == 5
    assert doc["parameters_total"] == pytest.approx(175e9, rel=0.005)
    assert {"weights", "gradients", "optimizer", "activations"} <= set(best["memory_gib"])
    assert best["memory_total_gib"] == pytest.approx(sum(best["memory_gib"].values()), abs=0.05)
    assert doc["stack"]["name"] == "mlperf-harness"  # a shipped system runs this harness
    held = doc["accuracy"]["held_out"]["leave_one_system_out"]
    assert held["overall"]["rows"] == 172 and held["gpt3"]["median_ape"] > 0


def test_table_output_lists_layouts():
    res = run("gpt3", "--system", "dgx-h100x1452", "--top", "3")
    assert res.exception is None
    assert "predicted" in res.output and "TP" in res.output and "config overrides:" in res.output


@pytest.mark.parametrize(
    "name,bench",
    [
        ("eos_n64_ngc24.04_nemo", "gpt3"),
        ("eos_n8_ngc24.04_nemo", "llama2_70b_lora"),
        ("h200_ngc24.04_nemo", "stable_diffusion"),
        ("h200_ngc24.04_dgl", "gnn"),
    ],
)
def test_system_json_from_a_results_repository(name, bench):
    doc = run_json(bench, "--system-json", str(FIXTURE_SYSTEMS / f"{name}.json"))
    assert doc["hardware"]["world"] == {"eos_n64_ngc24.04_nemo": 512, "eos_n8_ngc24.04_nemo": 64}.get(name, 8)
    assert doc["predicted_min"] > 0


def test_gb200_is_faster_than_as_many_h100s():
    gb = run_json("gpt3", "--system", "gb200-nvl72")
    spec = systems.load("dgx-h100x8").with_overrides(nodes=9)  # 72 x H100
    h100 = planner.plan(benchmarks.get("gpt3"), spec).options[0].minutes
    assert 2.0 < h100 / gb["predicted_min"] < 6.0


def _one_line_error(res, pattern: str):
    assert isinstance(res.exception, ConfigError), res.exception
    assert res.exception.exit_code == 2
    msg = str(res.exception)
    assert "\n" not in msg and pattern in msg, msg
    return msg


def test_bad_gbs_exits_2():
    _one_line_error(run("gpt3", "--system", "dgx-h100x64", "--global-batch-size", "10000"), "Missing RCP")
    _one_line_error(
        run("stable_diffusion", "--system", "dgx-h100x8", "--global-batch-size", "1000"),
        "no stable_diffusion layout",
    )


@pytest.mark.parametrize(
    ("bench", "what", "most"),
    [
        (
            "llama2_70b_lora",
            "(data-parallel + CP)",
            "128), split by CP 8; at most 1024 accelerators (128 nodes",
        ),
        ("stable_diffusion", "(data-parallel only)", "2048); at most 2048 accelerators (256 nodes"),
    ],
)
def test_too_many_accelerators_names_the_cause_and_the_largest_size(bench, what, most):
    """11,616 GPUs: the refusal says what the implementation splits a sample over and the most
    accelerators any layout can use (not 'the rules forbid'); a wrong count or a missing CP fails."""
    msg = _one_line_error(
        run(bench, "--system", "dgx-h100x1452"), f"no {bench} layout on dgx-h100x1452 {what}"
    )
    assert "less than one sample of the largest global batch the RCPs cover (" + most in msg


def _json_file(tmp_path, **fields) -> str:
    d = {"number_of_nodes": "1", "accelerators_per_node": "8", **fields}
    f = tmp_path / "system.json"
    f.write_text(json.dumps(d))
    return str(f)


def test_intel_gaudi2_system_json_is_predicted(tmp_path):
    f = _json_file(
        tmp_path,
        accelerator_model_name="Intel(R) Gaudi(R) 2 AI Accelerator",
        accelerator_memory_capacity="96 GB",
        framework="PyTorch 2.2.0",
        other_software_stack="Intel Gaudi Software 1.16.98",
    )
    doc = run_json("llama2_70b_lora", "--system-json", f)
    assert doc["hardware"]["accelerator"] == "Intel Gaudi2" and doc["predicted_min"] > 0
    assert doc["stack"]["name"] == "gaudi" and doc["stack"]["version"] == "1.16"


def test_a_stack_without_fitted_constants_falls_back_and_says_so(tmp_path):
    f = _json_file(
        tmp_path,
        accelerator_model_name="NVIDIA H100-SXM5-80GB",
        framework="NVIDIA NeMo Framework Release 25.04",
    )
    doc = run_json("llama2_70b_lora", "--system-json", f)
    assert doc["stack"]["name"] == "nvidia-ngc" and doc["stack"]["version"] == "25.04"
    assert doc["stack"]["constants_from"] == "nvidia-ngc@24.09"  # the nearest fitted release
    assert any(
        "no fitted llama2_70b_lora constants for stack nvidia-ngc@25.04; using nvidia-ngc@24.09" in n
        for n in doc["notes"]
    )
    other = run_json("llama2_70b_lora", "--system-json", f, "--stack", "deepspeed")
    assert other["stack"]["name"] == "deepspeed" and other["predicted_min"] != doc["predicted_min"]


def test_batch_below_the_smallest_rcp_is_predicted_as_the_checker_accepts_it(tmp_path):
    """Fujitsu v4.0: stable_diffusion at GBS 256 on 4 H100 (the checker compares it with the
    smallest RCP and passes it)."""
    f = _json_file(tmp_path, accelerators_per_node="4", accelerator_model_name="NVIDIA H100-SXM5-80GB")
    doc = run_json("stable_diffusion", "--system-json", f, "--global-batch-size", "256", "--round", "v4.0")
    assert doc["ruleset"] == "4.0.0" and doc["best"]["layout"]["gbs"] == 256 and doc["predicted_min"] > 0
    assert doc["best"]["samples_to_converge"] >= 2_560_000


def test_accelerator_without_fp8_gets_no_fp8_gain(tmp_path):
    nemo = "NVIDIA NeMo Framework Release 24.04"
    a100 = run_json(
        "gpt3",
        "--system-json",
        _json_file(
            tmp_path, number_of_nodes="64", accelerator_model_name="NVIDIA A100-SXM4-80GB", framework=nemo
        ),
        "--explain",
    )
    assert a100["best"]["layout"]["fp8"] is False
    assert any("no FP8" in n for n in a100["notes"])
    rate = {t["term"]: t for t in a100["explain"]}["rate"]
    assert "bf16 peak 312 TFLOP/s" in rate["formula"] and "fp8_speedup" not in rate["formula"]
    (tmp_path / "h").mkdir()
    h100 = run_json(
        "gpt3",
        "--system-json",
        _json_file(
            tmp_path / "h",
            number_of_nodes="64",
            accelerator_model_name="NVIDIA H100-SXM5-80GB",
            framework=nemo,
        ),
        "--explain",
    )
    assert h100["best"]["layout"]["fp8"] is True
    h_rate = {t["term"]: t for t in h100["explain"]}["rate"]
    assert "fp8_speedup" in h_rate["formula"]
    k = C.constants()  # per peak FLOP the chips differ only by the fitted family factor and FP8
    expected = (312 * k["family"]["ampere"]) / (989.4 * k["fp8_speedup"])
    assert rate["value"] / h_rate["value"] == pytest.approx(expected, rel=1e-6)


def test_explain_shows_every_term_with_constants():
    doc = run_json("gpt3", "--system", "dgx-h100x64", "--stack", "nvidia-ngc@24.04", "--explain")
    terms = {t["term"]: t for t in doc["explain"]}
    assert {"rate", "compute", "tp", "pp_bubble", "dp_exposed", "overhead", "predicted minutes"} <= set(terms)
    assert "mfu[gpt3]" in terms["rate"]["formula"] and "fp8_speedup" in terms["rate"]["formula"]
    assert terms["predicted minutes"]["value"] == pytest.approx(doc["predicted_min"])
    assert terms["compute"]["value"] == pytest.approx(doc["best"]["step_breakdown_s"]["compute"], rel=1e-3)
    assert doc["stack"]["name"] == "nvidia-ngc" and doc["stack"]["constants_from"] == "nvidia-ngc@24.04"
    res = run("gpt3", "--system", "dgx-h100x64", "--explain", "--top", "1")
    assert res.exception is None and "predicted minutes =" in res.output


def test_tiny_run_on_cpu_is_priced_as_mlperf_run_resolves_it():
    doc = run_json("gpt3", "--system", "cpu-local", "--size", "tiny")
    assert doc["mode"] == "run" and doc["size"] == "tiny" and doc["predicted_min"] > 0
    assert doc["parameters_total"] == 120_576
    two = run_json(
        "gpt3", "--system", "cpu-local", "--nproc-per-node", "2", "--set", "tensor_model_parallel_size=2"
    )
    assert (two["best"]["layout"]["tp"], two["hardware"]["world"]) == (2, 2)
    assert two["best"]["step_breakdown_s"]["tp"] > 0
    _one_line_error(run("gpt3", "--system", "cpu-local", "--set", "no_such_key=1"), "no_such_key")


def test_unknown_accelerator_in_system_json_exits_2(tmp_path):
    f = tmp_path / "sys.json"
    f.write_text(
        json.dumps(
            {
                "number_of_nodes": "2",
                "accelerators_per_node": "8",
                "accelerator_model_name": "Acme TensorBlaster 9000",
            }
        )
    )
    res = run("gpt3", "--system-json", str(f))
    _one_line_error(res, "unknown accelerator 'Acme TensorBlaster 9000'")
    assert str(f) in str(res.exception)


def test_too_little_memory_exits_2(tmp_path):
    f = tmp_path / "sys.json"
    f.write_text(
        json.dumps(
            {
                "number_of_nodes": "64",
                "accelerators_per_node": "8",
                "accelerator_model_name": "NVIDIA H100-SXM5-80GB",
                "accelerator_memory_capacity": "4096 MiB",
            }
        )
    )
    _one_line_error(run("gpt3", "--system-json", str(f)), "no gpt3 layout fits")
    # 8 GPUs: llama2 is data parallel only (no CP), and 512 would need a GBS beyond the RCPs.
    small = yaml.safe_load((systems.SYSTEMS_DIR / "dgx-h100x8.yaml").read_text())
    small["accelerator"]["memory_gib"] = 4
    y = tmp_path / "small.yaml"
    y.write_text(yaml.safe_dump(small))
    _one_line_error(run("llama2_70b_lora", "--system", str(y)), "no llama2_70b_lora layout fits")


def test_needs_exactly_one_system():
    _one_line_error(run("gpt3"), "exactly one of --system")
    _one_line_error(run("gpt3", "somewhere", "--system", "cpu-local"), "go with --calibrate")


def test_best_config_for_the_runner():
    from benchmarks.gpt3.config import Gpt3Config

    over = planner.best_config(benchmarks.get("gpt3"), systems.load("dgx-h100x64"))
    assert set(over) >= {
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size",
        "context_parallel_size",
        "micro_batch_size",
        "global_batch_size",
        "opt_base_learning_rate",
        "distributed_optimizer",
    }
    Gpt3Config(**over)  # the overrides are a valid config
    sd = planner.best_config(benchmarks.get("stable_diffusion"), "dgx-h100x8")
    assert (
        set(sd) == {"global_batch_size", "micro_batch_size"}
        and sd["global_batch_size"] == 64 * sd["micro_batch_size"]
    )


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "sd.png"
    res = run("stable_diffusion", "--system", "dgx-h100x8", "--plot", str(out))
    assert res.exception is None, res.exception
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "args",
    [
        ["gpt3", "--system", "dgx-h100x64"],
        ["gpt3", "--system", "cpu-local", "--nproc-per-node", "2", "--set", "tensor_model_parallel_size=2"],
    ],
    ids=["search", "run"],
)
def test_plan_never_imports_torch_and_is_fast(args):
    code = (
        "import sys, time, json; from harness.cli import cli; "
        f"cli.main(args=['plan', *{args!r}, '--json'], standalone_mode=False); "
        "print(json.dumps({'torch': 'torch' in sys.modules, 'scipy': 'scipy' in sys.modules, "
        "'cpu_s': time.process_time()}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    info = json.loads(out.strip().splitlines()[-1])
    assert info["torch"] is False and info["scipy"] is False
    assert info["cpu_s"] < 1.5, info  # whole process incl. interpreter start; typically ~0.6 s


def test_best_config_respects_what_the_harness_implementation_runs():
    """llama2_70b_lora runs DP + CP with FSDP here (no TP/PP): best_config must not ask for TP."""
    from harness.core.layout import derive

    impl = planner.implementation(benchmarks.get("llama2_70b_lora"))
    over = planner.best_config(benchmarks.get("llama2_70b_lora"), "dgx-h100x8")
    for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size"):
        assert "tp" in impl["supports"] or over[key] == 1
    cfg = benchmarks.get("llama2_70b_lora").config(**over)
    derive(cfg, 8, 8, 8, cfg.num_layers, impl["supports"])


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("number_of_nodes", [8], "field 'number_of_nodes': must be a whole number"),
        ("accelerators_per_node", "9" * 400, "field 'accelerators_per_node': must be a whole number"),
        (
            "accelerators_per_node",
            "0",
            "field 'accelerators_per_node': Input should be greater than or equal to 1",
        ),
        ("accelerator_model_name", 5, "field 'accelerator_model_name': Input should be a valid string"),
    ],
)
def test_a_wrong_type_in_a_system_json_is_one_line(tmp_path, field, value, message):
    """A list, a number where a name belongs, 400 digits: TypeError / AttributeError exits before
    the typed reader (planner/hardware.py OfficialDescription)."""
    f = _json_file(tmp_path, **{"accelerator_model_name": "NVIDIA H100-SXM5-80GB", field: value})
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "plan", "gpt3", "--system-json", f],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {f}: ") and message in line, line
