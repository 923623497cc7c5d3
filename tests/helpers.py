"""What several test modules do the same way: plan a tiny run with the harness's own planner, start
a reference implementation on it, read its MLLOG events, and run the official compliance checker
with the tiny rules (as `mlperf check` does for a tiny log).

Importable as `helpers` from any test module: pytest puts tests/ on sys.path (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_plan(benchmark: str, tmp_path: Path, **kw):
    """One plan from `harness.run.execute.make_plans` (cpu-local, tiny unless kw says otherwise), its
    results under tmp_path/results; plan.json is written, so the plan can be started as it is."""
    import benchmarks
    from harness.run.execute import make_plans

    kw.setdefault("size", "tiny")
    return make_plans(
        benchmarks.get(benchmark), kw.pop("system", "cpu-local"), results_dir=tmp_path / "results", **kw
    )[0]


def typed_config(plan):
    """A plan's config as its benchmark's typed class (outside a rank; a rank has `rt.cfg`)."""
    import benchmarks

    return benchmarks.get(plan.benchmark).typed(plan.config)


def plan_file(plan, task: str = "train") -> Path:
    """The plan.json a process is started with: the run's own, or a copy whose `task` is `task`
    (what `mlperf prepare` / `lr-find` write)."""
    if task == "train":
        return Path(plan.run_dir) / "plan.json"
    path = Path(plan.run_dir) / f"{task}.plan.json"
    plan.model_copy(update={"task": task}).save(path)
    return path


def run_entry(
    module: str, plan, nproc: int = 1, timeout: float = 600, env: dict | None = None, task: str = "train"
) -> subprocess.CompletedProcess:
    """`python -m MODULE --plan PLAN` (the plan with `task`), under torchrun when nproc > 1."""
    argv = [module, "--plan", str(plan_file(plan, task))]
    if nproc > 1:
        argv = ["torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "-m", *argv]
    return subprocess.run(
        [sys.executable, "-m", *argv], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def events(log_path) -> list[dict]:
    """Every `:::MLLOG {...}` record of a log, in order; a malformed one fails the test."""
    return [
        json.loads(line.split(":::MLLOG ", 1)[1])
        for line in Path(log_path).read_text().splitlines()
        if ":::MLLOG " in line
    ]


# A log's events on one clock, in the order written: the prologue up to run_start; training blocks;
# evaluations. Stable Diffusion stamps its blocks on a training clock that leaves out the (untimed)
# scoring and back-dates run_stop to the passing checkpoint, so the three are ordered separately.
CLOCKS = {
    "prologue": lambda key, seen_run_start: not seen_run_start,
    "blocks": lambda key, _: key in ("block_start", "block_stop"),
    "evals": lambda key, _: key in ("eval_start", "eval_accuracy", "eval_stop"),
}


def assert_time_order(log_path) -> None:
    """The run's own log is in time order at millisecond resolution: on each clock (CLOCKS) the
    events' time_ms never go back, every event after run_start is at or after it, run_stop is
    after run_start, and a clock with several distinct times is not all whole seconds (a writer
    that lost the milliseconds; a correct one does that with odds of 1 in 1000 per time)."""
    evs = events(log_path)
    start = next(e["time_ms"] for e in evs if e["key"] == "run_start")
    init_stop = next(e["time_ms"] for e in evs if e["key"] == "init_stop")
    assert init_stop <= start, f"{log_path}: run_start {start} before init_stop {init_stop}"
    for clock, member in CLOCKS.items():
        seen, times = False, []
        for e in evs:
            if member(e["key"], seen):
                times.append((e["time_ms"], e["key"]))
            seen = seen or e["key"] == "run_start"
        back = [(a, b) for a, b in zip(times, times[1:]) if b[0] < a[0]]
        assert not back, f"{log_path}: {clock} out of time order: {back[:3]}"
        late = [t for t in times if clock != "prologue" and t[0] < start]
        assert not late, f"{log_path}: {clock} events before run_start {start}: {late[:3]}"
        distinct = {t for t, _ in times}
        whole = len(distinct) >= 4 and all(t % 1000 == 0 for t in distinct)
        assert not whole, f"{log_path}: {clock} times are whole seconds: {sorted(distinct)[:5]}"
    stops = [e["time_ms"] for e in evs if e["key"] == "run_stop"]
    assert all(t >= start for t in stops), f"{log_path}: run_stop {stops} before run_start {start}"


def official_check(log_path) -> subprocess.CompletedProcess:
    """mlperf_logging's compliance checker, as a separate process, on one tiny log: under the
    ruleset the log names (`harness_ruleset`) with that ruleset's tiny rules. The log's time order
    is asserted first (assert_time_order): every benchmark's tiny test checks its log here."""
    from benchmarks.tiny_rules import config_path

    assert_time_order(log_path)
    ruleset = next(e["value"] for e in events(log_path) if e["key"] == "harness_ruleset")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
            "--ruleset",
            ruleset,
            "--config",
            config_path(ruleset),
            "--log_output",
            os.devnull,
            str(log_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def mlperf_argv(*args: str) -> list[str]:
    """`mlperf ARGS` as an argv for Popen (the CLI module, so the checkout's code runs)."""
    return [sys.executable, "-m", "harness.cli", *args]


def env() -> dict:
    """The environment of the `mlperf`/rank processes a test starts: one thread each (the CI has 2
    cores), no warnings, this checkout importable."""
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))


def one_run_args(benchmark: str, results: Path, data_dir: Path, seed: int, *extra: str) -> list[str]:
    """The arguments of `mlperf run BENCHMARK` for one tiny run on cpu-local with JSON output;
    `extra` (e.g. `--nproc-per-node 2`) goes before the run options."""
    run = ["--runs", "1", "--seed", str(seed), "--results-dir", str(results), "--data-dir", str(data_dir)]
    return ["run", benchmark, "--system", "cpu-local", *extra, *run, "--json"]


def resume_run(benchmark: str, run_dir: Path, ok=(0,)) -> dict:
    """`mlperf run BENCHMARK --resume RUN_DIR --json`, which must exit with a code in `ok` (0:
    success; 3: target not reached, for a short run); its one run's record."""
    r = subprocess.run(
        mlperf_argv("run", benchmark, "--resume", str(run_dir), "--json"),
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in ok, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout)["runs"][0]


def kill_tree(root: int) -> list[int]:
    """SIGKILL `root` and every descendant, root first (nothing may finalize a log after it);
    returns the descendants' pids. Walks the tree rather than a process group: torch elastic
    starts each rank in a session of its own."""
    import psutil

    try:
        top = psutil.Process(root)
        kids = top.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for p in (top, *kids):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs([top, *kids], timeout=10)
    return [p.pid for p in kids]


def _has_checkpoint(run: Path) -> bool:
    return bool(list((run / "checkpoints").glob("step_*/manifest.json")))


def kill_after_first_checkpoint(
    argv: list[str], runs: Path, deadline_s: float = 600, ready=_has_checkpoint
) -> tuple[Path, list[int]]:
    """Start `mlperf run ...` (argv) in the background, kill -9 its whole process tree as soon as
    `ready(run_folder)` (default: the first checkpoint's manifest is there) for the run folder
    under `runs`; returns that folder and the killed descendants' pids. The run must still be
    going then (a run that finished first proves nothing about resume), and its log must not be
    finalized."""
    import time

    cli = subprocess.Popen(
        argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline, run = time.monotonic() + deadline_s, None
    try:
        while time.monotonic() < deadline and cli.poll() is None:
            dirs = list(runs.glob("*")) if runs.exists() else []
            run = dirs[0] if dirs else None
            if run and ready(run):
                break
            time.sleep(0.02)
        assert cli.poll() is None, cli.communicate()
        killed = kill_tree(cli.pid)
        cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            kill_tree(cli.pid)
    assert b'"run_stop"' not in (run / "mlperf.log").read_bytes()
    return run, killed


def session_root(tmp_path_factory) -> Path:
    """The folder every xdist worker of this pytest run shares (a worker's basetemp is
    pytest-N/popen-gwK; without xdist, basetemp is pytest-N itself)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def prepared_once(tmp_path_factory, name: str, benchmark: str, sub: str = "") -> Path:
    """`mlperf prepare BENCHMARK --data-dir FOLDER[/SUB]` once per pytest run (once_per_run `name`),
    which must exit 0; returns the data folder. The tests of several modules read the one folder."""

    def make(folder: Path):
        argv = mlperf_argv("prepare", benchmark, "--data-dir", str(folder / sub if sub else folder))
        r = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]

    folder = once_per_run(tmp_path_factory, name, make)
    return folder / sub if sub else folder


SHARED_SEED = 7
"""The seed of a benchmark's shared uninterrupted run (shared_run), also its GA test's
(test_every_benchmark CASES)."""


def shared_data(tmp_path_factory, benchmark: str) -> Path:
    """`mlperf prepare BENCHMARK` once per pytest run, the folder every test module of it reads (the
    on-demand prepare inside `mlperf run` is gpt3's quick-start test's; prepare is the same code)."""
    return prepared_once(tmp_path_factory, f"{benchmark}-data", benchmark)


def shared_run(tmp_path_factory, benchmark: str) -> dict:
    """One uninterrupted run of BENCHMARK (seed SHARED_SEED, the newest ruleset) to its tiny
    target, once per pytest run: what its resume, layout and GA tests compare with."""
    data = shared_data(tmp_path_factory, benchmark)
    doc = uninterrupted_run(tmp_path_factory, f"{benchmark}-plain", benchmark, data, SHARED_SEED)
    (run,) = doc["runs"]
    assert run["status"] == "success", run
    return run


def once_per_run(tmp_path_factory, name: str, make) -> Path:
    """`make(folder)` for `name` once per pytest run, whichever worker asks first; the others wait
    on a file lock and reuse the folder. An uninterrupted run that several tests compare with (or a
    prepared data dir) costs one training, not one per worker. A `make` that raised leaves no
    `.done`, so the next caller tries again and fails the same way, in its own test."""
    from filelock import FileLock

    root = session_root(tmp_path_factory)
    folder = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (folder / ".done").exists():
            if folder.exists():
                import shutil

                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            make(folder)
            (folder / ".done").touch()
    return folder


def uninterrupted_run(
    tmp_path_factory, name: str, benchmark: str, data_dir: Path, seed: int, *extra: str, ok=(0,)
) -> dict:
    """`mlperf run BENCHMARK --system cpu-local EXTRA --runs 1 --seed SEED --json`, which must exit
    with a code in `ok` (3: stopped by a cap), made once per pytest run (once_per_run `name`): the uninterrupted run that the resume and layout
    tests compare with. Returns the CLI's JSON (its one run: `["runs"][0]`), with `"measured"`: the
    command's wall seconds and its process tree's CPU seconds (what a timing test needs to tell a
    quiet machine from a busy one)."""
    argv = one_run_args(benchmark, Path("RESULTS"), data_dir, seed, *extra)
    return shared_cli_run(tmp_path_factory, name, *argv, ok=ok)


def shared_cli_run(tmp_path_factory, name: str, *args: str, ok=(0,)) -> dict:
    """`mlperf ARGS` (JSON output, an exit code in `ok`), once per pytest run (once_per_run `name`); the argument
    `RESULTS` stands for the run's own results folder. Returns the CLI's JSON plus `"measured"`
    (wall_s, cpu_s of the whole process tree) and `"results_dir"`."""
    import resource
    import time

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)  # this worker's reaped children only
        return r.ru_utime + r.ru_stime

    def make(folder: Path):
        results = str(folder / "results")
        argv = mlperf_argv(*(results if a == "RESULTS" else a for a in args))
        cpu0, t0 = cpu(), time.monotonic()
        r = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=900)
        measured = {"wall_s": time.monotonic() - t0, "cpu_s": cpu() - cpu0}
        assert r.returncode in ok, r.stdout[-2000:] + r.stderr[-3000:]
        doc = dict(json.loads(r.stdout), measured=measured, results_dir=results)
        (folder / "run.json").write_text(json.dumps(doc))

    return json.loads((once_per_run(tmp_path_factory, name, make) / "run.json").read_text())


def eval_points(log_path, after_key: str | None = None) -> dict[str, float]:
    """eval_accuracy values of a log keyed by their metadata (epoch_num / samples_count, metric),
    in log order; with `after_key`, only those logged after the first `after_key` event."""
    ev = events(log_path)
    if after_key is not None:
        ev = ev[[e["key"] for e in ev].index(after_key) + 1 :]
    return {json.dumps(e["metadata"], sort_keys=True): e["value"] for e in ev if e["key"] == "eval_accuracy"}


def assert_resumed_curve_matches(
    run_dir: Path, reference_log, rel: float, stopped_early: bool = False
) -> int:
    """The resumed run's evaluations from the resume point on (every one logged after
    harness_resumed) equal the uninterrupted run's (same command and seed) to `rel`, and the two
    runs logged the same evaluations (the target at the same point). `stopped_early`: the resumed
    run was stopped by a step cap that leaves the data order alone (gpt3 and llama2 `max_steps`),
    so its evaluations are the first ones of the uninterrupted run's. Returns how many evaluations
    after the resume point were compared; at least one, so a resume that was never exercised
    cannot pass."""
    import pytest

    log = Path(run_dir) / "mlperf.log"
    got, want, after = eval_points(log), eval_points(reference_log), eval_points(log, "harness_resumed")
    if stopped_early:
        assert len(got) < len(want), "the resumed run was not stopped early: compare it whole"
        want = dict(list(want.items())[: len(got)])
    assert list(got) == list(want), (list(got), list(want))
    assert after, "no evaluation after the resume point: the comparison would be vacuous"
    for k, v in after.items():
        assert v == pytest.approx(want[k], rel=rel), (k, v, want[k])
    return len(after)


def killed_and_resumed(
    benchmark: str, results: Path, data_dir: Path, seed: int, *extra: str, ready=_has_checkpoint
) -> Path:
    """`mlperf run BENCHMARK --runs 1` killed (kill -9, whole tree) once `ready(run_folder)` (by
    default: right after its first checkpoint), then `mlperf run BENCHMARK --resume RUN_DIR` to
    the end. Checks what every resumed run must show and returns the run folder: one run_start,
    one run_stop, one harness_resumed after run_start with the lost time; no evaluation logged
    twice. The caller compares the curve with an uninterrupted run
    (assert_resumed_curve_matches) and checks the status it expects."""
    name = __import__("benchmarks").get(benchmark).name
    argv = mlperf_argv(*one_run_args(benchmark, results, data_dir, seed, *extra))
    run, _ = kill_after_first_checkpoint(argv, results / "runs" / name / "cpu-local", ready=ready)
    resume_run(benchmark, run, ok=(0, 3))
    ev = events(run / "mlperf.log")
    keys = [e["key"] for e in ev]
    assert keys.count("run_start") == keys.count("run_stop") == keys.count("harness_resumed") == 1
    assert keys.index("run_start") < keys.index("harness_resumed")
    assert ev[keys.index("harness_resumed")]["metadata"]["lost_ms"] > 0
    assert len(eval_points(run / "mlperf.log")) == keys.count("eval_accuracy")  # none logged twice
    return run


def check_as_tree(result_file, dest: Path) -> dict:
    """A run's claimed log as a whole result folder of its ruleset: copied as many times as the
    package requires (mlperf_logging.benchmark_meta) into DEST/<org>/results/<system>/<name>/
    beside the run's system JSON, then `mlperf check` on the tree (package, system-description
    and compliance checkers of the log's ruleset). Returns the check's JSON; fails unless it passed.
    The copies are one real log repeated: a tiny result is open division, so no seed check applies."""
    import shutil

    from harness.core.rulesets import runs_required

    result_file = Path(result_file)
    bench_dir = result_file.parent
    system = bench_dir.parent.name
    org_dir = bench_dir.parents[2]
    out = Path(dest) / org_dir.name
    (out / "systems").mkdir(parents=True)
    shutil.copy(org_dir / "systems" / f"{system}.json", out / "systems" / f"{system}.json")
    folder = out / "results" / system / bench_dir.name
    folder.mkdir(parents=True)
    for i in range(runs_required(bench_dir.name)):
        shutil.copy(result_file, folder / f"result_{i}.txt")
    r = subprocess.run(
        mlperf_argv("check", str(out), "--json"),
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(r.stdout)


def worker_result(worker: Path, *args: str, nproc: int | None = None, timeout: float = 600) -> dict:
    """Run a test worker script (under torchrun with `nproc` ranks, else one plain process), which
    must exit 0, and return the JSON of the one `RESULT {...}` line it prints."""
    launch = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"] if nproc else []
    r = subprocess.run(
        [sys.executable, *launch, str(worker), *args],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return json.loads(r.stdout.split("RESULT ", 1)[1].splitlines()[0])


def run_probe(script: str, *args: str, stdin: str | None = None, timeout: float = 600):
    """Run `script` (a Python snippet, dedented) in a fresh interpreter (megatron's CPU layer patches
    torch process-wide) with `args` as sys.argv[1:]; it prints "PROBE" + one JSON document last.
    Returns that document; fails with the child's stderr tail if it exited non-zero."""
    import textwrap

    r = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(script), *args],
        input=stdin,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.split("PROBE", 1)[1])
