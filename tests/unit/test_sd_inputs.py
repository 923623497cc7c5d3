"""Stable Diffusion bad input: one clear line (ConfigError, exit 2) for missing latents, a latent of
the wrong shape, missing eval weights at full size; the record configs plan the NVIDIA batch/LR."""

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from helpers import make_plan, run_entry, typed_config

import benchmarks
from benchmarks.stable_diffusion import DATA as manifest
from harness.core.errors import ConfigError
from harness.run.execute import make_plans
from reference_impls.stable_diffusion import data, metrics, prepare


def _plan(tmp_path, system="cpu-local", size="tiny"):
    return make_plan("sd", tmp_path, system=system, size=size, seed=1, data_dir=tmp_path / "data")


def _write_shard(path: Path, arr: np.ndarray):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, raw in (("000000.npy", _npy(arr)), ("000000.txt", b"a photo of the digit one")):
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.mark.parametrize("system,size", [("cpu-local", "tiny"), ("dgx-h200x1", "full")])
def test_missing_latents_is_one_line_naming_the_folder(tmp_path, system, size):
    plan = _plan(tmp_path, system, size)
    with pytest.raises(ConfigError) as e:
        data.check_first(typed_config(plan), plan.data_dir)
    msg = str(e.value)
    assert "\n" not in msg and "missing training latents" in msg and typed_config(plan).train_shards in msg
    assert ("mlperf prepare" in msg) if size == "tiny" else ("laion400m-filtered-download-moments.sh" in msg)
    assert not manifest.is_prepared(plan)


def test_wrong_latent_shape_is_one_line(tmp_path):
    plan = _plan(tmp_path, "dgx-h200x1", "full")
    cfg = typed_config(plan)
    _write_shard(Path(plan.data_dir) / cfg.train_shards / "00000.tar", np.zeros((8, 32, 32), np.float16))
    with pytest.raises(ConfigError) as e:
        prepare.validate_full(plan)
    msg = str(e.value)
    assert "\n" not in msg and "(8, 32, 32)" in msg and "expected (8, 64, 64)" in msg and "00000.tar" in msg


def test_full_size_missing_eval_weights_are_named(tmp_path):
    plan = _plan(tmp_path, "dgx-h200x1", "full")
    cfg = typed_config(plan)
    root = Path(plan.data_dir)
    _write_shard(root / cfg.train_shards / "00000.tar", np.zeros((8, 64, 64), np.float16))
    (root / cfg.eval_captions).parent.mkdir(parents=True)
    (root / cfg.eval_captions).write_text("image_id\tid\tcaption\n" + "1\t1\ta cat\n" * cfg.eval_samples)
    np.savez(root / cfg.fid_stats, mu=np.zeros(2048), sigma=np.eye(2048))
    with pytest.raises(ConfigError, match="512-base-ema.ckpt"):
        prepare.validate_full(plan)
    with pytest.raises(ConfigError) as e:
        metrics.scorer(cfg, plan.data_dir, "cpu")
    assert "pt_inception-2015-12-05-6726825d.pth" in str(e.value) and "\n" not in str(e.value)


def test_missing_data_exits_2_with_one_error_line(tmp_path):
    plan = _plan(tmp_path)
    r = run_entry("reference_impls.stable_diffusion", plan, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "missing training latents" in errors[0]
    log = Path(plan.log_path).read_text()
    assert "run_start" not in log  # failed during init: no timed run to stop


@pytest.mark.parametrize(
    "system,gbs,lr,ckpt_steps",
    [
        ("dgx-h100x1", 512, 5.12e-5, 1000),
        ("dgx-h200x1", 512, 5.12e-5, 1000),
        ("dgx-h100x8", 1024, 1.2288e-4, 500),
        ("dgx-h100x64", 2048, 1.6384e-4, 250),
    ],
)
def test_record_configs_plan_nvidia_batch_and_lr(tmp_path, system, gbs, lr, ckpt_steps):
    plan = _plan(tmp_path, system, "full")
    cfg = typed_config(plan)
    assert (cfg.global_batch_size, cfg.opt_base_learning_rate, cfg.checkpoint_interval_steps) == (
        gbs,
        lr,
        ckpt_steps,
    )
    assert plan.layout.grad_accum == 1 and plan.target == {"FID": 90.0, "CLIP": 0.15}
    assert cfg.opt_learning_rate_warmup_steps == 1000 and cfg.unet_block_out_channels == [
        320,
        640,
        1280,
        1280,
    ]


def test_tiny_refuses_fixed_adamw_values(tmp_path):
    with pytest.raises(ConfigError, match="fixed"):
        make_plans(
            benchmarks.get("sd"),
            "cpu-local",
            size="tiny",
            results_dir=tmp_path,
            sets=("opt_adamw_weight_decay=0.1",),
        )
