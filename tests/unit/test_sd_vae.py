"""Full-size SD loads its VAE offline: `prepare --size full` writes the SD v2 VAE's diffusers config
beside the single-file checkpoint and `model.load_vae` passes it (config=), so from_single_file never
looks in the hub cache. A small VAE saved in the original (LDM/CompVis `first_stage_model.*`) key
layout goes through the same load with the hub offline and an empty hub cache."""

import json
import re

import pytest
import torch

from benchmarks.stable_diffusion.config import StableDiffusionConfig
from harness.core.errors import ConfigError
from reference_impls.stable_diffusion import model, vae_config

SMALL = dict(
    block_out_channels=[8, 16],
    down_block_types=["DownEncoderBlock2D"] * 2,
    up_block_types=["UpDecoderBlock2D"] * 2,
    layers_per_block=1,
    norm_num_groups=8,
    latent_channels=4,
)


def _to_ldm(sd: dict, levels: int) -> dict:
    """diffusers AutoencoderKL keys -> the original single-file layout (the inverse of diffusers'
    convert_ldm_vae_checkpoint, written out independently so a missed key shows as a mismatch)."""
    out = {}
    for k, v in sd.items():
        k = re.sub(r"encoder\.down_blocks\.(\d+)\.resnets\.(\d+)", r"encoder.down.\1.block.\2", k)
        k = re.sub(r"encoder\.down_blocks\.(\d+)\.downsamplers\.0", r"encoder.down.\1.downsample", k)
        k = re.sub(  # LDM numbers decoder levels from the lowest resolution up
            r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)",
            lambda m: f"decoder.up.{levels - 1 - int(m[1])}.block.{m[2]}",
            k,
        )
        k = re.sub(
            r"decoder\.up_blocks\.(\d+)\.upsamplers\.0",
            lambda m: f"decoder.up.{levels - 1 - int(m[1])}.upsample",
            k,
        )
        k = re.sub(r"mid_block\.resnets\.(\d+)", lambda m: f"mid.block_{int(m[1]) + 1}", k)
        k = k.replace("mid_block.attentions.0", "mid.attn_1").replace("conv_shortcut", "nin_shortcut")
        k = k.replace("conv_norm_out", "norm_out").replace("group_norm", "norm")
        k = re.sub(r"to_([qkv])\.", r"\1.", k).replace("to_out.0", "proj_out")
        if "mid.attn_1" in k and k.endswith("weight") and v.ndim == 2:
            v = v[:, :, None, None]  # LDM's attention projections are 1x1 convolutions
        out["first_stage_model." + k] = v.contiguous()
    return out


def test_prepare_writes_the_sd2_vae_config_and_checks_an_existing_one(tmp_path):
    from accelerate import init_empty_weights
    from diffusers import AutoencoderKL

    path = vae_config.write_or_check(tmp_path / "vae")
    assert json.loads(path.read_text()) == vae_config.SD2_VAE
    with init_empty_weights():  # the kl-f8 first stage of SD v1/v2: 83,653,863 parameters
        vae = AutoencoderKL.from_config(AutoencoderKL.load_config(str(path.parent)))
    assert sum(p.numel() for p in vae.parameters()) == 83_653_863
    assert vae.config.scaling_factor == 0.18215 and vae.config.sample_size == 768
    assert vae_config.write_or_check(tmp_path / "vae") == path  # an equal file is accepted
    path.write_text(json.dumps({**vae_config.SD2_VAE, "latent_channels": 8}))
    with pytest.raises(ConfigError) as e:
        vae_config.write_or_check(tmp_path / "vae")
    assert "\n" not in str(e.value) and "latent_channels is 8" in str(e.value)


@pytest.mark.parametrize("fmt", ["safetensors", "ckpt"])
def test_single_file_vae_loads_offline_through_the_full_size_loader(tmp_path, monkeypatch, fmt):
    import huggingface_hub.constants as hub
    from diffusers import AutoencoderKL
    from safetensors.torch import save_file

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))  # no cached configs
    torch.manual_seed(0)
    small = AutoencoderKL(**SMALL)
    ldm = _to_ldm(small.state_dict(), len(SMALL["block_out_channels"]))
    ckpt = tmp_path / "data" / f"checkpoints/sd/vae.{fmt}"
    ckpt.parent.mkdir(parents=True)
    if fmt == "safetensors":
        save_file(ldm, ckpt)
    else:  # as 512-base-ema.ckpt: a torch pickle with the weights under "state_dict"
        torch.save({"state_dict": ldm, "global_step": 1}, ckpt)
    (tmp_path / "data/checkpoints/sd/vae").mkdir()
    small.save_config(tmp_path / "data/checkpoints/sd/vae")  # what prepare writes, at this size
    cfg = StableDiffusionConfig(sd_checkpoint=f"checkpoints/sd/vae.{fmt}")  # full size: single file
    vae = model.load_vae(cfg, str(tmp_path / "data"))
    want, got = small.state_dict(), vae.state_dict()
    assert set(got) == set(want)
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_missing_vae_config_is_one_line_naming_prepare(tmp_path):
    ckpt = tmp_path / "checkpoints/sd/512-base-ema.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"")
    with pytest.raises(ConfigError) as e:
        model.load_vae(StableDiffusionConfig(), str(tmp_path))
    msg = str(e.value)
    assert (
        "\n" not in msg and "vae/config.json" in msg and "mlperf prepare stable_diffusion --size full" in msg
    )
