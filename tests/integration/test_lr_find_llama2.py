"""`mlperf lr-find llama2_70b_lora --system cpu-local`: the tiny LoRA swept through training's own
model, AdamW and step (reference_impls/llama2_70b_lora/lr_find.py), a suggestion inside the swept
range and near the calibrated LR, and nothing written into the submission tree."""

from __future__ import annotations

import json
import time

import pytest
from helpers import env, prepared_once

pytestmark = pytest.mark.slow  # prepares data (~20 s, shared with test_llama2_tiny) and trains


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepared_once(tmp_path_factory, "llama2-data", "llama2_70b_lora")


def test_lr_find_llama2_suggests_an_lr_inside_the_sweep(mlperf, tmp_path, data):
    results = tmp_path / "results"
    t0 = time.monotonic()
    args = ["lr-find", "llama2_70b_lora", "--system", "cpu-local", "--results-dir", str(results)]
    r = mlperf(*args, "--data-dir", str(data), "--json", env=env())
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["steps_run"] == 100 and doc["lrs"] == sorted(doc["lrs"])  # the default: 100 steps
    assert doc["lrs"][0] == pytest.approx(1e-5) and doc["lrs"][-1] <= 1.0
    lr = doc["suggested_lr"]
    assert doc["lrs"][0] < lr < doc["lrs"][-1] and lr == pytest.approx(doc["lr_at_min"] / 2)
    # the calibrated tiny LR is 4e-3 (configs/tiny.yaml; 1e-2 reached the target no sooner)
    assert doc["configured_lr"] == 4e-3 and 1e-3 < lr < 2e-2, lr
    with open(doc["png"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    written = {p.relative_to(results).parts[0] for p in results.rglob("*") if p.is_file()}
    assert written == {"lr-find"} and not list(results.rglob("result_*.txt"))
    assert took < 90, took  # ~13 s on an idle 2-core host (25 s beside other work): a hang shows
