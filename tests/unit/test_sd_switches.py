"""The SD switches that run on CPU act there (what train.py builds, on the tiny UNet, in-process):
precision=fp16 computes the UNet in fp16 under CPU autocast with a CPU grad scaler; bf16 without a
scaler; channels_last leaves the convolutions NHWC; distributed_optimizer is ZeRO over gloo."""

import pytest
import torch
from test_config_fields import _cfg

from reference_impls.stable_diffusion import model as M


@pytest.mark.parametrize("precision, dtype", [("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_precision_autocasts_the_unet_on_cpu(precision, dtype):
    cfg = _cfg("stable_diffusion", precision=precision, channels_last=True)
    autocast, scaler = M.mixed_precision(cfg, "cpu")
    unet = M.build_unet(cfg).to(memory_format=torch.channels_last)
    x = torch.randn(2, cfg.latent_channels, cfg.latent_size, cfg.latent_size)
    cond = torch.randn(2, cfg.text_max_length, cfg.cross_attention_dim)
    with autocast():
        out = unet(
            x.contiguous(memory_format=torch.channels_last),
            torch.tensor([10, 500]),
            encoder_hidden_states=cond,
        )
    assert out.sample.dtype == dtype and next(unet.parameters()).dtype == torch.float32  # fp32 master weights
    assert unet.conv_in.weight.is_contiguous(memory_format=torch.channels_last)
    if precision == "fp16":
        assert scaler is not None and scaler.is_enabled() and scaler.get_scale() == 65536.0
    else:
        assert scaler is None  # bf16 has fp32's exponent range: no loss scaling


def test_fp32_is_plain():
    autocast, scaler = M.mixed_precision(_cfg("stable_diffusion", precision="fp32"), "cpu")
    with autocast():
        assert torch.ones(2, 2) @ torch.ones(2, 2) is not None and not torch.is_autocast_enabled("cpu")
    assert scaler is None


def test_distributed_optimizer_is_zero_over_gloo(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        p = torch.nn.Parameter(torch.ones(4))
        opt = M.optimizer(_cfg("stable_diffusion", distributed_optimizer=True), [p], sharded=True)
        p.grad = torch.ones(4)
        opt.step()
        assert type(opt).__name__ == "ZeroRedundancyOptimizer" and p.detach().lt(1).all()
    finally:
        dist.destroy_process_group()
