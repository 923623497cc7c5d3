"""What runs as its own process: the GPU tests and every benchmark's tiny size through `mlperf run`.

- `pytest -m gpu tests/gpu` (not in the smoke test: CI's own `pytest -q` collects them).
- For each benchmark: `mlperf run BENCH --system SYS --nproc-per-node 1 --size tiny --runs 1`, its log
  through `mlperf check`; then once per GPU-only switch of the benchmark's config (`SWITCHES` in
  benchmarks/<name>/config.py honoured on GPUs only) the same run with `--set SWITCH=<on>` (and the
  switches it needs). A switch the harness refuses (exit 2, one line: a layout one GPU cannot have,
  or a library it needs is missing here) is `refused`, which is the promised behaviour, not a
  failure; any other non-zero exit is a failure.
  On one GPU a switch that acts across ranks (sequence parallel, TP overlap, a sharded optimizer)
  runs with a degree-1 layout: the run proves it starts and trains, not that it overlaps anything.
Data is prepared once per benchmark before its runs (they share it); everything goes under a
scratch folder. Runs go in parallel (the tiny models leave the GPU mostly idle), a few at a time.
The smoke test builds every command and runs one as `--dry-run` (a tiny run takes a minute on a CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import typing
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE

from bench.gpu.report import Check, Context, one_line
from harness.core.errors import TARGET_NOT_REACHED, USAGE

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    """The repo importable in every child (the lent GPU machine runs it without `pip install -e`)."""
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
        figures={"summary": summary, "exit_code": rc},
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


def on_value(cls, name: str) -> str:
    """A switch's first value other than `off`, as `--set` spells it: true, the first other choice
    of a Literal (precision: bf16 or fp16), or twice an integer degree (context parallel: 2)."""
    off = cls.SWITCHES[name].off
    if isinstance(off, bool):
        return "true"
    others = [c for c in typing.get_args(cls.model_fields[name].annotation) if c != off]
    return str(others[0]) if others else str(off * 2)


def jobs(system: str) -> tuple[list[Job], list[Check]]:
    """The base run of every benchmark and one run per GPU-only switch (`benchmarks.base.gpu_only`)
    the harness accepts on this one-GPU system; a switch refused at resolve time (no process needed
    to know: e.g. sequence parallelism needs TP >= 2) becomes a `refused` check right away."""
    from benchmarks import available, config_class
    from benchmarks.base import gpu_only
    from harness.core.errors import ConfigError
    from harness.run.execute import resolve

    bases, todo, refused = [Job(b) for b in available()], [], []
    for bench in available():
        cls = config_class(bench)
        for key in gpu_only(cls):
            job = Job(bench, key, tuple(f"{k}={on_value(cls, k)}" for k in (*cls.SWITCHES[key].needs, key)))
            try:
                resolve(bench, system, "tiny", runs=1, seed=1, nproc_per_node=1, sets=list(job.sets))
            except ConfigError as e:
                asked = f"mlperf run {bench} --system {system} --nproc-per-node 1 --size tiny"
                asked += "".join(f" --set {kv}" for kv in job.sets)
                refused.append(
                    Check(name=job.name, kind="switch", status="refused", path=asked, detail=str(e))
                )
                continue
            todo.append(job)
    return bases + todo, refused  # every benchmark's base run first: they start before any switch run


def _run_args(job: Job, system: str, work: Path, dry: bool) -> list[str]:
    args = ["run", job.bench, "--system", system, "--nproc-per-node", "1", "--size", "tiny", "--runs", "1"]
    args += ["--seed", "1", "--json", "--results-dir", str(work / "results" / job.name.replace("/", "-"))]
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
    return Check(
        name=job.name,
        kind=job.kind,
        status=status,
        path=shown(cmd),
        seconds=time.monotonic() - t0,
        figures=figures,
        detail=detail,
    )


def prepare(ctx: Context, bench: str, work: Path) -> str | None:
    """Prepare a benchmark's tiny data once; None when ready, else why not (one line). The tiny data
    depends on model and data fields only (each benchmark's manifest.py: DATA_FIELDS), not on the
    system or the switches, so every run of the benchmark finds it prepared."""
    args = ["prepare", bench, "--size", "tiny", "--data-dir", str(work / "data" / bench)]
    rc, _, err = _run(mlperf(*args), ctx.remaining())
    return None if rc == 0 else f"mlperf prepare {bench} --size tiny: {_last_line(err) or f'exit {rc}'}"


def checks(ctx: Context, system: str, work: Path, parallel: int, parts: set[str]) -> list[Check]:
    """parts: any of 'tests' (pytest -m gpu), 'runs' (the base tiny runs), 'switches'."""
    todo, out = jobs(system) if parts & {"runs", "switches"} else ([], [])
    if "switches" not in parts:
        todo, out = [j for j in todo if j.switch is None], []
    if "runs" not in parts:
        todo = [j for j in todo if j.switch is not None]
    if ctx.smoke:  # every command is built; one runs, as a dry run
        out += [run_job(ctx, j, system, work, dry=True) for j in todo[:1]]
        out += [
            Check(
                name=j.name,
                kind=j.kind,
                status="skipped",
                path=shown(_run_args(j, system, work, False)),
                detail="smoke test: built, not run",
            )
            for j in todo[1:]
        ]
        return out + ([gpu_tests(ctx)] if "tests" in parts else [])
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        tests = pool.submit(gpu_tests, ctx) if "tests" in parts else None
        benches = sorted({j.bench for j in todo})
        ready = dict(zip(benches, pool.map(lambda b: prepare(ctx, b, work), benches)))

        def one(job: Job) -> Check:
            if ready[job.bench]:
                return Check(name=job.name, kind=job.kind, status="failed", detail=ready[job.bench])
            try:
                return run_job(ctx, job, system, work)
            except Exception as e:  # e.g. output that is not the run's JSON: this run failed, not the script
                return Check(name=job.name, kind=job.kind, status="failed", detail=one_line(e))

        out.extend(pool.map(one, todo))
        if tests:
            out.append(tests.result())
    return out
