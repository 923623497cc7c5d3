"""The diffusers config of the SD v2 VAE, kept beside the single-file checkpoint so it loads offline.

`AutoencoderKL.from_single_file(ckpt)` without `config=` infers the model type from the checkpoint's
keys and reads that model's `vae/config.json` from the Hugging Face hub cache (diffusers 0.42.1
loaders/single_file_model.py, `fetch_diffusers_config`; for SD v2 checkpoints the repo
stabilityai/stable-diffusion-2-1): nothing prepares that cache, so offline it fails. With
`config=<folder>` diffusers reads `<folder>/config.json` instead (`cls.load_config`), so
`prepare --size full` writes (or checks) that file and `model.load_vae` passes the folder.
Torch-free: prepare's validation and the manifest import it.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.errors import ConfigError

# stabilityai/stable-diffusion-2(-1) vae/config.json (diffusers 0.8.0 export) with the values
# diffusers' AutoencoderKL takes as defaults written out (scaling_factor 0.18215 is SD's latent
# scale, diffusers' LDM_VAE_DEFAULT_SCALING_FACTOR). An AutoencoderKL built from it has 83,653,863
# parameters, the kl-f8 first stage of SD v1/v2 (tests/unit/test_sd_vae.py).
SD2_VAE = {
    "_class_name": "AutoencoderKL",
    "act_fn": "silu",
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "sample_size": 768,
    "scaling_factor": 0.18215,
}


def write_or_check(folder: Path) -> Path:
    """Write `folder/config.json` with SD2_VAE, or check an existing one has the same architecture
    (one-line ConfigError naming the field and the fix otherwise). Returns the file."""
    path = Path(folder) / "config.json"
    if path.is_file():
        try:
            have = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(
                f"{path}: not a JSON VAE config ({e}); delete it and run prepare again"
            ) from None
        bad = [k for k, v in SD2_VAE.items() if have.get(k) != v]
        if bad:
            raise ConfigError(
                f"{path}: {bad[0]} is {have.get(bad[0])!r}, the SD v2 VAE has {SD2_VAE[bad[0]]!r}; "
                "delete the file and run `mlperf prepare stable_diffusion --size full` again"
            )
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(SD2_VAE, indent=1) + "\n")
    tmp.replace(path)
    return path
