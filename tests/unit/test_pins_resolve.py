"""How `mlperf run` resolves a benchmark's config (harness/resolve/config.py): --set parsing, which
config files apply, the planner's layout where no file is tuned, and the one-line refusals of bad
files and keys. Found unpinned by bench/mutation.py. A scratch copy of gpt3's folder stands in for
a benchmark with odd config files."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

import benchmarks
from harness.core.errors import ConfigError
from harness.resolve import config as R

GPT3 = benchmarks.get("gpt3")


def _resolve(bench=GPT3, size="tiny", system="cpu-local", sets=None, **kw):
    return R.resolve(bench, size, system, "open", sets or {}, **kw)


def _scratch(tmp_path: Path, **files: str):
    """gpt3 from a copy of its folder whose configs/ holds `files` (name -> text) instead."""
    folder = tmp_path / "gpt3"
    shutil.copytree(GPT3.folder, folder, ignore=shutil.ignore_patterns("configs", "__pycache__"))
    (folder / "configs").mkdir()
    for name, text in files.items():
        (folder / "configs" / name).write_text(text)
    return dataclasses.replace(GPT3, folder=folder)


def test_set_values_are_yaml_scalars_and_keep_their_equals_signs():
    got = R.parse_sets(["seed=7", "opt_name=adam=w", "x=", "tag=[unclosed", " lr = 0.5"])
    assert got == {"seed": 7, "opt_name": "adam=w", "x": "", "tag": "[unclosed", "lr": 0.5}
    with pytest.raises(ConfigError, match=r"^--set 'seed': expected key=value$"):
        R.parse_sets(["seed"])


def test_a_full_size_file_does_not_apply_to_a_tiny_run():
    cfg, prov, sources = _resolve(system="dgx-h100x64")  # configs/dgx-h100x64.yaml is full size
    assert sources == ["size:tiny (benchmarks/gpt3/configs/tiny.yaml)"]
    assert prov["global_batch_size"] == "size:tiny" and cfg.num_layers == 2


def test_an_untuned_system_gets_the_planners_layout_at_full_size():
    cfg, prov, sources = _resolve(
        size="full",
        system="nowhere",
        fallback=lambda sets: {"tensor_model_parallel_size": 8, "global_batch_size": 2048},
    )
    assert sources == ["planner (`mlperf plan gpt3 --system nowhere`)"]
    assert cfg.tensor_model_parallel_size == 8 and prov["tensor_model_parallel_size"] == "planner"
    _cfg, _prov, sources = _resolve(size="full", system="dgx-h100x64", fallback=lambda sets: {})
    assert sources == ["system:dgx-h100x64 (benchmarks/gpt3/configs/dgx-h100x64.yaml)"]  # tuned wins


def test_an_unknown_set_key_is_one_line():
    with pytest.raises(ConfigError) as e:
        _resolve(sets={"num_layer": 4})
    assert str(e.value).startswith("--set num_layer: unknown key for gpt3")
    assert str(e.value).endswith("see `mlperf run gpt3 --dry-run` for all keys")


@pytest.mark.parametrize(
    "text,message",
    [
        ("size: tiny\nconfg: {}\n", r"unknown top-level key 'confg'.*; settings go under 'config:'$"),
        ("size: tiny\nconfig: [1, 2]\n", r"'config' must be a mapping of key: value$"),
        ("size: tiny\nconfig:\n  num_layer: 4\n", r"^size:tiny: unknown key 'num_layer'"),
    ],
)
def test_a_bad_config_file_is_one_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _resolve(_scratch(tmp_path, **{"tiny.yaml": text}))


def test_a_benchmark_without_a_tiny_size(tmp_path):
    bench = _scratch(tmp_path)
    with pytest.raises(ConfigError) as e:
        _resolve(bench)
    # outside the repository the path is shown in full
    assert str(e.value) == f"{bench.configs_dir / 'tiny.yaml'}: cannot read (No such file or directory)"


def test_a_config_file_outside_the_repository_is_named_in_full(tmp_path):
    bench = _scratch(tmp_path, **{"tiny.yaml": (GPT3.configs_dir / "tiny.yaml").read_text()})
    _cfg, _prov, sources = _resolve(bench)
    assert sources == [f"size:tiny ({bench.configs_dir / 'tiny.yaml'})"]


# ---- which ruleset (harness/core/rulesets.py) -------------------------------------------------------
def test_the_ruleset_a_benchmark_alone_points_to_and_why():
    from harness.core import rulesets as rules

    # the newest ruleset listing it, as `mlperf run` takes it (for_run): run and check agree
    assert rules.resolve(benchmark="dlrmv4") == ("6.1.0", "default: the newest listing dlrmv4")
    assert rules.resolve(benchmark="rgat") == ("5.1.0", "default: the newest listing rgat")
    assert rules.resolve(benchmark="gpt3") == ("4.1.0", "default: the newest listing gpt3")
    for bench in ("gpt3", "llama2_70b_lora", "llama31_8b", "flux1"):
        assert rules.resolve(benchmark=bench)[0] == rules.for_run(bench)[0]
    # a ruleset before the benchmark existed: the first that has it, and the folder is told so
    rs, how, problem = rules.for_benchmark("llama31_405b", "4.0.0")
    assert rs == "5.0.0" and how == "--ruleset; llama31_405b is in 5.0.0"
    assert problem.startswith("llama31_405b is not a benchmark of ruleset 4.0.0 (--ruleset)")
    assert rules.round_ruleset(None) is None and rules.round_ruleset("") is None


def test_a_folder_of_our_logs_is_scored_under_the_ruleset_they_name(tmp_path):
    from harness.core import rulesets as rules

    for i in range(3):
        lines = (TINY_RESULTS / f"result_{i}.txt").read_text().splitlines(keepends=True)
        first = json.loads(lines[0].split(":::MLLOG ", 1)[1])
        named = ":::MLLOG " + json.dumps({**first, "key": "harness_ruleset", "value": "4.1.0"}) + "\n"
        (tmp_path / f"result_{i}.txt").write_text(named + "".join(lines))
    assert rules.for_folder("gpt3", str(tmp_path)) == ("4.1.0", "the logs' harness_ruleset", None)
    assert rules.for_folder("gpt3", str(tmp_path), ruleset="4.0.0")[:2] == ("4.0.0", "--ruleset")
    assert rules.for_folder("gpt3", str(tmp_path), round_name="v4.0")[:2] == ("4.0.0", "round v4.0")


def test_rulesets_refuse_what_the_package_does_not_list():
    from harness.core import rulesets as rules

    with pytest.raises(ConfigError, match=r"^mlperf-logging lists 'nosuch' in no training ruleset$"):
        rules.for_run("nosuch")
    assert rules.validate_benchmark("gpt3") == "gpt3"  # no ruleset asked: known is enough


TINY_RESULTS = (
    Path(__file__).resolve().parents[1] / "data" / "tiny_tree" / "MyOrg" / "results" / "cpu-local" / "gpt3"
)


# ---- the run plans (harness/resolve/runplans.py) -----------------------------------------------
def _runs(system="cpu-local", **kw):
    from harness.resolve.runplans import resolve_runs

    return resolve_runs(GPT3, system, results_dir=kw.pop("results_dir", "/tmp/unused"), **kw)


def test_runs_and_seeds_within_their_bounds():
    assert len(_runs(runs=100, seed=0).plans) == 100
    with pytest.raises(ConfigError, match=r"^--runs 101: give 1 to 100 runs \(the official count is 3\)$"):
        _runs(runs=101)
    top = 2**31 - 1  # seeds are signed 32-bit; run i uses seed + i
    assert [p.seed for p in _runs(runs=3, seed=top - 2).plans] == [top - 2, top - 1, top]
    with pytest.raises(ConfigError, match=rf"^--seed {top - 1}: give 0 to {top - 2} \(run i uses seed\+i"):
        _runs(runs=3, seed=top - 1)
    for _ in range(20):  # a drawn seed leaves room for every run
        seeds = [p.seed for p in _runs(runs=3).plans]
        assert seeds == [seeds[0], seeds[0] + 1, seeds[0] + 2] and 0 <= seeds[0] <= top - 2


def test_the_launcher_for_the_layout():
    assert _runs().launcher == "local"
    two = _runs(nproc_per_node=2, sets=("micro_batch_size=8",))
    assert two.launcher == "torchrun"  # two ranks on one host
    with pytest.raises(ConfigError, match=r"^--launcher mpi: unknown launcher"):
        _runs(launcher="mpi")
    with pytest.raises(
        ConfigError, match=r"has 2 nodes: torchrun alone launches one node; use --launcher slurm$"
    ):
        _runs("cpu-slurm-2n", launcher="torchrun")


def test_what_a_cpu_run_plan_says():
    res = _runs(sets=("micro_batch_size=8",))
    plan = res.plans[0]
    assert plan.size == "tiny" and plan.device == "cpu" and plan.power_min_readings == 0
    assert plan.disclosure["config_filename"] == "tiny.yaml"  # not the command line
    assert plan.disclosure["expert_parallelism"] == 1 and plan.logged_name is None
    power = _runs("cpu-local-power")
    assert power.plans[0].power_min_readings == 60
    assert not [n for n in power.notes if n.startswith("power:")]  # gpt3's loop trains on for its readings


def test_a_planner_proposal_is_named_in_the_disclosure():
    from harness.resolve.runplans import disclosure

    lay = _runs().plans[0].layout
    cfg = GPT3.typed(_runs().plans[0].config)
    sources = ["planner (`mlperf plan gpt3 --system dgx-h100x8`)", "--set (command line)"]
    assert disclosure(cfg, lay, "cpu", sources)["config_filename"] == "mlperf plan gpt3 --system dgx-h100x8"
    assert disclosure(cfg, lay, "cpu", ["--set (command line)"])["config_filename"] == "command line"
    assert disclosure(cfg, lay, "cpu", [])["config_filename"] == "defaults"


def test_a_benchmark_without_a_size_or_an_implementation_is_one_line():
    with pytest.raises(ConfigError, match=r"^gpt3 has no 'huge' size \(sizes: "):
        _runs(size="huge")
    with benchmarks.scratch():
        bench = benchmarks.register(dataclasses.replace(GPT3, name="noimpl", impl=None))
        from harness.resolve.runplans import resolve_runs

        with pytest.raises(
            ConfigError,
            match=r"^noimpl has no implementation here: the harness does not run it yet; `mlperf check`",
        ):
            resolve_runs(bench, "cpu-local", results_dir="/tmp/unused")
        with pytest.raises(ConfigError, match=r"^no tuned config for noimpl on dgx-h100x1 "):
            resolve_runs(bench, "dgx-h100x1", size="full", results_dir="/tmp/unused")


def test_a_loop_that_ends_at_run_stop_is_told_about_power_readings():
    from harness.resolve.runplans import resolve_runs

    sd = benchmarks.get("stable_diffusion")
    res = resolve_runs(sd, "cpu-local-power", results_dir="/tmp/unused")
    assert res.notes == [
        "power: stable_diffusion's loop ends at run_stop; a run shorter than 60 readings "
        "(12 s at interval_s 0.2) is claimed without energy"
    ]
    # and a CPU run discloses the precision the CPU runs: fp32, not the GPUs' TF32
    plain = resolve_runs(sd, "cpu-local", results_dir="/tmp/unused")
    assert plain.plans[0].disclosure["lowest_numerical_precision_in_linear"] == "fp32"


def test_an_untuned_system_runs_the_planners_proposal_and_says_so():
    from harness.resolve.runplans import resolve_runs

    asked = []

    def plan(bench, spec, gbs, ruleset):
        asked.append((bench.name, spec.name, gbs, ruleset))
        return {"global_batch_size": 2048, "tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 8}

    res = resolve_runs(GPT3, "dgx-h100x8", size="full", fallback=plan, results_dir="/tmp/unused")
    assert asked == [("gpt3", "dgx-h100x8", None, "4.1.0")]
    assert (
        res.notes[0]
        == "no tuned config for dgx-h100x8: using the best layout of `mlperf plan gpt3 --system dgx-h100x8`"
    )
    assert (
        res.plans[0].layout.tp == 8
        and res.plans[0].disclosure["config_filename"] == "mlperf plan gpt3 --system dgx-h100x8"
    )


# ---- no silent switches (harness/resolve/switches.py) ------------------------------------------
@pytest.mark.parametrize(
    "bench,sets,nproc,message",
    [
        (
            "stable_diffusion",
            ("fp8=true",),
            None,
            "fp8=true (--set): the stable_diffusion implementation has no such path (the UNet has no FP8 "
            "path; NVIDIA's v4.0 SD records trained it in fp16); --set fp8=false",
        ),
        (
            "gpt3",
            ("overlap_param_gather=true",),
            None,
            "overlap_param_gather=true (--set) acts only with distributed_optimizer=true; set it or "
            "--set overlap_param_gather=false",
        ),
        (
            "gpt3",
            ("sequence_parallel=true",),
            None,
            "sequence_parallel=true (--set) needs tensor_model_parallel_size >= 2, but the layout has TP 1; "
            "--set sequence_parallel=false",
        ),
        (
            "llama2_70b_lora",
            ("fsdp=false", "micro_batch_size=4"),
            2,
            "fsdp=false (--set) cannot run with ranks 2 (at most 1: FSDP is the only gradient sync; without "
            "it each rank would train its own copy); leave fsdp on or use ranks 1",
        ),
    ],
)
def test_a_switch_the_implementation_would_ignore_is_refused_in_one_line(bench, sets, nproc, message):
    from harness.resolve.runplans import resolve_runs

    with pytest.raises(ConfigError) as e:
        resolve_runs(
            benchmarks.get(bench), "cpu-local", sets=sets, nproc_per_node=nproc, results_dir="/tmp/unused"
        )
    assert str(e.value) == message
    if bench == "llama2_70b_lora":  # off on one rank is fine: nothing to sync
        resolve_runs(benchmarks.get(bench), "cpu-local", sets=sets, results_dir="/tmp/unused")


# ---- the layout (harness/core/layout.py) ----------------------------------------------------------
def _derive(nodes=1, per_node=8, layers=None, **degrees):
    from types import SimpleNamespace

    from harness.core.layout import derive

    cfg = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}
    cfg |= {"virtual_pipeline_model_parallel_size": 1, "context_parallel_size": 1}
    cfg |= {"global_batch_size": 64, "micro_batch_size": 1} | degrees
    return derive(
        SimpleNamespace(**cfg), nodes, per_node, num_layers=layers, supports=("tp", "pp", "vp", "cp")
    )


def test_a_layout_describes_itself():
    lay = _derive(
        nodes=2,
        layers=8,
        tensor_model_parallel_size=2,
        pipeline_model_parallel_size=2,
        virtual_pipeline_model_parallel_size=2,
        micro_batch_size=2,
    )
    assert lay.describe() == (
        "2 node(s) x 8 = 16 ranks: TP 2 x PP 2 (VP 2) x CP 1 x DP 4; GBS 64 = DP 4 x MBS 2 x GA 8"
    )


@pytest.mark.parametrize(
    "kw,message",
    [
        (
            {"layers": 6, "pipeline_model_parallel_size": 2, "virtual_pipeline_model_parallel_size": 2},
            "layout: 6 layers do not split into PP 2 x VP 2 = 4 equal chunks",
        ),
        (
            {"global_batch_size": 16, "micro_batch_size": 16},
            "layout: global_batch_size 16 is not a multiple of DP 8 x micro_batch_size 16 = 128; pick GBS as a "
            "multiple of 128",
        ),
        (
            {
                "global_batch_size": 12,
                "pipeline_model_parallel_size": 2,
                "virtual_pipeline_model_parallel_size": 2,
            },
            "layout: interleaved pipeline needs microbatches per step (3) divisible by PP 2",
        ),
    ],
)
def test_a_layout_that_cannot_run_is_one_line(kw, message):
    with pytest.raises(ConfigError) as e:
        _derive(**kw)
    assert str(e.value) == message
