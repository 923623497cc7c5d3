"""What runs as its own process: the GPU tests and every benchmark's tiny size through `mlperf run`.

- `pytest -m gpu tests/gpu` (not in the smoke test: CI's own `pytest -q` collects them).
- For each benchmark: `mlperf run BENCH --system SYS --nproc-per-node 1 --size tiny --runs 1`, its log
  through `mlperf check`; then once per GPU-only switch of the benchmark's config (`SWITCHES` in
  benchmarks/<name>/config.py honoured on GPUs only) the same run with `--set SWITCH=<on>` (and the
  switches it needs). A switch the harness refuses (exit 2, one line: a layout one GPU cannot have,
  or a library it needs is missing here, `Switch.library`) is `refused` without starting a process,
  which is the promised behaviour, not a failure; any other non-zero exit is a failure.
  On one GPU a switch that acts across ranks (sequence parallel, TP overlap, a sharded optimizer)
  runs with a degree-1 layout: the run proves it starts and trains, not that it overlaps anything.
Data is prepared per benchmark, by the first of its runs to start (the others of that benchmark
wait for it, and only for it): no prepare stage holds every run back. Runs go in parallel (the tiny
models leave the GPU mostly idle), a few at a time, the longest first (`expected_s`), so the queue
ends with short runs instead of one long one started last. Every finished check goes to `record`
at once (gpu_check.py rewrites its JSON then). Everything goes under a scratch folder.
The smoke test builds every command and runs one as `--dry-run` (a tiny run takes a minute on a CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import typing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE

from bench.gpu.report import Check, Context, one_line, tail
from harness.core.errors import TARGET_NOT_REACHED, USAGE

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    """The repo importable in every child (an offline GPU host runs it without `pip install -e`)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def mlperf(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def shown(cmd: list[str]) -> str:
    """The command as a user types it (`mlperf ...`, `python -m pytest ...`)."""
    if cmd[1:3] == ["-m", "harness.cli"]:
        return " ".join(["mlperf", *cmd[3:]])
    return " ".join(["python", *cmd[1:]])


def _run(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr); at the timeout the whole process tree is stopped the way
    `mlperf run` stops its own runs (SIGINT, SIGTERM, SIGKILL to every descendant: torch elastic
    puts ranks in sessions of their own, and a rank left alive would hold the pipes open), and the
    code is 124 with a note on stderr."""
    from harness.run.launch.local import stop_tree

    p = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=PIPE, stderr=PIPE, text=True)
    try:
        out, err = p.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        stop_tree(p, grace_s=10.0)
        out, _ = p.communicate()
        return 124, out or "", f"timed out after {timeout:.0f} s (the budget)"
    return p.returncode, out, err


def _rank_tails(folder: Path) -> dict[str, str]:
    """The tail of every run folder's rank output (`stdout.log`, `prepare.log`) under `folder`."""
    return {
        str(f.relative_to(folder)): tail(f.read_text(errors="replace"))
        for f in sorted(folder.glob("runs/*/*/*/*.log"))
        if f.name in ("stdout.log", "prepare.log")
    }


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


def gpu_tests(ctx: Context) -> Check:
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider"]
    if ctx.smoke:  # CI's own `pytest -q` collects tests/gpu (and skips them): no second collection
        return Check(name="gpu_tests", kind="tests", status="skipped", path=shown(cmd), detail="smoke test")
    t0 = time.monotonic()
    rc, out, err = _run(cmd, ctx.remaining())
    summary = _last_line(out)
    return Check(
        name="gpu_tests",
        kind="tests",
        status="ok" if rc == 0 else "failed",
        path=shown(cmd),
        seconds=time.monotonic() - t0,
        figures={"summary": summary, "exit_code": rc, **({} if rc == 0 else {"tail": tail(out + err, 80)})},
        detail="" if rc == 0 else (summary or _last_line(err)),
    )


@dataclass
class Job:
    bench: str
    switch: str | None = None
    sets: tuple[str, ...] = ()
    """`KEY=VALUE`s that turn the switch on, with the switches it needs (`Switch.needs`) first."""

    @property
    def kind(self) -> str:
        return "run" if self.switch is None else "switch"

    @property
    def name(self) -> str:
        return f"tiny/{self.bench}" if self.switch is None else f"switch/{self.bench}/{self.switch}"

    @property
    def expected_s(self) -> float:
        """Rough wall seconds on one H200 (with 16 host cores), for the longest-first order only:
        process start and imports ~15 s, plus the tiny run's own training time (on 2 CPU cores:
        gpt3 10-30 s, LoRA and GNN 30-90 s, SD 60-130 s + eval, flux1 ~20 s, measured;
        a GPU cuts the step time, not the Python overhead of models this small), plus ~90 s where
        the switch compiles with torch.compile (SD cuda_graphs, llama2 compile)."""
        own = {
            "stable_diffusion": 75.0,
            "llama2_70b_lora": 45.0,
            "gnn": 45.0,
            "gpt3": 20.0,
            "llama31_8b": 25.0,
            "flux1": 25.0,
        }
        compiles = (self.bench, self.switch) in {
            ("stable_diffusion", "cuda_graphs"),
            ("llama2_70b_lora", "compile"),
        }
        return 15.0 + own.get(self.bench, 60.0) + (90.0 if compiles else 0.0)


GPU_ALSO = ("precision", "compile")


def on_value(cls, name: str) -> str:
    """A switch's first value other than `off`, as `--set` spells it: true, the first other choice
    of a Literal (precision: bf16 or fp16), or twice an integer degree (context parallel: 2)."""
    off = cls.SWITCHES[name].off if name in cls.SWITCHES else "fp32"  # llama2's precision: a field
    if isinstance(off, bool):
        return "true"
    others = [c for c in typing.get_args(cls.model_fields[name].annotation) if c != off]
    return str(others[0]) if others else str(off * 2)


def jobs(system: str) -> tuple[list[Job], list[Check]]:
    """The base run of every benchmark, one run per GPU-only switch (`benchmarks.base.gpu_only`) and
    one in the GPU precision (bf16/fp16) that the harness accepts on this one-GPU system; a switch refused at resolve time (no process needed
    to know: e.g. sequence parallelism needs TP >= 2) becomes a `refused` check right away."""
    from benchmarks import get, runs
    from benchmarks.base import gpu_only
    from harness.core.errors import ConfigError
    from harness.resolve.switches import require_libraries
    from harness.run.execute import resolve

    # runs(): the benchmarks with an implementation (gpt_oss_20b, deepseekv3_671b have none yet)
    bases, todo, refused = [Job(b) for b in runs()], [], []
    for bench in runs():
        cls = get(bench).config
        # Plus what the CPU runs too but the GPU runs through other code: `precision` (the tiny sizes
        # ship fp32, gnn aside, so else no tiny run trains in the GPU configs' bf16/fp16 on CUDA)
        # and llama2's `compile` (triton kernels on CUDA, C++ on CPU).
        extra = [k for k in GPU_ALSO if k in cls.model_fields and k not in gpu_only(cls)]
        for key in [*gpu_only(cls), *extra]:
            needs = cls.SWITCHES[key].needs if key in cls.SWITCHES else ()
            job = Job(bench, key, tuple(f"{k}={on_value(cls, k)}" for k in (*needs, key)))
            try:
                r = resolve(get(bench), system, "tiny", runs=1, seed=1, nproc_per_node=1, sets=list(job.sets))
                require_libraries(get(bench), r.plans[0].config)  # what `mlperf run` refuses before launch
            except ConfigError as e:
                asked = f"mlperf run {bench} --system {system} --nproc-per-node 1 --size tiny"
                asked += "".join(f" --set {kv}" for kv in job.sets)
                refused.append(
                    Check(name=job.name, kind="switch", status="refused", path=asked, detail=str(e))
                )
                continue
            todo.append(job)
    # Longest first (stable: at equal cost a benchmark's base run before its switch runs).
    return sorted(bases + todo, key=lambda j: -j.expected_s), refused


def _results_dir(job: Job, work: Path) -> Path:
    return work / "results" / job.name.replace("/", "-")


def _run_args(job: Job, system: str, work: Path, dry: bool) -> list[str]:
    args = ["run", job.bench, "--system", system, "--nproc-per-node", "1", "--size", "tiny", "--runs", "1"]
    args += ["--seed", "1", "--json", "--results-dir", str(_results_dir(job, work))]
    args += ["--data-dir", str(work / "data" / job.bench)]
    for kv in job.sets:
        args += ["--set", kv]
    return mlperf(*args, *(["--dry-run"] if dry else []))


def run_job(ctx: Context, job: Job, system: str, work: Path, dry: bool = False) -> Check:
    if ctx.remaining() <= 0:
        return ctx.out_of_time(job.name, job.kind)
    t0 = time.monotonic()
    cmd = _run_args(job, system, work, dry)
    rc, out, err = _run(cmd, ctx.remaining())
    figures, status, detail = {"exit_code": rc}, "ok", ""
    if rc == USAGE and job.switch:  # a base tiny run has nothing to refuse: exit 2 is a failure
        status, detail = "refused", _last_line(err)
    elif rc == TARGET_NOT_REACHED:
        status, detail = "failed", "the tiny target was not reached (exit 3)"
    elif rc != 0:
        status, detail = "failed", _last_line(err) or f"exit {rc}"
    elif not dry:
        doc = json.loads(out)["runs"][0]
        figures.update(time_to_train_min=doc["time_to_train_min"], quality=doc["quality"])
        rc, out, err = _run(mlperf("check", doc["result_file"]), max(ctx.remaining(), 60))
        figures["check_exit_code"] = rc
        if rc != 0:
            status, detail = "failed", f"mlperf check: {_last_line(out) or _last_line(err)}"
    if status == "failed":
        figures.update(stderr_tail=tail(err), rank_tails=_rank_tails(_results_dir(job, work)))
    return Check(
        name=job.name,
        kind=job.kind,
        status=status,
        path=shown(cmd),
        seconds=time.monotonic() - t0,
        figures=figures,
        detail=detail,
    )


class Prepared:
    """Each benchmark's tiny data, prepared once by the first run of it that needs it; the other
    runs of that benchmark wait for that one (a lock per benchmark), the other benchmarks do not.
    The tiny data depends on model and data fields only (each benchmark's DataManifest in
    benchmarks/<name>/__init__.py), not on the system or the switches, so every run of the
    benchmark finds it."""

    def __init__(self, ctx: Context, work: Path):
        self.ctx, self.work = ctx, work
        from benchmarks import runs

        self.locks = {b: threading.Lock() for b in runs()}
        self.done: dict[str, str | None] = {}

    def why_not(self, bench: str) -> str | None:
        """None when the data is ready, else why not (one line)."""
        with self.locks.setdefault(bench, threading.Lock()):
            if bench not in self.done:
                args = ["prepare", bench, "--size", "tiny", "--data-dir", str(self.work / "data" / bench)]
                rc, _, err = _run(mlperf(*args), self.ctx.remaining())
                why = f"mlperf prepare {bench} --size tiny: {tail(err, 15) or f'exit {rc}'}"
                self.done[bench] = None if rc == 0 else why
            return self.done[bench]


def checks(
    ctx: Context, system: str, work: Path, parallel: int, parts: set[str], record: Callable[[Check], None]
) -> None:
    """parts: any of 'tests' (pytest -m gpu), 'runs' (the base tiny runs), 'switches'. Each check
    goes to `record` as soon as it is known (refused ones first, then each run as it ends)."""
    todo, refused = jobs(system) if parts & {"runs", "switches"} else ([], [])
    if "switches" not in parts:
        todo, refused = [j for j in todo if j.switch is None], []
    if "runs" not in parts:
        todo = [j for j in todo if j.switch is not None]
    for c in refused:
        record(c)
    if ctx.smoke:  # every command is built; one runs, as a dry run
        for j in todo[:1]:
            record(run_job(ctx, j, system, work, dry=True))
        for j in todo[1:]:
            record(
                Check(
                    name=j.name,
                    kind=j.kind,
                    status="skipped",
                    path=shown(_run_args(j, system, work, False)),
                    detail="smoke test: built, not run",
                )
            )
        if "tests" in parts:
            record(gpu_tests(ctx))
        return
    data = Prepared(ctx, work)

    def one(job: Job) -> None:
        try:
            why = data.why_not(job.bench)
            c = Check(name=job.name, kind=job.kind, status="failed", detail=why) if why else None
            c = c or run_job(ctx, job, system, work)
        except Exception as e:  # e.g. output that is not the run's JSON: this run failed, not the script
            c = Check(name=job.name, kind=job.kind, status="failed", detail=one_line(e))
        record(c)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        waits = [pool.submit(lambda: record(gpu_tests(ctx)))] if "tests" in parts else []
        waits += [pool.submit(one, j) for j in todo]
        for w in waits:
            w.result()
