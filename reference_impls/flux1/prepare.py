"""`python -m reference_impls.flux1.prepare --plan PLAN.json`: make the data a plan needs.

Tiny (deterministic, ~15 s on one core), in the full size's format (data.py), under the data dir:
  1. scikit-learn's digits at 16x16 RGB, split by the shared fixed seed (reference_impls/tiny_images.py)
     into eval_samples (256) validation and train_samples (1,541) training images;
  2. a 16-channel AutoencoderKL (factor 2) trained briefly on the training images, saved with its
     shift/scale in vae_dir; its posterior (mean, logvar: 16x8x8) of every image is the row's moments;
  3. frozen, fixed-seed 2-layer T5 and CLIP text encoders (the reference's T5-XXL and CLIP-L, small)
     encode each caption ("a photo of the digit seven") once: T5 states (8 x 32) and CLIP's pooled
     vector (32), and the empty caption's (caption dropout);
  4. validation row j gets timestep j mod 8 (the reference's assignment).
Full: read both splits' first rows and the empty encodings (data.py checks every column and shape),
then the manifest.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from benchmarks.flux1 import DATA
from benchmarks.flux1.config import Flux1Config
from harness.core.errors import ConfigError
from harness.core.runplan import RunPlan
from reference_impls.flux1 import data
from reference_impls.tiny_images import SPLIT_SEED


def _encoders(cfg, vocab: dict[str, int]):
    """(T5 encoder, CLIP text model): fixed seeds, never trained (the reference's are frozen)."""
    import torch
    from transformers import T5Config, T5EncoderModel

    from reference_impls import tiny_images
    from reference_impls.tiny_images import TinyTokenizer as Tok

    torch.manual_seed(SPLIT_SEED + 2)
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=len(vocab) + 3,
            d_model=cfg.joint_attention_dim,
            d_kv=8,
            d_ff=2 * cfg.joint_attention_dim,
            num_layers=2,
            num_heads=4,
            feed_forward_proj="gated-gelu",
            pad_token_id=Tok.PAD,
            eos_token_id=Tok.EOS,
            decoder_start_token_id=Tok.BOS,
        )
    )
    torch.manual_seed(SPLIT_SEED + 3)
    clip = tiny_images.clip_text(vocab, cfg.pooled_projection_dim, cfg.text_max_length)
    return t5.eval(), clip.eval()


def generate_tiny(plan: RunPlan) -> list[Path]:
    import torch

    from reference_impls import tiny_images
    from reference_impls.tiny_images import DIGITS, TinyTokenizer, caption, vocabulary

    cfg = Flux1Config.model_validate(plan.config)
    torch.set_num_threads(plan.threads_per_process)
    root = Path(plan.data_dir)
    images, labels = tiny_images.digits(2 * cfg.latent_size)
    ev, tr = tiny_images.split(len(labels), cfg.eval_samples, cfg.train_samples)
    vae, _, recon = tiny_images.train_vae(images, tr, ev, cfg.latent_channels, cfg.tiny_vae_steps)
    with torch.no_grad():
        post = vae.encode(images).latent_dist  # every image (shift/scale from the training ones)
    shift, scale, files = tiny_images.save_vae(vae, post.mean[tr], root / cfg.vae_dir)

    vocab = vocabulary()
    tok = TinyTokenizer(vocab, cfg.text_max_length)
    t5, clip = _encoders(cfg, vocab)
    texts = [caption(i) for i in range(len(DIGITS))] + [""]
    with torch.no_grad():
        ids = tok(texts)
        t5_states = t5(input_ids=ids).last_hidden_state
        pooled = clip(input_ids=ids).pooler_output

    def row(i: int) -> dict:
        k = int(labels[i])
        return {
            "__key__": f"{i:06d}",
            "t5_encodings": data.npy_bf16(t5_states[k]),
            "clip_encodings": data.npy_bf16(pooled[k]),
            "mean": data.npy_bf16(post.mean[i]),
            "logvar": data.npy_bf16(post.logvar[i]),
        }

    files += data.write_split(root / cfg.train_dir, [row(int(i)) for i in tr], timesteps=False)
    val = [row(int(i)) | {"timestep": j % cfg.eval_timesteps} for j, i in enumerate(ev.tolist())]
    files += data.write_split(root / cfg.eval_dir, val, timesteps=True)
    empty = root / cfg.empty_encodings_dir
    empty.mkdir(parents=True, exist_ok=True)
    for name, t in (("t5_empty.npy", t5_states[-1]), ("clip_empty.npy", pooled[-1])):
        (empty / name).write_bytes(data.npy_bf16(t))
        files.append(empty / name)
    info = {"vae_eval_recon_mse": round(recon, 5), "vae_shift_factor": shift, "vae_scaling_factor": scale}
    (root / "tiny_info.json").write_text(json.dumps(info, indent=1))
    return files


def validate_full(plan: RunPlan) -> list[Path]:
    """Every problem of the download at once (one line, `; `-separated), else its files."""
    cfg = Flux1Config.model_validate(plan.config)
    root = Path(plan.data_dir)
    problems, files = [], []
    for folder, what in ((cfg.train_dir, "train"), (cfg.eval_dir, "eval")):
        try:
            split = data.Split(cfg, root / folder, data.origin(cfg, what), timesteps=what == "eval")
            if what == "eval":
                data.check_validation(cfg, split)  # its rows' count and timesteps
            files += split.files + [split.folder / data.STATE]
        except ConfigError as e:
            problems.append(str(e))
    try:
        data.empty_encodings(cfg, plan.data_dir)
    except ConfigError as e:
        problems.append(str(e))
    if problems:
        raise ConfigError("; ".join(problems))
    return files + [root / cfg.empty_encodings_dir / n for n in ("t5_empty.npy", "clip_empty.npy")]


def prepare(plan: RunPlan) -> Path:
    t0 = time.time()
    Path(plan.data_dir).mkdir(parents=True, exist_ok=True)
    out = DATA.write(plan, generate_tiny(plan) if plan.size == "tiny" else validate_full(plan))
    print(
        f"prepared {plan.benchmark} ({plan.size}) in {plan.data_dir} ({time.time() - t0:.1f} s)",
        file=sys.stderr,
    )
    return out
