"""MoE routing statistics: `run_dir/routing.jsonl` (reference_impls/megatron_gpt/routing.py) and
`mlperf diagnose`'s "expert load is unbalanced" finding that reads it.

(a) torch-free: synthetic routing.jsonl files in a gpt_oss_20b run folder; the finding appears at
    busiest/mean 3 (and with torch unimportable), not at 1.2, not without the file (dense models).
(b) in one gloo process of world 1 (a subprocess: megatron's CPU patches are process-wide): the
    tiny gpt_oss_20b built through the family code; one training forward counts tokens x top-k per
    layer (4 layers x 8 experts, top 2), evaluation and no-grad forwards count nothing, the counts
    reset per line; the aux loss and expert bias are read where on; a dense gpt3 hooks nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_probe
from test_torch_free import mlperf_without_torch

import benchmarks
from harness.core.runfolder import ROUTING_FILE
from harness.review.diagnose import diagnose
from harness.run import execute as runner


def _run_folder(tmp_path, ratios: list[float] | None) -> Path:
    """A gpt_oss_20b run folder with 20 timed steps and, unless None, a routing.jsonl of two lines
    whose last has layer 3's busiest expert (5) at ratios[-1] x the mean of 8 experts."""
    plan = runner.make_plans(
        benchmarks.get("gpt_oss_20b"), "cpu-local", "tiny", runs=1, seed=7, results_dir=tmp_path
    )[0]
    rd = Path(plan.run_dir)
    rows = [
        {"step": s, "step_time_s": 0.1, "data_wait_s": 0.001, "samples": 16, "samples_per_s": 160.0}
        for s in range(1, 21)
    ]
    (rd / "timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if ratios is None:
        return rd
    lines = []
    for i, ratio in enumerate(ratios):
        layers = []
        for layer in range(1, 5):
            mean = 1000.0
            top = ratio if layer == 3 else 1.1
            rest = (8 * mean - top * mean) / 7  # the others share what is left: the mean stays 1000
            tokens = [round(rest)] * 8
            tokens[5] = round(top * mean)
            layers.append(
                {"layer": layer, "tokens": tokens, "max_over_mean": top, "expert_bias_absmax": None}
            )
        lines.append({"step": 12 * (i + 1), "layers": layers, "aux_loss": None})
    (rd / ROUTING_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return rd


def _expert_findings(rd):
    return [f for f in diagnose(rd).findings if f.id == "expert_load"]


def test_unbalanced_experts_are_found(tmp_path):
    rd = _run_folder(tmp_path, [1.1, 3.0])
    (f,) = _expert_findings(rd)
    assert f.symptom == "expert load is unbalanced"
    ev = f.evidence
    assert (ev["layer"], ev["expert"], ev["step"]) == (3, 5, 24)
    assert ev["max_over_mean"] == pytest.approx(3.0, abs=0.01)
    assert ev["file"] == str(rd / ROUTING_FILE) and ev["layers_unbalanced"] == "1 of 4"
    text = " ".join(f.remedy)
    assert "moe_aux_loss_coeff" in text and "moe_router_enable_expert_bias" in text
    assert "layer 3" in f.summary and "expert 5" in f.summary and "3.00x" in f.summary
    # the last interval decides: an early imbalance the router has outgrown is no finding
    (rd / ROUTING_FILE).write_text(
        (rd / ROUTING_FILE).read_text()
        + json.dumps({"step": 36, "layers": [{"layer": 3, "tokens": [10] * 8}]})
        + "\n"
    )
    assert _expert_findings(rd) == []


def test_balanced_experts_and_dense_models_are_quiet(tmp_path):
    assert _expert_findings(_run_folder(tmp_path / "balanced", [3.0, 1.2])) == []
    assert _expert_findings(_run_folder(tmp_path / "dense", None)) == []  # no routing.jsonl
    rd = _run_folder(tmp_path / "garbled", [3.0])
    (rd / ROUTING_FILE).write_text(
        '{"step": 3, "layers": [{"tokens": [0, 0]}, "x", {"tokens": ["a"]}]}\n{torn'
    )
    assert _expert_findings(rd) == []  # damaged lines are no finding and no crash


def test_the_finding_needs_no_torch(tmp_path):
    rd = _run_folder(tmp_path, [3.0])
    r = mlperf_without_torch("diagnose", str(rd), "--json")
    assert r.returncode == 0 and "LOADED []" in r.stderr, r.stderr[-3000:]
    assert "expert_load" in {f["id"] for f in json.loads(r.stdout)["findings"]}


_PROBE = """
import json, sys, torch
import benchmarks
from harness.core.layout import derive
from harness.core.schema import load_yaml
from harness.train.runtime import init_one_process_group
from reference_impls.megatron_gpt import model as gm, train
from reference_impls.megatron_gpt.routing import RoutingStats

init_one_process_group("gloo")
out, ready = {}, False

def build(bench, **over):
    global ready
    b = benchmarks.get(bench)
    cfg = b.config.model_validate({**load_yaml(b.configs_dir / "tiny.yaml")["config"], **over})
    lay = derive(cfg, 1, 1, num_layers=cfg.num_layers, supports=type(cfg).SUPPORTS)
    if not ready:
        train.init_parallel(lay, 1)
        ready = True
    torch.manual_seed(1)
    return cfg, gm.build(cfg, lay, "cpu")[0]

def forward(model, cfg, batch=2):
    tokens = torch.randint(0, cfg.vocab_size, (batch, cfg.max_sequence_length))
    pos = torch.arange(cfg.max_sequence_length).expand(batch, -1)
    return model[0](tokens, pos, None, labels=tokens)

def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]

root = __import__("pathlib").Path(sys.argv[1])
for key, over in (("plain", {}), ("balanced", {"moe_aux_loss_coeff": 0.01, "moe_router_enable_expert_bias": True,
                                                "moe_router_score_function": "sigmoid"})):
    cfg, model = build("gpt_oss_20b", **over)
    (root / key).mkdir()
    stats = RoutingStats(model, root / key)
    forward(model, cfg)                    # a training forward (grad on): counted
    with stats.paused():
        forward(model, cfg)                # evaluation: paused
    with torch.no_grad():
        forward(model, cfg)                # no grad (the first pass of a recomputed layer)
    stats.write(5)
    stats.write(6)                         # nothing since: counts were reset
    out[key] = lines(root / key / "routing.jsonl")
    out[key + "_topk"] = cfg.moe_router_topk
cfg, dense = build("gpt3")
stats = RoutingStats(dense, root / "dense")
(root / "dense").mkdir()
forward(dense, cfg)
stats.write(1)
out["dense"] = [stats.active, (root / "dense" / "routing.jsonl").exists()]
train._teardown()
print("PROBE" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    root = tmp_path_factory.mktemp("routing")
    return run_probe(_PROBE, str(root))


def test_one_forward_counts_tokens_times_topk_per_layer(probe):
    first, second = probe["plain"]
    tokens = 2 * 64  # batch 2 x sequence 64: one training forward (not the paused or no-grad ones)
    assert first["step"] == 5 and [x["layer"] for x in first["layers"]] == [1, 2, 3, 4]
    for lay in first["layers"]:
        assert len(lay["tokens"]) == 8 and sum(lay["tokens"]) == tokens * probe["plain_topk"], lay
        assert max(lay["tokens"]) <= tokens  # a token goes to an expert at most once
        assert lay["max_over_mean"] == pytest.approx(max(lay["tokens"]) * 8 / sum(lay["tokens"]), abs=1e-3)
        assert lay["expert_bias_absmax"] is None
    assert first["aux_loss"] is None  # tiny gpt_oss_20b: moe_aux_loss_coeff 0
    assert second["step"] == 6 and all(
        sum(x["tokens"]) == 0 and x["max_over_mean"] is None for x in second["layers"]
    )


def test_aux_loss_and_expert_bias_are_read_where_on(probe):
    first, second = probe["balanced"]
    assert all(sum(x["tokens"]) == 2 * 64 * 2 for x in first["layers"])
    assert first["aux_loss"] is not None and 0.5 < first["aux_loss"] < 8  # E * sum(f_i p_i): ~1 when even
    assert all(isinstance(x["expert_bias_absmax"], float) for x in first["layers"])
    assert second["aux_loss"] is None  # the tracker was read and cleared, nothing recorded since


def test_a_dense_model_hooks_nothing(probe):
    assert probe["dense"] == [False, False]
