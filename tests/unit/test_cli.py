import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_help_is_fast_and_imports_no_heavy_library():
    code = (
        "import sys, runpy; sys.argv=['mlperf','--help'];\n"
        "try: runpy.run_module('harness.cli', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy=[m for m in ('torch','pandas','megatron','mlperf_logging','transformers') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
    assert "Exit codes" in r.stdout


def test_version(mlperf):
    r = mlperf("--version")
    assert r.returncode == 0 and "0.1.0" in r.stdout


def test_benchmarks_list_json(mlperf):
    r = mlperf("benchmarks", "list", "--json")
    assert r.returncode == 0, r.stderr
    names = {b["name"]: b for b in json.loads(r.stdout)["benchmarks"]}
    assert names["gpt3"]["runs_per_result"] == 3
    assert names["gpt3"]["quality"][0]["full"] == 2.69


def test_systems_commands(mlperf, tmp_path):
    assert "dgx-h100x1452" in mlperf("systems", "list").stdout
    show = mlperf("systems", "show", "dgx-h200x1")
    assert show.returncode == 0 and "H200" in show.stdout
    out = tmp_path / "s.json"
    r = mlperf("systems", "export", "dgx-h100x64", "-o", str(out))
    assert r.returncode == 0 and json.loads(out.read_text())["number_of_nodes"] == "64"
    r = mlperf("systems", "validate", "systems/gb200-nvl72.yaml")
    assert r.returncode == 0 and "ok" in r.stdout


def test_gpt3_dry_run_dgx_h100x64_json(mlperf):
    r = mlperf("run", "gpt3", "--system", "dgx-h100x64", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    lay, cfg = doc["plan"]["layout"], doc["plan"]["config"]
    assert (lay["world_size"], lay["tp"], lay["pp"], lay["vp"], lay["dp"]) == (512, 4, 8, 4, 16)
    assert (lay["micro_batch_size"], lay["global_batch_size"], lay["grad_accum"]) == (2, 2304, 72)
    assert cfg["opt_base_learning_rate"] == 2e-5
    assert (cfg["opt_learning_rate_warmup_steps"], cfg["opt_learning_rate_decay_steps"]) == (177, 72400)
    assert doc["plan"]["size"] == "full" and len(doc["seeds"]) == 3


def test_dry_run_text_shows_provenance_and_launch(mlperf):
    r = mlperf("run", "gpt3", "--dry-run", "--seed", "7")
    assert r.returncode == 0, r.stderr
    assert "size:tiny" in r.stdout and "derived" in r.stdout and "reference_impls.gpt3" in r.stdout
    assert "seeds [7, 8, 9]" in r.stdout


BAD = [
    (["run", "gpt4"], "unknown benchmark 'gpt4'"),
    (["run", "gpt3", "--system", "dgx-h100x9"], "unknown system 'dgx-h100x9'"),
    (["run", "gpt3", "--set", "learning_rate=1", "--dry-run"], "unknown key"),
    (
        ["run", "gpt3", "--system", "dgx-h100x64", "--set", "opt_gradient_clip_norm=2.0", "--dry-run"],
        "is fixed at 1.0",
    ),
    (
        ["run", "gpt3", "--set", "tensor_model_parallel_size=2", "--dry-run"],
        "does not divide the world size 1",
    ),
    (["run", "gpt3", "--set", "fp8=true", "--dry-run"], "needs a GPU"),
    (  # without FSDP, llama2 has no gradient sync: two ranks would train two models
        ["run", "llama2_70b_lora", "--system", "dgx-h100x8", "--set", "fsdp=false", "--dry-run"],
        "fsdp=false (--set) cannot run with ranks 64",
    ),
    (["systems", "show", "nope"], "unknown system"),
    (  # a check across fields says what it needs, with no empty field name before it
        ["run", "gpt_oss_20b", "--nproc-per-node", "2", "--set", "tensor_model_parallel_size=2", "--dry-run"],
        "error: gpt_oss_20b config: a mixture of experts at tensor_model_parallel_size > 1 needs sequence_parallel=true",
    ),
    (["run", "gpt3", "--runs", "3000000000", "--dry-run"], "--runs 3000000000: give 1 to 100 runs"),
    (["run", "gpt3", "--runs", "0", "--dry-run"], "--runs 0: give 1 to 100 runs"),
    (["run", "gpt3", "--seed", str(2**66), "--dry-run"], f"--seed {2**66}: give 0 to 2147483645"),
    (["run", "gpt3", "--seed", "-1", "--runs", "1", "--dry-run"], "--seed -1: give 0 to 2147483647"),
    # --resume continues the saved plan: an option that would change it is refused, not ignored
    # (refused before RUN_DIR is read, so a missing folder still gets this line)
    (
        ["run", "gpt3", "--resume", "nowhere", "--set", "max_steps=5"],
        "error: --set cannot change a resumed run",
    ),
    (
        ["run", "gpt3", "--resume", "nowhere", "--seed", "3", "--nproc-per-node", "2"],
        "error: --seed, --nproc-per-node cannot change a resumed run",
    ),
]


# Non-finite and absurd numbers (issue 22): all passed --dry-run or ran before
BAD += [
    # (a closed key's refusal would come first: opt_base_learning_rate is one of two values at tiny size)
    (["run", "gpt3", "--set", "init_method_std=.nan", "--dry-run"], "Input should be a finite number"),
    (["run", "gpt3", "--set", "init_method_std=inf", "--dry-run"], "Input should be a finite number"),
    (["lr-find", "gpt3", "--max-lr", "inf"], "--max-lr inf: need finite 0 < min < max"),
    (["lr-find", "gpt3", "--min-lr", "nan"], "--min-lr nan / --max-lr 1.0: need finite 0 < min < max"),
    (["lr-find", "gpt3", "--steps", str(10**20)], "an LR range test takes 10 to 100,000 steps"),
]

# Numeric options checked at parse (issue 46): each of these exited 0 with a plan or a table
BAD += [
    (["plan", "gpt3", "--global-batch-size", "0"], "0 is not in the range 1<=x<=16777216"),
    (["plan", "gpt3", "--global-batch-size", str(10**12)], f"{10**12} is not in the range 1<=x<=16777216"),
    (["results", "compare", "-b", "gpt3", "--scale", "-5"], "-5 is not in the range x>=1"),
]

# click's own usage errors keep the contract too: one `error:` line (not click's Usage/Try/Error
# block), exit 2, with where the help is
BAD += [
    (["run", "gpt3", "--runs", "abc"], "error: Invalid value for '--runs': 'abc' is not a valid integer"),
    (["bogus"], "error: No such command 'bogus'. (see 'mlperf --help')"),
    (["run"], "error: Missing argument 'BENCHMARK'. (see 'mlperf run --help')"),
    (["results", "score", "--nope"], "error: No such option '--nope'"),
]


# Output paths are checked when the option is parsed: under a regular file every one of these
# crashed with exit 1 after (or during) the work. {F} is a regular file made by the test.
UNDER_A_FILE = [
    ["systems", "export", "dgx-h100x8", "-o", "{F}/x.json"],
    ["results", "score", "tests/data/tiny_tree/MyOrg", "--csv", "{F}/x.csv"],
    ["run", "gpt3", "--results-dir", "{F}/sub", "--runs", "1"],
    ["lr-find", "gpt3", "--out-dir", "{F}/sub"],
    ["results", "ingest", "tests/data/tiny_tree", "--round", "v4.0", "--db", "{F}/db"],
    ["plan", "gpt3", "--plot", "{F}/p.png"],
    ["results", "compare", "gpt3", "--plot", "{F}/p.png"],
]


@pytest.mark.parametrize("args", UNDER_A_FILE, ids=lambda a: " ".join(a[:2]))
def test_an_output_path_under_a_file_exits_2_before_any_work(mlperf, tmp_path, args):
    f = tmp_path / "F"
    f.write_text("a file, not a folder\n")
    r = mlperf(*[a.replace("{F}", str(f)) for a in args])
    assert r.returncode == 2, (r.returncode, r.stderr)
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: Invalid value for") and f"{f} is a file, so nothing can be made" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F"] and f.read_text() == "a file, not a folder\n"


def test_output_path_rules(tmp_path):
    from harness.core.errors import ConfigError
    from harness.core.files import check_output_path

    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    check_output_path(tmp_path / "new" / "deeper" / "x.csv", folder=False)  # made by the writer
    check_output_path(tmp_path / "dir", folder=True)
    check_output_path(tmp_path / "file", folder=False)  # replaced atomically
    for path, folder, why in (
        (tmp_path / "file", True, "is a file, not a folder"),
        (tmp_path / "dir", False, "is a folder; give a file path"),
        (tmp_path / "dangling" / "x", False, "is a dangling link"),
        (tmp_path / "file" / "a" / "b", True, "is a file, so nothing can be made under it"),
    ):
        with pytest.raises(ConfigError, match=why):
            check_output_path(path, folder=folder)


@pytest.mark.parametrize("args, message", BAD)
def test_bad_input_exits_2_with_one_line(mlperf, args, message):
    r = mlperf(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_an_infinite_memory_size_fails_validate_not_export(mlperf, tmp_path):
    inf = tmp_path / "inf.yaml"
    inf.write_text(open("systems/cpu-local.yaml").read().replace("memory_gib: 16", "memory_gib: .inf"))
    for args in (["systems", "validate", str(inf)], ["systems", "export", str(inf)]):
        r = mlperf(*args)
        assert r.returncode == 2 and "accelerator.memory_gib': Input should be a finite number" in r.stderr


def test_malformed_and_unknown_key_system_files(mlperf, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnodes: [1\n")
    r = mlperf("systems", "validate", str(bad))
    assert r.returncode == 2 and "malformed YAML" in r.stderr and str(bad) in r.stderr
    src = open("systems/dgx-h100x8.yaml").read()
    typo = tmp_path / "typo.yaml"
    typo.write_text(src.replace("inter_node_bandwidth_gbs", "inter_node_bandwith_gbs"))
    r = mlperf("run", "gpt3", "--system", str(typo), "--dry-run")
    assert r.returncode == 2 and "did you mean 'inter_node_bandwidth_gbs'" in r.stderr


@pytest.mark.parametrize(
    "content,why",
    [(bytes(range(256)) * 2, "not UTF-8"), (b"name: caf\xe9\n", "not UTF-8"), (b"name: x\0\n", "NUL")],
)
def test_binary_or_non_utf8_system_file_is_one_line_exit_2(mlperf, tmp_path, content, why):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    r = mlperf("systems", "validate", str(bad))
    assert r.returncode == 2, r.stderr
    assert why in r.stderr and str(bad) in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def _run_folder(tmp_path, timings: str | None, log: bool) -> str:
    run = tmp_path / "run"
    run.mkdir()
    if timings is not None:
        (run / "timings.jsonl").write_text(timings)
    if log:
        (run / "mlperf.log").write_bytes(
            (REPO / "tests/data/tiny_tree/MyOrg/results/cpu-local/gpt3/result_0.txt").read_bytes()
        )
    return str(run)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t: str(t / "bin.dat"), "nothing to diagnose: no MLPerf log line or timings row in"),
        (lambda t: _run_folder(t, "", log=False), "nothing to diagnose"),
        (lambda t: _run_folder(t, "{not json\n" + "9" * 5000 + "\n", log=False), "nothing to diagnose"),
    ],
    ids=["binary-file", "empty-timings", "garbled-timings"],
)
def test_diagnose_refuses_what_has_nothing_to_diagnose(mlperf, tmp_path, make, message):
    """Each said "no symptom" with exit 0 (issue 46); a 5,000-digit integer was an internal error."""
    (tmp_path / "bin.dat").write_bytes(bytes(range(256)))
    r = mlperf("diagnose", make(tmp_path))
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_diagnose_of_a_log_beside_garbled_timings_says_the_timings_were_unreadable(mlperf, tmp_path):
    run = _run_folder(tmp_path, "9" * 5000 + "\n", log=True)
    r = mlperf("diagnose", run)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "timings.jsonl: no readable row" in r.stdout
