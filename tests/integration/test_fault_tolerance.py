"""Signals, kill -9 + --resume, and concurrent result claiming, through the real executor and
launcher with the toy entry (tests/toy_train.py; the gpt3 versions are in test_gpt3_resume.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core import tree
from harness.core.mllog_reader import read_events

REPO = Path(__file__).resolve().parents[2]


def _driver(results: Path, *extra: str, **env) -> subprocess.Popen:
    full = dict(os.environ, **{k: str(v) for k, v in env.items()})
    return subprocess.Popen(
        [sys.executable, "-m", "tests.toy_run", str(results), *extra],
        cwd=REPO,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(pred, timeout=60.0, proc=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"driver exited early: {proc.returncode} {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError("timed out")


def _run_dir(results: Path) -> Path:
    dirs = list((results / "runs" / "toy" / "cpu-local").glob("*"))  # the toy benchmark (tests/toy_train.py)
    return dirs[0] if dirs else None


def _keys(log: Path) -> list[str]:
    return [e["key"] for e in read_events(log)]


def _result_folder(results: Path) -> Path:
    from harness.resolve import systems

    return tree.result_dir(results, systems.load("cpu-local").submitter, "cpu-local", "gpt3")


def test_sigterm_stops_at_step_boundary_logs_aborted_exits_130(tmp_path, sig=signal.SIGTERM):
    """SIGTERM to `mlperf run` (kill, scancel, a CI timeout) takes the Ctrl-C path. (SIGINT is
    tested on real 2-rank gpt3 in test_gpt3_resume.py.)"""
    ready = tmp_path / "ready"
    p = _driver(tmp_path / "results", TOY_STEPS=100000, TOY_READY_FILE=ready)
    _wait_for(ready.exists, proc=p)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (out, err)
    run = _run_dir(tmp_path / "results")
    log = run / "mlperf.log"
    keys = _keys(log)
    assert keys.count("run_start") == 1 and keys.count("run_stop") == 1 and keys[-1] == "run_stop"
    stop = read_events(log)[-1]
    assert stop["metadata"]["status"] == "aborted"
    assert "error" not in stop["metadata"]  # the training process logged it, not the runner
    # The training process itself exited 130 at a step boundary: every started step finished.
    seen = [int(x) for x in (run / "seen.txt").read_text().split()]
    timings = [json.loads(x)["step"] for x in (run / "timings.jsonl").read_text().splitlines()]
    assert seen == timings == list(range(1, len(seen) + 1))
    assert "exited with code" not in log.read_text()
    # Claimed as an aborted result: an interrupted run never looks complete.
    results = sorted(_result_folder(tmp_path / "results").glob("result_*.txt"))
    assert [r.name for r in results] == ["result_0.txt"]
    assert read_events(results[0])[-1]["metadata"]["status"] == "aborted"


def _kill_whole_run(p: subprocess.Popen, run: Path) -> None:
    """kill -9 of `mlperf run` and its training process (its own session): nothing finalizes."""
    child = int((run / "toy.pid").read_text())
    os.kill(p.pid, signal.SIGKILL)
    os.killpg(child, signal.SIGKILL)
    p.communicate(timeout=30)


def _ckpt(run: Path, step: int) -> Path:
    return run / "checkpoints" / f"step_{step:08d}"


def test_kill9_then_resume_reaches_target_log_honest(tmp_path, corrupt_newest=True):
    """kill -9 of the whole run; the newest checkpoint is then corrupted: resume falls back to the
    previous one (resuming from the newest is covered by the next test)."""
    results = tmp_path / "results"
    env = {"TOY_STEPS": 60, "TOY_CKPT_EVERY": 10, "TOY_STEP_S": 0.03}
    p = _driver(results, **env)
    _wait_for(lambda: _run_dir(results) is not None and _ckpt(_run_dir(results), 20).exists(), proc=p)
    run = _run_dir(results)
    time.sleep(0.2)  # a few steps past the checkpoint: work that will be redone
    _kill_whole_run(p, run)
    log = run / "mlperf.log"
    before = log.read_bytes()
    assert b'"run_stop"' not in before  # an interrupted run never looks complete ...
    assert not list(_result_folder(results).glob("result_*.txt"))  # ... and is never claimed
    steps = sorted(s for s in (run / "checkpoints").iterdir() if s.name.startswith("step_"))
    newest = int(steps[-1].name.split("_")[1])
    expect = newest
    if corrupt_newest:
        f = steps[-1] / "rank_00000.pt"
        f.write_bytes(f.read_bytes()[:-7] + b"garbage")
        expect = int(steps[-2].name.split("_")[1])
    killed_at = int((run / "seen.txt").read_text().split()[-1])

    p = _driver(results, "--resume", str(run), **env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    res = json.loads(out.strip().splitlines()[-1])[0]
    assert res["status"] == "success"
    events = read_events(log)
    keys = [e["key"] for e in events]
    for k in ("run_start", "run_stop", "init_start", "init_stop", "submission_org", "harness_resumed"):
        assert keys.count(k) == 1, (k, keys)
    resumed = events[keys.index("harness_resumed")]
    assert resumed["value"] == expect
    assert resumed["metadata"]["lost_ms"] > 0
    # Nothing logged before the checkpoint is lost: the old log up to the checkpoint is a prefix.
    record = json.loads((run / "resume.json").read_text())["resumes"][-1]
    assert record["checkpoint_step"] == expect and bool(record["skipped_checkpoints"]) == corrupt_newest
    kept = log.read_bytes()
    tail = (run / record["discarded_file"]).read_bytes() if record["discarded_file"] else b""
    assert before == kept[: len(before) - len(tail)] + tail
    # No eval logged twice; progress is monotonic.
    evals = [e["metadata"]["epoch_num"] for e in events if e["key"] == "eval_accuracy"]
    assert evals == sorted(set(evals)) and evals[-1] == 60
    # Time-to-train counts from the original run_start (includes the lost time).
    start = events[keys.index("run_start")]["time_ms"]
    assert events[-1]["time_ms"] - start >= resumed["metadata"]["lost_ms"]
    # Data: each step seen once, except the steps after the checkpoint that the kill undid.
    seen = [int(x) for x in (run / "seen.txt").read_text().split()]
    twice = sorted({s for s in seen if seen.count(s) > 1})
    assert all(seen.count(s) <= 2 for s in seen)
    assert twice == list(range(expect + 1, killed_at + 1))
    assert sorted(set(seen)) == list(range(1, 61))
    assert [r.name for r in _result_folder(results).glob("result_*.txt")] == ["result_0.txt"]


def test_resume_keeps_the_result_number_of_the_aborted_attempt(tmp_path):
    """Training killed, runner alive: it appends run_stop aborted and claims result_0; the resumed
    run then takes over result_0 (atomic replace) instead of adding result_1."""
    results = tmp_path / "results"
    env = {"TOY_STEPS": 40, "TOY_CKPT_EVERY": 10, "TOY_STEP_S": 0.03}
    other = _result_folder(results)
    other.mkdir(parents=True)
    p = _driver(results, **env)
    _wait_for(lambda: _run_dir(results) is not None and _ckpt(_run_dir(results), 10).exists(), proc=p)
    run = _run_dir(results)
    from harness.core.errors import ConfigError
    from harness.run import resume

    with pytest.raises(ConfigError, match="still being trained"):  # two runs in one log: refused
        resume.resume_plan(run)
    os.killpg(int((run / "toy.pid").read_text()), signal.SIGKILL)
    p.communicate(timeout=30)
    assert p.returncode == 3
    r0 = other / "result_0.txt"
    assert read_events(r0)[-1]["metadata"]["status"] == "aborted"
    p = _driver(results, "--resume", str(run), **env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    assert sorted(x.name for x in other.glob("result_*.txt")) == ["result_0.txt"]
    ev = read_events(r0)
    assert [e["key"] for e in ev].count("run_stop") == 1 and ev[-1]["metadata"]["status"] == "success"
    assert os.path.samefile(r0, run / "mlperf.log")
    assert "run_stop" in json.loads((run / "resume.json").read_text())["resumes"][0]["discarded_keys"]


_CLAIMER = """
import sys, os, time
from pathlib import Path
from harness.run.claim import claim_result
folder, tag, n, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
while not go.exists():
    time.sleep(0.001)
for i in range(n):
    log = go.parent / f"run-{tag}-{i}.log"
    log.write_text(f"{tag} {i}\\n")
    print(claim_result(log, folder).name)
"""


def test_concurrent_writers_never_clobber_or_renumber(tmp_path):
    folder = tmp_path / "harness" / "results" / "sys" / "gpt3"
    go = tmp_path / "go"
    n = 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CLAIMER, str(folder), tag, str(n), str(go)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b", "c")
    ]
    time.sleep(0.3)
    go.touch()
    claimed = {}
    for tag, p in zip(("a", "b", "c"), procs):
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        claimed[tag] = out.split()
    names = [x for v in claimed.values() for x in v]
    assert len(names) == len(set(names)) == 3 * n  # no name handed out twice
    assert sorted(tree.existing_results(folder)) == list(range(3 * n))  # dense: nothing renumbered
    for tag, mine in claimed.items():  # every file still holds the log its claimer linked
        for i, name in enumerate(mine):
            assert (folder / name).read_text() == f"{tag} {i}\n"
