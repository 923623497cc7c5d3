"""llama2_70b_lora: config arithmetic, plans for the record systems, the fused-QKV model and its
checkpoint loader, the data format, and bad input (one line, exit 2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_plan, run_entry, typed_config

import benchmarks
from benchmarks.llama2_70b_lora.config import Llama2LoraConfig
from harness.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
TINY = dict(
    num_layers=2,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=64,
    max_sequence_length=16,
    precision="fp32",
)


def test_tiny_rules_keep_the_literal_lora_rank():
    """(The tiny target equals the tiny window: tests/unit/test_rulesets_per_benchmark.py.)"""
    from benchmarks.tiny_rules import closed_values

    for rs in ("4.0.0", "6.1.0"):
        assert closed_values(benchmarks.get("llama2_70b_lora"), rs, "tiny")["lora_rank"][0] == (16,)


@pytest.mark.parametrize("gbs,skip,interval", [(8, 3, 48), (16, 4, 24), (48, 8, 8), (128, 18, 3)])
def test_eval_cadence_follows_the_rules(gbs, skip, interval):
    c = Llama2LoraConfig(global_batch_size=gbs)
    assert (c.skip_evals, c.eval_interval_steps) == (skip, interval)


def test_cosine_schedule_and_warmup():
    c = Llama2LoraConfig(opt_base_learning_rate=4e-4, opt_learning_rate_training_steps=100)
    assert c.lr_at(0) == pytest.approx(4e-4) and c.lr_at(50) == pytest.approx(2e-4) and c.lr_at(100) == 0
    w = Llama2LoraConfig(opt_learning_rate_warmup_factor=0.1, opt_learning_rate_training_steps=100)
    assert (
        w.warmup_steps == 10
        and w.lr_at(4) == pytest.approx(4e-4 * 5 / 10)
        and w.lr_at(10) == pytest.approx(4e-4)
    )
    assert Llama2LoraConfig().max_steps == 1024


@pytest.mark.parametrize(
    "system,dp,cp,gbs,lr,steps",
    [
        ("dgx-h100x1", 8, 1, 8, 5e-4, 896),
        ("dgx-h200x1", 8, 1, 8, 5e-4, 1024),
        ("dgx-h100x8", 64, 1, 64, 6e-4, 1024),
    ],
)
def test_full_size_plans_for_the_record_systems(system, dp, cp, gbs, lr, steps):
    from harness.run.execute import resolve

    r = resolve(benchmarks.get("llama2_70b_lora"), system, runs=1, seed=1)
    p = r.plans[0]
    assert p.size == "full" and p.target == {"eval_loss": 0.925}
    assert (p.layout.dp, p.layout.cp, p.layout.tp, p.layout.global_batch_size, p.layout.grad_accum) == (
        dp,
        cp,
        1,
        gbs,
        1,
    )
    cfg = typed_config(p)
    assert (cfg.opt_base_learning_rate, cfg.opt_learning_rate_training_steps) == (lr, steps)
    assert (cfg.lora_rank, cfg.lora_alpha, cfg.max_sequence_length, cfg.num_layers) == (16, 32, 8192, 80)
    # bf16, not FP8: the only GPU measurement had torchao FP8 1.9x slower (docs/gpu/speed_evidence.yaml)
    assert not cfg.fp8 and cfg.activation_checkpointing and cfg.precision == "bf16"
    assert cfg.skip_evals == int(0.125 * gbs + 2)


def test_fixed_hyperparameter_override_is_refused_in_one_line(mlperf):
    r = mlperf("run", "llama2_70b_lora", "--system", "dgx-h100x1", "--set", "lora_rank=8", "--dry-run")
    assert r.returncode == 2
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "lora_rank" in lines[0] and "fixed" in lines[0]


def test_tensor_parallelism_is_refused():
    from harness.run.execute import resolve

    with pytest.raises(ConfigError, match="tensor_model_parallel_size"):
        resolve(
            benchmarks.get("llama2_70b_lora"),
            "dgx-h100x1",
            runs=1,
            seed=1,
            sets=("tensor_model_parallel_size=4",),
        )


def test_fused_qkv_attention_matches_split_llama_and_lora_targets():
    import torch
    from transformers import LlamaForCausalLM

    from reference_impls.llama2_70b_lora import model as M

    cfg = Llama2LoraConfig(**TINY)
    torch.manual_seed(0)
    ref = LlamaForCausalLM(M.llama_config(cfg)).eval()
    fused = M.build_base(cfg).eval()
    sd = ref.state_dict()
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}.self_attn."
        sd[p + "qkv_proj.weight"] = torch.cat(
            [sd.pop(p + n + ".weight") for n in ("q_proj", "k_proj", "v_proj")]
        )
    fused.load_state_dict(sd)
    x = torch.randint(0, 64, (2, 16))
    assert torch.allclose(ref(input_ids=x).logits, fused(input_ids=x).logits, atol=1e-5)
    peft = M.apply_lora(fused, cfg)
    names = [n for n, p in peft.named_parameters() if p.requires_grad]
    assert names and all((".qkv_proj.lora_" in n or ".o_proj.lora_" in n) for n in names)
    assert len(names) == 4 * cfg.num_layers  # A and B on qkv_proj and o_proj per layer


def test_checkpoint_loader_fuses_split_qkv(tmp_path):
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    from reference_impls.llama2_70b_lora import checkpoint as C
    from reference_impls.llama2_70b_lora import model as M

    cfg = Llama2LoraConfig(**TINY)
    ref = LlamaForCausalLM(M.llama_config(cfg)).eval()
    (tmp_path / "config.json").write_text(json.dumps(ref.config.to_dict(), default=str))
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(tmp_path / "model.safetensors"))
    fused = M.build_base(cfg)
    C.load_base_weights(fused, tmp_path)
    x = torch.randint(0, 64, (1, 16))
    assert torch.allclose(ref(input_ids=x).logits, fused.eval()(input_ids=x).logits, atol=1e-5)
    C.check_checkpoint_config(tmp_path, cfg)
    with pytest.raises(ConfigError, match="hidden_size=64"):
        C.check_checkpoint_config(tmp_path, Llama2LoraConfig(**{**TINY, "hidden_size": 128}))


def test_missing_checkpoint_dir_is_one_line(tmp_path):
    from reference_impls.llama2_70b_lora import checkpoint as C

    with pytest.raises(ConfigError, match=r"base checkpoint directory .* does not exist") as e:
        C.checkpoint_files(tmp_path / "nope")
    assert "\n" not in str(e.value)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="no \\*.safetensors"):
        C.checkpoint_files(tmp_path / "m")


def test_dataset_columns_and_missing_files(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reference_impls.llama2_70b_lora import data

    cfg = Llama2LoraConfig(**TINY)
    with pytest.raises(ConfigError, match="train-00000-of-00001.parquet is missing"):
        data.dataset_files(tmp_path, cfg)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"text": ["a"], "labels": [[1]]}), bad)
    with pytest.raises(ConfigError, match="missing column\\(s\\) input_ids"):
        data.check_columns(bad)
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(ConfigError, match="not a readable parquet"):
        data.check_columns(tmp_path / "junk.parquet")
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"input_ids": [[5, 6, 7], [8, 9]], "labels": [[-100, 6, 7], [-100, 9]]}), good)
    ids, labels = data.load_split(good, 4)
    assert ids.tolist() == [[5, 6, 7, 0], [8, 9, 0, 0]]
    assert data.shift_labels(labels).tolist() == [[6, 7, -100, -100], [9, -100, -100, -100]]


def test_batch_order_is_deterministic_and_split_over_ranks():
    from harness.train.batch_order import BatchOrder

    a, b = BatchOrder(10, 4, seed=3), BatchOrder(10, 4, seed=3)
    assert a.global_batch(2).tolist() == b.global_batch(2).tolist()
    seen = [i for s in range(5) for i in a.global_batch(s).tolist()]
    assert sorted(seen[:10]) == list(range(10)) and sorted(seen[10:20]) == list(range(10))
    assert a.rank_batch(1, 1, 2).tolist() == a.global_batch(1)[2:].tolist()


def _tiny_plan(tmp_path, data_dir):
    return make_plan("llama2_70b_lora", tmp_path, seed=5, data_dir=data_dir)


def test_manifest_is_torch_free_and_detects_unprepared(tmp_path):
    code = "import sys, benchmarks; benchmarks.get('llama2_70b_lora').impl.data; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0
    from benchmarks.llama2_70b_lora import DATA

    assert not DATA.is_prepared(_tiny_plan(tmp_path, tmp_path / "data"))


def test_entrypoint_exits_2_with_one_line_when_the_checkpoint_is_missing(tmp_path):
    from reference_impls.llama2_70b_lora import data
    from reference_impls.llama2_70b_lora.prepare import write_split

    plan = _tiny_plan(tmp_path, tmp_path / "data")
    ds = tmp_path / "data" / "gov_report"
    rows = [([1, 5, 3, 7, 2], [-100, -100, -100, 7, 2])] * 4
    write_split(ds / data.TRAIN_FILE, rows)
    write_split(ds / data.EVAL_FILE, rows)
    r = run_entry(
        "reference_impls.llama2_70b_lora", plan, timeout=300, env=dict(os.environ, HF_HUB_OFFLINE="1")
    )
    assert r.returncode == 2, r.stderr[-2000:]
    err = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "base checkpoint directory" in err[0] and "does not exist" in err[0]


def test_context_parallel_is_accepted_and_the_sequence_must_split_into_2cp_chunks(mlperf):
    """CP 2 on 2 CPU ranks resolves (DP = world / CP); S not divisible by 2 x CP is one line."""
    r = mlperf(
        "run", "llama2_70b_lora", "--nproc-per-node", "2", "--set", "context_parallel_size=2", "--dry-run"
    )
    assert r.returncode == 0 and "CP 2 x DP 1" in r.stdout, r.stdout[-2000:] + r.stderr
    assert "context_parallelism=2" in r.stdout
    r = mlperf(
        "run", "llama2_70b_lora", "--nproc-per-node", "5", "--set", "context_parallel_size=5", "--dry-run"
    )
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "max_sequence_length 96 is not divisible by 2 x context_parallel_size = 10" in lines[0]


def test_context_parallel_chunks_are_load_balanced_and_the_mask_is_causal_in_global_positions():
    """S 8 at CP 2: rank 0 holds chunks 0 and 3 (positions 0 1 6 7), rank 1 chunks 1 and 2; the
    gathered rows (rank 0's, then rank 1's) go back to global order; a query sees keys <= itself."""
    import torch

    from reference_impls.llama2_70b_lora.context_parallel import ContextParallel

    tables = [ContextParallel(None, r, 2)._tables(8, "cpu") for r in (0, 1)]
    assert tables[0][0].tolist() == [0, 1, 6, 7] and tables[1][0].tolist() == [2, 3, 4, 5]
    gathered = torch.cat([tables[0][0], tables[1][0]])
    assert gathered[tables[0][1]].tolist() == list(range(8))
    mask = tables[0][2][0, 0]
    assert mask.shape == (4, 8) and mask.sum(1).tolist() == [1, 2, 7, 8]
    assert mask[2].tolist() == [True] * 7 + [False]  # position 6 sees 0..6, not 7
    with pytest.raises(ValueError, match="not divisible by 2 x CP = 4"):
        ContextParallel(None, 0, 2).positions(10, "cpu")


def test_1024_gpus_get_the_planners_context_parallel_layout(mlperf):
    """Without CP, 1,024 GPUs need GBS >= 1024, beyond the RCPs (<= 128); with CP the planner's best
    layout is CP 8 x DP 128 at GBS 128, which dgx-h100x128's config ships (NVIDIA's v6.0 1,024-GPU
    result: TP 4 x CP 4). Fails if the config and the planner part ways."""
    r = mlperf("plan", "llama2_70b_lora", "--system", "dgx-h100x128", "--json")
    assert r.returncode == 0, r.stderr
    best = json.loads(r.stdout)["best"]["layout"]
    assert (best["cp"], best["dp"], best["gbs"]) == (8, 128, 128), best
    r = mlperf("run", "llama2_70b_lora", "--system", "dgx-h100x128", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "CP 8 x DP 128; GBS 128" in r.stdout and "configs/dgx-h100x128.yaml" in r.stdout


def test_gpu_benchmark_script_runs_on_cpu_at_a_small_width():
    """bench/gpu_llama2_lora_fp8.py can't run here at 70B width; its code path runs at a small one."""
    from types import SimpleNamespace

    sys.path.insert(0, str(REPO / "bench"))
    import gpu_llama2_lora_fp8 as g

    args = SimpleNamespace(
        layers=1,
        seq=32,
        batch=1,
        steps=2,
        warmup=1,
        device="cpu",
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
    )
    r = g.measure(args, fp8=False)
    assert r["loss_finite"] and r["tokens_per_s"] > 0 and r["steps"] == 2


def test_eval_splits_rows_over_dp_ranks_with_equal_forward_counts():
    """173 eval rows over 8 ranks is uneven; every rank must still run the same forwards (FSDP)."""
    from types import SimpleNamespace

    import torch

    from reference_impls.llama2_70b_lora import model as M
    from reference_impls.llama2_70b_lora import train

    cfg = Llama2LoraConfig(**TINY)
    model = M.build_base(cfg)
    calls = []
    model.register_forward_hook(lambda m, a, o: calls.append(1))
    ids = torch.randint(4, 64, (3, 16))
    labels = ids.clone()
    labels[:, :8] = -100

    def ev(dp, rank):
        calls.clear()
        mesh = SimpleNamespace(dp=dp, dp_rank=rank, dp_group=None)
        return train.evaluate(model, ids, labels, mesh, cfg, "cpu"), len(calls)

    (full, n1), (r0, n_r0), (r1, n_r1) = ev(1, 0), ev(2, 0), ev(2, 1)
    assert n1 == 3 and n_r0 == n_r1 == 2  # rank 1 pads its single row with a weight-0 forward
    assert 2 * r0 + r1 == pytest.approx(3 * full, rel=1e-6)


def test_dcp_run_state_round_trip_in_one_process_and_a_misfit_is_one_line(tmp_path):
    """dist_ckpt without a process group: LoRA weights and AdamW moments/step come back exactly
    (written with activation checkpointing's wrapper names, read without: canonical names); a
    checkpoint of another LoRA rank is one HarnessError line, exit 2."""
    import torch

    from harness.core.errors import HarnessError
    from reference_impls.llama2_70b_lora import dist_ckpt
    from reference_impls.llama2_70b_lora import model as M

    def lora(seed, **kw):
        cfg = Llama2LoraConfig(**{**TINY, **kw})
        torch.manual_seed(seed)
        model = M.apply_lora(M.build_base(cfg), cfg)
        return model, torch.optim.AdamW(M.trainable_parameters(model), lr=1e-3)

    model, opt = lora(0)
    M.enable_activation_checkpointing(model)
    for _ in range(2):
        model(input_ids=torch.randint(0, 64, (2, 16))).logits.sum().backward()
        opt.step()
        opt.zero_grad()
    dist_ckpt.run_state(model, opt).write(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {".metadata", "__0_0.distcp"}
    back, back_opt = lora(1)
    dist_ckpt.run_state(back, back_opt).read(tmp_path)
    pairs = list(zip(M.trainable_parameters(model), M.trainable_parameters(back)))
    assert len(pairs) == 4 * 2
    for p, q in pairs:
        assert torch.equal(p, q)
        a, b = opt.state[p], back_opt.state[q]
        assert all(torch.equal(a[k], b[k]) for k in ("exp_avg", "exp_avg_sq", "step"))
    assert back_opt.state[pairs[0][1]]["step"] == 2

    other, other_opt = lora(0, lora_rank=8)
    with pytest.raises(
        HarnessError, match=r"cannot resume: .* does not fit this model \(ValueError: Size"
    ) as e:
        dist_ckpt.run_state(other, other_opt).read(tmp_path)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
