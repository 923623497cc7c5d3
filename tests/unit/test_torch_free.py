"""The review and analysis side works where torch cannot be imported at all (a reviewer's laptop,
an analyst's notebook): `check`, `results score`, `diagnose`, `plan` and `run --dry-run` run with
every import of torch (and of the libraries built on it) refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "tests" / "data" / "tiny_tree"
LOG = TREE / "MyOrg" / "results" / "cpu-local" / "gpt3" / "result_0.txt"

_BLOCKED = ("torch", "megatron", "transformers", "peft", "torch_geometric", "diffusers", "accelerate")
_RUN = f"""
import importlib.abc, runpy, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {_BLOCKED!r}:
            raise ImportError(f"{{name}} is unimportable in this test")
        return None

sys.meta_path.insert(0, NoTorch())
sys.argv = ["mlperf", *sys.argv[1:]]
try:
    runpy.run_module("harness.cli", run_name="__main__")
finally:
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in {_BLOCKED!r})
    print("LOADED", loaded, file=sys.stderr)
"""


def mlperf_without_torch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


@pytest.mark.parametrize(
    "args,code",
    [
        (("check", str(TREE / "MyOrg" / "results" / "cpu-local" / "gpt3"), "--json"), 0),
        (("results", "score", str(TREE), "--json"), 0),
        (("diagnose", str(LOG), "--json"), 0),
        (("plan", "gpt3", "--system", "dgx-h100x64", "--json"), 0),
        (("run", "gpt3", "--system", "dgx-h100x64", "--dry-run", "--json", "--seed", "1"), 0),
    ],
    ids=["check", "results-score", "diagnose", "plan", "run-dry-run"],
)
def test_review_and_planning_commands_run_with_torch_unimportable(args, code):
    r = mlperf_without_torch(*args)
    assert r.returncode == code, r.stderr[-3000:]
    assert "LOADED []" in r.stderr, r.stderr[-3000:]
    json.loads(r.stdout)  # a complete JSON answer, not a partial one


def test_the_blocker_really_refuses_torch():
    prelude = _RUN.split("sys.argv =")[0]
    r = subprocess.run([sys.executable, "-c", prelude + "import torch\n"], capture_output=True, text=True)
    assert r.returncode != 0 and "torch is unimportable in this test" in r.stderr
