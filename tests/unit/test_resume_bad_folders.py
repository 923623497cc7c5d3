"""`mlperf run --resume DIR` on a run folder someone damaged: one `error:` line, exit 2, no
traceback, and the folder as it was (issue 22). Each case crashed with exit 1 before: a truncated
plan.json (JSONDecodeError), a plan without its layout (pydantic's multi-line error), the plan's
log_path a folder (IsADirectoryError), a manifest whose file entry is a number (AttributeError) or
holds a 5,000-digit number (ValueError)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import make_plan

from harness.core.checkpoint_manifest import FORMAT, MANIFEST, VERSION, rank_file, step_dir
from harness.core.files import sha256_file
from harness.core.runfolder import checkpoint_root


def _run_folder(tmp_path: Path) -> Path:
    """A killed gpt3 run as `mlperf run` leaves it: plan.json, a log up to a block, one good
    checkpoint (its manifest in the real format, hashes included)."""
    plan = make_plan("gpt3", tmp_path, seed=1)
    run = Path(plan.run_dir)
    head = {"namespace": "", "event_type": "INTERVAL_START", "value": None, "metadata": {}}
    lines = [{**head, "time_ms": 1, "key": "init_start"}, {**head, "time_ms": 2, "key": "run_start"}]
    Path(plan.log_path).write_text("".join(f":::MLLOG {json.dumps(x)}\n" for x in lines))
    ckpt = step_dir(checkpoint_root(run), 24)
    ckpt.mkdir(parents=True)
    (ckpt / rank_file(0)).write_bytes(b"state")
    files = {rank_file(0): {"bytes": 5, "sha256": sha256_file(ckpt / rank_file(0))}}
    manifest = {"format": FORMAT, "version": VERSION, "step": 24, "world_size": 1, "files": files}
    (ckpt / MANIFEST).write_text(json.dumps(manifest))
    return run


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode() + (p.read_bytes() if p.is_file() else b"/"))
    return h.hexdigest()


def _edit_json(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _manifest(run: Path) -> Path:
    return step_dir(checkpoint_root(run), 24) / MANIFEST


DAMAGE = {
    "truncated plan.json": (
        lambda run: (run / "plan.json").write_text((run / "plan.json").read_text()[:200]),
        "plan.json: not JSON",
    ),
    "plan without its layout": (
        lambda run: _edit_json(run / "plan.json", lambda d: d.pop("layout")),
        "plan.json: field 'layout': Field required",
    ),
    "plan.json a JSON list": (lambda run: (run / "plan.json").write_text("[1, 2]"), "found a JSON list"),
    "log_path a folder": (
        lambda run: (run / "mlperf.log").unlink() or (run / "mlperf.log").mkdir(),
        "is not a file (a folder?)",
    ),
    "manifest file entry a number": (
        lambda run: _edit_json(_manifest(run), lambda d: d["files"].update({rank_file(0): 5})),
        "has no byte count",
    ),
    "manifest with a 5000-digit number": (
        lambda run: _manifest(run).write_text(
            _manifest(run).read_text().replace('"step": 24', '"step": ' + "9" * 5000)
        ),
        "unreadable manifest",
    ),
}


def test_the_undamaged_folder_resumes(tmp_path, mlperf):
    run = _run_folder(tmp_path)
    r = mlperf("run", "gpt3", "--resume", str(run), "--dry-run")
    assert r.returncode == 0, r.stderr  # so each case below fails on its damage alone


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_run_folder_is_one_line_exit_2_and_left_as_it_was(tmp_path, mlperf, case):
    damage, message = DAMAGE[case]
    run = _run_folder(tmp_path)
    damage(run)
    before = _digest(run)
    r = mlperf("run", "gpt3", "--resume", str(run))
    assert r.returncode == 2, (r.returncode, r.stderr)
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line and "Traceback" not in r.stderr, line
    assert _digest(run) == before


def test_a_run_that_reached_its_target_is_refused_and_left_as_it_was(tmp_path, mlperf):
    """Resuming a finished run would train it again and rewrite its result: refused, one line."""
    run = _run_folder(tmp_path)
    stop = {"namespace": "", "event_type": "INTERVAL_END", "key": "run_stop", "value": None, "time_ms": 3}
    with (run / "mlperf.log").open("a") as f:
        f.write(f":::MLLOG {json.dumps({**stop, 'metadata': {'status': 'success'}})}\n")
    before = _digest(run)
    r = mlperf("run", "gpt3", "--resume", str(run))
    assert r.returncode == 2, (r.returncode, r.stderr)
    (line,) = r.stderr.strip().splitlines()
    assert "already reached its target; nothing to resume" in line, line
    assert _digest(run) == before
