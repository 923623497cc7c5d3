"""`python -m reference_impls.stable_diffusion.prepare --plan PLAN.json`: make the data a plan needs.

Tiny (deterministic, ~15 s on one core), written in the reference's layouts under the data dir:
  1. scikit-learn's 1,797 8x8 digits, upsampled to 16x16 RGB in [-1, 1], split by a fixed seed into
     train_samples (1,497) training and eval_samples (300) evaluation images;
  2. a small AutoencoderKL (factor 2) trained briefly on the training images, saved with its
     `shift_factor`/`scaling_factor` (latent mean and 1/std, as SD's 0.18215 was chosen) in
     checkpoints/tiny/vae; it encodes every training image once into moments (mean, logvar: 8x8x8)
     stored as webdataset tars (`<key>.npy` + `<key>.txt`, "a photo of the digit seven") like the
     LAION moments;
  3. the evaluation prompts as a TSV (image_id, id, caption) like COCO's val2014_30k.tsv;
  4. a fixed-seed 2-layer CLIPTextModel + word vocabulary in checkpoints/tiny/text_encoder;
  5. the FID/CLIP proxy: a digits classifier trained deterministically (checkpoints/tiny/classifier.pt)
     and the real evaluation images' feature statistics (mu, sigma) like the COCO FID statistics.
Full: validate the layout (shards, one latent's shape, prompts, FID statistics, checkpoints), each
problem one line `error: <file>: <what> (<where it comes from>)`, exit 2; write (or check) the SD v2
VAE's diffusers config (vae_config.py) so the VAE loads offline; then the manifest.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

from benchmarks.stable_diffusion import DATA
from benchmarks.stable_diffusion.config import StableDiffusionConfig
from harness.core.errors import ConfigError
from harness.core.runplan import RunPlan
from reference_impls.stable_diffusion import data, vae_config
from reference_impls.tiny_images import SPLIT_SEED

SHARDS = 4
# Training steps: the config's tiny_vae_steps and tiny_classifier_steps (150 and 300).
CLF_BATCH, CLF_LR = 64, 1e-2


def _tar(path: Path, samples: list[tuple[str, np.ndarray, str]]) -> None:
    tmp = path.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        for key, arr, text in samples:
            for ext, raw in (("npy", _npy(arr)), ("txt", text.encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mtime = len(raw), 0  # fixed mtime: byte-identical tars on every prepare
                tar.addfile(info, io.BytesIO(raw))
    tmp.replace(path)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def generate_tiny(plan: RunPlan) -> list[Path]:
    import torch
    import torch.nn.functional as F

    from reference_impls import tiny_images
    from reference_impls.stable_diffusion.metrics import DigitsClassifier, stats
    from reference_impls.tiny_images import caption, vocabulary

    cfg = StableDiffusionConfig.model_validate(plan.config)
    torch.set_num_threads(plan.threads_per_process)
    root = Path(plan.data_dir)
    images, labels = tiny_images.digits(2 * cfg.latent_size)
    ev, tr = tiny_images.split(len(labels), cfg.eval_samples, cfg.train_samples)
    files: list[Path] = []

    # VAE: factor 2 (two levels), KL-regularised autoencoder; only shift/scale are derived from data.
    vae, post, recon = tiny_images.train_vae(images, tr, ev, cfg.latent_channels, cfg.tiny_vae_steps)
    shift, scale, written = tiny_images.save_vae(vae, post.mean, root / cfg.sd_checkpoint)
    files += written

    moments = torch.cat([post.mean, post.logvar], 1).numpy().astype(np.float32)
    shard_dir = root / cfg.train_shards
    shard_dir.mkdir(parents=True, exist_ok=True)
    for s in range(SHARDS):
        idx = range(s, len(tr), SHARDS)
        path = shard_dir / f"{s:05d}.tar"
        _tar(path, [(f"{int(tr[i]):06d}", moments[i], caption(int(labels[tr[i]]))) for i in idx])
        files.append(path)

    tsv = root / cfg.eval_captions
    tsv.parent.mkdir(parents=True, exist_ok=True)
    with open(tsv, "w", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["image_id", "id", "caption"])
        for j, i in enumerate(ev.tolist()):
            w.writerow([i, j, caption(int(labels[i]))])
    files.append(tsv)

    # Frozen text encoder: fixed seed, never trained (as the reference's is frozen).
    vocab = vocabulary()
    torch.manual_seed(SPLIT_SEED + 2)
    text = tiny_images.clip_text(vocab, cfg.cross_attention_dim, cfg.text_max_length)
    text_dir = root / cfg.clip_text_checkpoint
    text.save_pretrained(text_dir)
    (text_dir / "vocab.json").write_text(json.dumps(vocab, indent=1, sort_keys=True))
    files += [p for p in text_dir.iterdir() if p.is_file()]

    # FID/CLIP proxy: digits classifier trained on the training images only.
    torch.manual_seed(SPLIT_SEED + 3)
    clf = DigitsClassifier()
    opt = torch.optim.Adam(clf.parameters(), lr=CLF_LR)
    g = torch.Generator().manual_seed(SPLIT_SEED + 4)
    for _ in range(cfg.tiny_classifier_steps):
        i = tr[torch.randint(0, len(tr), (CLF_BATCH,), generator=g)]
        loss = F.cross_entropy(clf(images[i]), labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    clf.eval()
    with torch.no_grad():
        acc = float((clf(images[ev]).argmax(1) == labels[ev]).float().mean())
        mu, sigma = stats(clf.features(images[ev]).numpy())
    clf_path = root / cfg.inception_checkpoint
    clf_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(clf.state_dict(), clf_path)
    stats_path = root / cfg.fid_stats
    np.savez(stats_path, mu=mu, sigma=sigma)
    files += [clf_path, stats_path]
    plan_info = {
        "vae_eval_recon_mse": round(recon, 5),
        "vae_shift_factor": shift,
        "vae_scaling_factor": scale,
        "classifier_eval_accuracy": round(acc, 4),
    }
    (root / "tiny_info.json").write_text(json.dumps(plan_info, indent=1))
    return files


def validate_full(plan: RunPlan) -> list[Path]:
    cfg = StableDiffusionConfig.model_validate(plan.config)
    root = Path(plan.data_dir)
    shards = data.shards(cfg, plan.data_dir)
    data.check_first(cfg, plan.data_dir)
    data.eval_prompts(cfg, plan.data_dir)
    data.fid_stats(cfg, plan.data_dir)
    for rel, what in (
        (
            cfg.sd_checkpoint,
            "Stable Diffusion checkpoint 512-base-ema.ckpt (VAE; scripts/checkpoints/download_sd.sh)",
        ),
        (cfg.clip_text_checkpoint, "OpenCLIP ViT-H/14 weights (scripts/checkpoints/download_clip.sh)"),
        (cfg.inception_checkpoint, "FID Inception weights (scripts/checkpoints/download_inception.sh)"),
    ):
        if not (root / rel).is_file():
            raise ConfigError(f"{root / rel}: missing {what}")
    vae_conf = vae_config.write_or_check(root / cfg.vae_config)  # the VAE loads offline with it
    return shards + [
        vae_conf,
        root / cfg.eval_captions,
        root / cfg.fid_stats,
        root / cfg.sd_checkpoint,
        root / cfg.clip_text_checkpoint,
        root / cfg.inception_checkpoint,
    ]


def prepare(plan: RunPlan) -> Path:
    t0 = time.time()
    Path(plan.data_dir).mkdir(parents=True, exist_ok=True)
    out = DATA.write(plan, generate_tiny(plan) if plan.size == "tiny" else validate_full(plan))
    print(
        f"prepared {plan.benchmark} ({plan.size}) in {plan.data_dir} ({time.time() - t0:.1f} s)",
        file=sys.stderr,
    )
    return out
