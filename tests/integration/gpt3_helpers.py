"""Shared by the gpt3 integration tests: one prepared tiny data dir per pytest session, plans
from the harness's own planner, and the official checker with the tiny rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY_RULES = REPO / "benchmarks" / "tiny_common.yaml"


def env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))


def make_plan(tmp_path: Path, data_dir: Path, seed: int, nproc: int | None = None, sets=()):
    from harness.runner import make_plans

    return make_plans(
        "gpt3",
        "cpu-local",
        size="tiny",
        runs=1,
        seed=seed,
        results_dir=tmp_path / "results",
        sets=list(sets),
        nproc_per_node=nproc,
        data_dir=data_dir,
    )[0]


def prepared_data_dir(tmp_path_factory) -> Path:
    """Prepare once per session (shared by every gpt3 test module; ~10 s)."""
    data_dir = tmp_path_factory.getbasetemp() / "gpt3-tiny-data"
    plan = make_plan(tmp_path_factory.getbasetemp() / "gpt3-prepare", data_dir, seed=0)
    from reference_impls.gpt3 import manifest

    if not manifest.is_prepared(plan):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "reference_impls.gpt3.prepare",
                "--plan",
                str(Path(plan.run_dir) / "plan.json"),
            ],
            env=env(),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    return data_dir


def train(plan, nproc: int = 1, timeout: float = 600) -> subprocess.CompletedProcess:
    plan_json = str(Path(plan.run_dir) / "plan.json")
    if nproc == 1:
        argv = [sys.executable, "-m", "reference_impls.gpt3", "--plan", plan_json]
    else:
        argv = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "reference_impls.gpt3",
            "--plan",
            plan_json,
        ]
    return subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=timeout, cwd=REPO)


def events(log_path) -> list[dict]:
    out = []
    for line in Path(log_path).read_text().splitlines():
        if ":::MLLOG " in line:
            out.append(json.loads(line.split(":::MLLOG ", 1)[1]))
    return out


def official_check(log_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
            "--ruleset",
            "4.0.0",
            "--config",
            str(TINY_RULES.resolve()),
            "--log_output",
            os.devnull,
            str(log_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
