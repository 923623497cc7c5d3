"""`mlperf run BENCH --resume RUN_DIR`: continue an interrupted run from its last good checkpoint.

    plan = resume_plan(run_dir)     # plan.json + newest checkpoint that verifies -> resume_from
    resolved = resolve(run_dir)     # what commands/run.py hands to execute()

The MLPerf log of the run is continued, not restarted, so the interruption is on the record:
- everything logged up to the checkpoint stays byte for byte (run_start is the original one, so
  the time-to-train includes the time lost to the crash and the restart);
- what was logged after the checkpoint's log offset (the block the crash interrupted, and the
  `run_stop aborted` the harness appended when the processes died) is work that will be redone:
  it is moved verbatim to `RUN_DIR/mlperf.log.interrupted-<k>` and summarised in the log's
  `harness_resumed` event, so it is neither lost nor logged twice;
- the resumed process writes no second prologue or run_start: `MLLog.resume()` mutes everything
  before its run_start, which becomes one `harness_resumed` event (value: checkpoint step;
  metadata: the interruption time, the lost milliseconds, the discarded keys);
- a log already claimed as `result_<i>.txt` (a hard link, made when the processes died) keeps
  that claim: the log is rewritten to a new inode, so the claimed file still holds the aborted
  attempt until the resumed run finishes and `writer.replace_result` puts it under the same
  number (no renumbering, no second result for the same run).

`RUN_DIR/resume.json` records each resume (newest last; read by harness/core/runfolder.py, which
the resumed ranks use too). Torch-free.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.core import checkpoint_manifest as checkpoint
from harness.core import tree
from harness.core.errors import ConfigError
from harness.core.files import atomic_write, atomic_write_bytes
from harness.core.mllog_reader import events_of
from harness.core.runfolder import RESUME_FILE, checkpoint_root, results_root, resume_history, resume_marker
from harness.core.runplan import RunPlan


def resume_plan(run_dir: str | Path, apply: bool = True) -> RunPlan:
    """Re-read RUN_DIR/plan.json, pick the newest checkpoint that verifies (torn or corrupt ones
    are skipped), repair the log for appending, record the resume; return the plan with
    `resume_from` set. `apply=False` (--dry-run) checks everything and writes nothing.
    Raises ConfigError (one line) when the run cannot be resumed."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / "plan.json").is_file():
        raise ConfigError(
            f"{run_dir}: no plan.json; --resume takes a run folder (results/runs/<bench>/<system>/<id>)"
        )
    plan = RunPlan.load(run_dir / "plan.json")
    alive = _live_processes(run_dir / "plan.json")
    if alive:
        raise ConfigError(
            f"{run_dir}: still being trained by process(es) {', '.join(map(str, alive))}; "
            f"stop them (or wait) before --resume"
        )
    log_path = Path(plan.log_path)
    try:
        data = log_path.read_bytes()
    except FileNotFoundError:
        data = b""  # reported below: the run never started
    except IsADirectoryError:
        raise ConfigError(
            f"{run_dir}: the plan's log_path {log_path} is not a file (a folder?); put the run's "
            "mlperf.log back there, or start a new run"
        ) from None
    except OSError as e:
        raise ConfigError(f"{run_dir}: cannot read the run's log {log_path} ({e.strerror})") from None
    lines = data.splitlines(keepends=True)
    events = events_of(lines)
    keys = [e.get("key") for e in events]
    if "run_start" not in keys:
        raise ConfigError(f"{run_dir}: the run never started (no run_start in {log_path}); start a new run")
    stops = [e for e in events if e.get("key") == "run_stop"]
    if any(e.get("metadata", {}).get("status") == "success" for e in stops):
        raise ConfigError(f"{run_dir}: the run already reached its target; nothing to resume")
    problems: list[str] = []
    found = checkpoint.latest_good(checkpoint_root(plan.run_dir), plan.layout.world_size, problems=problems)
    if found is None:
        why = "; ".join(problems) if problems else f"none in {checkpoint_root(plan.run_dir)}"
        raise ConfigError(f"{run_dir}: no usable checkpoint ({why}); start a new run")

    meta = found.manifest.get("meta")
    offset = meta.get("log_offset") if isinstance(meta, dict) else None
    if isinstance(offset, int) and 0 < offset <= len(data):
        keep, tail = data[:offset], data[offset:]
    else:  # no offset recorded: drop only the end-of-run lines and a torn last line
        cut = len(data)
        if lines and not lines[-1].endswith(b"\n"):
            cut -= len(lines[-1])
            lines = lines[:-1]
        while lines and [e.get("key") for e in events_of(lines[-1:])] == ["run_stop"]:
            cut -= len(lines[-1])
            lines = lines[:-1]
        keep, tail = data[:cut], data[cut:]
    tail_events = events_of(tail.splitlines())
    last_alive = max((e.get("time_ms", 0) for e in events_of(keep.splitlines()) + tail_events), default=0)

    claimed = _claimed_result(plan, log_path)
    prior = resume_history(run_dir)
    record = {
        "checkpoint_step": found.step,
        "checkpoint": str(found.path),
        "interrupted_ms": last_alive,
        "resume_unix_ms": int(time.time() * 1000),
        "discarded_keys": [e.get("key") for e in tail_events],
        "discarded_file": None,
        "claimed_result": str(claimed) if claimed else None,
        "skipped_checkpoints": problems,
    }
    if not apply:
        return plan.model_copy(update={"resume_from": str(found.path)})
    if tail:
        side = run_dir / f"mlperf.log.interrupted-{len(prior) + 1}"
        atomic_write(side, tail.decode("utf-8", "replace"))
        record["discarded_file"] = side.name
    # New inode: a result_<i>.txt hard-linked to the old log keeps the aborted attempt as it was.
    atomic_write_bytes(log_path, keep)
    atomic_write(run_dir / RESUME_FILE, json.dumps({"resumes": prior + [record]}, indent=2) + "\n")
    return plan.model_copy(update={"resume_from": str(found.path)})


def _live_processes(plan_json: Path) -> list[int]:
    """PIDs on this host whose command line names this plan (Linux /proc; [] elsewhere). A resume
    while the original ranks still train would interleave two runs in one log."""
    needle = str(plan_json).encode()
    me = os.getpid()
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if int(d.name) != me and needle in (d / "cmdline").read_bytes():
                out.append(int(d.name))
        except (OSError, ValueError):
            continue
    return sorted(out)


def _claimed_result(plan: RunPlan, log_path: Path) -> Path | None:
    """The result_<i>.txt that is a hard link of this run's log, if the runner claimed it."""
    if not log_path.exists() or log_path.stat().st_nlink < 2:
        return None
    s = plan.submission
    folder = tree.result_dir(results_root(Path(plan.run_dir)), s.org, s.system, plan.submission_benchmark)
    for i in tree.existing_results(folder):
        p = folder / f"result_{i}.txt"
        try:
            if os.path.samefile(p, log_path):
                return p
        except OSError:
            continue
    return None


def replaces_result(plan: RunPlan) -> Path | None:
    """For the executor: the result file this resumed run takes over (same number), if any."""
    if not plan.resume_from:
        return None
    claimed = resume_marker(plan.run_dir).get("claimed_result")
    return Path(claimed) if claimed else None


def resolve(run_dir: str | Path, bench=None, launcher: str | None = None, apply: bool = True):
    """A `Resolved` for the one resumed plan (same system, layout and launcher kind). `bench`:
    the Benchmark the command line named, if it named one (the saved plan must be of it)."""
    import benchmarks
    from harness.resolve import systems
    from harness.resolve.runplans import Resolved, choose_launcher

    saved = Path(run_dir) / "plan.json"
    if bench is not None and saved.is_file():
        was = RunPlan.load(saved).benchmark
        if bench.name != was:
            raise ConfigError(f"--resume {run_dir}: that run is {was}, not {bench.name}")
    plan = resume_plan(run_dir, apply=apply)
    bench = benchmarks.get(plan.benchmark)  # the saved plan: the one name read from disk
    spec = systems.load(plan.submission.system)
    if spec.accelerators_per_node != plan.layout.procs_per_node:
        spec = spec.with_overrides(accelerators_per_node=plan.layout.procs_per_node)
    kind = choose_launcher(launcher, spec, plan.layout.world_size)
    step = Path(plan.resume_from).name.removeprefix("step_").lstrip("0") or "0"
    notes = [f"resuming {plan.run_dir} from the checkpoint at step {step}"]
    return Resolved([plan], spec, bench, [f"resume: {Path(plan.run_dir) / 'plan.json'}"], kind, notes)
