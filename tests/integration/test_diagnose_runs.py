"""`mlperf diagnose` on real runs (the toy entry through the real executor, launcher and log):
a healthy run is quiet; injected stalls, a throttled loader, LR x100 and a batch too big for a
memory cap each show up as their finding. (Synthetic cases per detector: tests/unit/test_diagnose.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks
from harness.review.diagnose import diagnose

pytestmark = pytest.mark.slow  # trains or starts rank processes: not in the -m 'not slow' loop

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path, **env) -> Path:
    full = dict(os.environ, **{k: str(v) for k, v in env.items()})
    r = subprocess.run(
        [sys.executable, "-m", "tests.toy_run", str(tmp_path)],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode in (0, 3), r.stderr
    return Path(json.loads(r.stdout.strip().splitlines()[-1])[0]["run_dir"])


@pytest.fixture(autouse=True)
def toy():
    """The runs below are of the toy benchmark: diagnose looks its rules and config up by name."""
    from tests.toy_train import TOY

    with benchmarks.scratch():
        benchmarks.register(TOY)
        yield


def test_healthy_then_symptoms_on_real_runs(tmp_path):
    healthy = _run(tmp_path / "healthy", TOY_STEPS=40, TOY_STEP_S=0.03)
    rep = diagnose(healthy)
    assert rep.findings == [] and rep.steps == 40 and rep.status == "success"

    sick = _run(
        tmp_path / "sick",
        TOY_STEPS=60,  # 10 periodic stalls: a loaded host's own stalls leave the period found
        TOY_STEP_S=0.03,
        TOY_STALL_EVERY=6,
        TOY_STALL_S=0.3,
        TOY_DATA_WAIT_S=0.04,
        TOY_LR=5.0,
    )  # LR x100
    found = {f.id: f for f in diagnose(sick).findings}
    assert set(found) == {"unstable_speed", "data_loading", "learning_rate"}, found
    assert found["unstable_speed"].evidence["stall_every_steps"] == 6
    assert found["learning_rate"].extra["kind"] in ("diverging", "diverged")

    oom = _run(tmp_path / "oom", TOY_STEPS=40, TOY_MEM_CAP_MB=200, TOY_BATCH_MB=1024)
    (f,) = diagnose(oom).findings
    assert f.id == "out_of_memory" and "allocate" in f.evidence["error"]
    assert "micro_batch_size=8" in "\n".join(f.remedy)  # tiny gpt3 plan: MBS 16 -> 8, same GBS 16
