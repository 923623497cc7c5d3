"""What the two text-to-image benchmarks' tiny data share (stable_diffusion, flux1): the images, their
split, and the small frozen VAE that encodes them once.

    images, labels = digits(size)                         # 1,797 sklearn digits, RGB in [-1, 1]
    caption(7), vocabulary(), TinyTokenizer(vocab, n)    # "a photo of the digit seven", its words
    ev, tr = split(len(labels), n_eval, n_train)          # fixed seed: the same split for both
    vae, post, recon = train_vae(images, tr, ev, channels, steps)   # factor-2 AutoencoderKL
The VAE's shift/scale are derived from its posterior means (as SD's 0.18215 and FLUX's 0.1159 /
0.3611 were chosen for their VAEs) and written into its config by `save_vae`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from harness.core.errors import ConfigError

SPLIT_SEED = 2023  # the reference's COCO subset seed
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
VAE_BATCH, VAE_LR, VAE_KL = 32, 3e-3, 1e-4


def caption(label: int) -> str:
    return f"a photo of the digit {DIGITS[label]}"


def vocabulary() -> dict[str, int]:
    """The captions' words -> token ids from 3 (0 BOS, 1 EOS, 2 PAD: TinyTokenizer's)."""
    words = sorted({w for i in range(len(DIGITS)) for w in caption(i).split()})
    return {w: i + 3 for i, w in enumerate(words)}


class TinyTokenizer:
    """Word-level tokenizer over the tiny captions' words (CLIP's BOS/EOS/pad conventions)."""

    BOS, EOS, PAD = 0, 1, 2

    def __init__(self, vocab: dict[str, int], max_length: int):
        self.vocab, self.max_length = vocab, max_length

    def __call__(self, captions: list[str]) -> torch.Tensor:
        ids = torch.full((len(captions), self.max_length), self.PAD, dtype=torch.long)
        for i, c in enumerate(captions):
            words = [self.vocab[w] for w in c.lower().split() if w in self.vocab]
            toks = ([self.BOS] + words + [self.EOS])[: self.max_length]
            ids[i, : len(toks)] = torch.tensor(toks)
        return ids


def clip_text(vocab: dict[str, int], width: int, length: int):
    """A 2-layer CLIPTextModel over the tiny vocabulary (TinyTokenizer's special ids), random
    weights from the caller's seed: frozen, never trained (as the references' text encoders)."""
    from transformers import CLIPTextConfig, CLIPTextModel

    return CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(vocab) + 3,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=length,
            bos_token_id=TinyTokenizer.BOS,
            eos_token_id=TinyTokenizer.EOS,
            pad_token_id=TinyTokenizer.PAD,
        )
    )


def digits(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """sklearn's 8x8 digits upsampled to size x size RGB in [-1, 1], and their labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32)[:, None] / 16 * 2 - 1
    images = F.interpolate(x, size=size, mode="bilinear", align_corners=False).clamp(-1, 1)
    return images.repeat(1, 3, 1, 1), torch.tensor(d.target)


def split(n: int, n_eval: int, n_train: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(evaluation indices, training indices) of a fixed-seed permutation of n images."""
    if n_eval + n_train > n:
        raise ConfigError(f"tiny data: train_samples {n_train} + eval_samples {n_eval} exceed the {n} digits")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(SPLIT_SEED))
    return perm[:n_eval], perm[n_eval : n_eval + n_train]


def train_vae(images: torch.Tensor, tr: torch.Tensor, ev: torch.Tensor, channels: int, steps: int):
    """(vae, posterior of the training images, eval reconstruction MSE): a factor-2, KL-regularised
    AutoencoderKL trained briefly on the training images, then frozen."""
    from diffusers import AutoencoderKL

    torch.manual_seed(SPLIT_SEED)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(16, 32),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        layers_per_block=1,
        latent_channels=channels,
        norm_num_groups=16,
        sample_size=images.shape[-1],
    )
    opt = torch.optim.Adam(vae.parameters(), lr=VAE_LR)
    g = torch.Generator().manual_seed(SPLIT_SEED + 1)
    for _ in range(steps):
        batch = images[tr[torch.randint(0, len(tr), (VAE_BATCH,), generator=g)]]
        post = vae.encode(batch).latent_dist
        loss = (
            F.mse_loss(vae.decode(post.sample(generator=g)).sample, batch)
            + VAE_KL * post.kl().mean() / batch[0].numel()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    vae.eval()
    with torch.no_grad():
        post = vae.encode(images[tr]).latent_dist
        recon = F.mse_loss(vae.decode(vae.encode(images[ev]).latent_dist.mean).sample, images[ev]).item()
    return vae, post, recon


def save_vae(vae, means: torch.Tensor, folder: Path) -> tuple[float, float, list[Path]]:
    """Derive shift (the latent mean) and scale (1 / its std) from the training images' posterior
    means, write them into the VAE's config, save it; (shift, scale, files written)."""
    shift = float(means.mean())
    scale = float(1.0 / (means - shift).std())
    vae.register_to_config(scaling_factor=round(scale, 6), shift_factor=round(shift, 6))
    vae.save_pretrained(folder)
    return shift, scale, [p for p in folder.iterdir() if p.is_file()]


def vae_factors(shift: float | None, scale: float | None, folder: Path, origin: str) -> tuple[float, float]:
    """(shift, scale) with latents = (z - shift) x scale: each value given as it is, each None from the
    config.json save_vae wrote in `folder` (a missing or null shift_factor is no shift, as diffusers
    reads it). A missing or unreadable config is one ConfigError naming it and `origin`."""
    if shift is not None and scale is not None:
        return float(shift), float(scale)
    path = folder / "config.json"
    try:
        c = json.loads(path.read_text())
        return (
            float(shift) if shift is not None else float(c.get("shift_factor") or 0.0),
            float(scale) if scale is not None else float(c["scaling_factor"]),
        )
    except FileNotFoundError:
        raise ConfigError(f"{path}: missing tiny VAE config ({origin})") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{path}: no VAE shift/scale ({type(e).__name__}; {origin})") from None
