"""FID and CLIP score: the real metrics at full size, classifier proxies at tiny size.

FID is the Frechet distance between Gaussians fitted to image features of generated and real
images: |mu1 - mu2|^2 + tr(S1 + S2 - 2 (S1 S2)^1/2) (Heusel et al. 2017; pytorch-fid's formula).
  full: Inception-v3 pool3 features (pytorch-fid, weights from a local path) against the COCO-2014
        30k statistics; CLIP = mean cosine of OpenCLIP ViT-H/14 image and caption embeddings.
  tiny: the Inception and CLIP weights cannot be had offline, so `prepare` trains a small digits
        classifier (`DigitsClassifier`) deterministically. FID = the same Frechet distance in its
        32-wide penultimate feature space against the held-out real images' statistics; CLIP = mean
        probability the classifier gives the digit named in the prompt (in [0, 1], like a cosine,
        higher = image and caption agree).
Nothing here downloads weights: a missing file is a ConfigError naming it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy import linalg

from harness.core.errors import ConfigError
from reference_impls.tiny_images import DIGITS


def label_of(text: str) -> int:
    words = text.lower().split()
    for i, d in enumerate(DIGITS):
        if d in words:
            return i
    return -1


def stats(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    f = np.asarray(features, dtype=np.float64)
    return f.mean(0), np.cov(f, rowvar=False)


def frechet_distance(mu1, sigma1, mu2, sigma2, eps: float = 1e-6) -> float:
    mu1, mu2 = np.atleast_1d(mu1), np.atleast_1d(mu2)
    sigma1, sigma2 = np.atleast_2d(sigma1), np.atleast_2d(sigma2)
    diff = mu1 - mu2
    # sqrtm(A) alone is the call every SciPy accepts: `disp` is deprecated in 1.16 and gone in 1.18
    # (and its error estimate is not used here: a non-finite root is what the retry below catches).
    covmean = linalg.sqrtm(sigma1.dot(sigma2))
    if not np.isfinite(covmean).all():  # singular product: regularise the diagonal
        offset = np.eye(sigma1.shape[0]) * eps
        covmean = linalg.sqrtm((sigma1 + offset).dot(sigma2 + offset))
    covmean = np.real(covmean)
    return float(max(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean), 0.0))


class DigitsClassifier(torch.nn.Module):
    """Small CNN on 16x16 images in [-1, 1] (channels averaged): 2 conv + pool, fc 32 (features), fc 10."""

    FEATURES = 32

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 4 * 4, self.FEATURES)
        self.out = torch.nn.Linear(self.FEATURES, len(DIGITS))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float().mean(1, keepdim=True)
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return F.relu(self.fc(x.flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.features(x))


class TinyScorer:
    """Proxy FID/CLIP from the classifier `prepare` trained."""

    def __init__(self, path: Path):
        if not Path(path).is_file():
            raise ConfigError(
                f"{path}: missing tiny FID/CLIP classifier (run `mlperf prepare stable_diffusion "
                f"--size tiny`)"
            )
        self.model = DigitsClassifier()
        self.model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        self.model.eval()

    @torch.no_grad()
    def score(self, images: torch.Tensor, prompts: list[str]) -> tuple[np.ndarray, float]:
        """(features, summed prompted-class probability) for a batch of images in [-1, 1]."""
        images = images.float().cpu()
        feats = self.model.features(images)
        probs = F.softmax(self.model.out(feats), 1)
        labels = torch.tensor([label_of(p) for p in prompts])
        ok = labels >= 0
        agree = probs[ok.nonzero().flatten(), labels[ok]].sum().item() if ok.any() else 0.0
        return feats.numpy(), agree


class FullScorer:
    """Inception-v3 (pytorch-fid) features and OpenCLIP ViT-H/14 CLIP score, from local weights only."""

    def __init__(self, inception_path: Path, clip_path: Path, device: str):
        for p, what in (
            (
                inception_path,
                "FID Inception weights pt_inception-2015-12-05-6726825d.pth "
                "(mlcommons/training stable_diffusion/scripts/checkpoints/download_inception.sh)",
            ),
            (
                clip_path,
                "OpenCLIP ViT-H/14 weights for the CLIP score (scripts/checkpoints/download_clip.sh)",
            ),
        ):
            if not Path(p).is_file():
                raise ConfigError(f"{p}: missing {what}")
        try:
            import open_clip
            import pytorch_fid.inception as inc
        except ImportError as e:
            raise ConfigError(
                f"full-size FID/CLIP need pytorch-fid and open-clip-torch on the GPU host ({e})"
            ) from None
        # pytorch-fid fetches its weights by URL; hand it the local file instead (never download).
        inc.load_state_dict_from_url = lambda *a, **k: torch.load(inception_path, map_location="cpu")
        InceptionV3 = inc.InceptionV3
        self.inception = InceptionV3([InceptionV3.BLOCK_INDEX_BY_DIM[2048]]).to(device).eval()
        self.clip, _, self.preprocess = open_clip.create_model_and_transforms(
            "ViT-H-14", pretrained=str(clip_path)
        )
        self.clip = self.clip.to(device).eval()
        self.tokenizer = open_clip.get_tokenizer("ViT-H-14")
        self.device = device

    @torch.no_grad()
    def score(self, images: torch.Tensor, prompts: list[str]) -> tuple[np.ndarray, float]:
        x = ((images.float() + 1) / 2).clamp(0, 1).to(self.device)  # [0, 1] for both models
        feats = self.inception(x)[0].squeeze(-1).squeeze(-1).cpu().numpy()
        mean = torch.tensor((0.48145466, 0.4578275, 0.40821073), device=self.device).view(1, 3, 1, 1)
        std = torch.tensor((0.26862954, 0.26130258, 0.27577711), device=self.device).view(1, 3, 1, 1)
        xi = (F.interpolate(x, size=224, mode="bicubic", align_corners=False) - mean) / std
        img = F.normalize(self.clip.encode_image(xi).float(), dim=-1)
        txt = F.normalize(self.clip.encode_text(self.tokenizer(prompts).to(self.device)).float(), dim=-1)
        return feats, float((img * txt).sum(-1).clamp(min=0).sum().item())


def scorer(cfg, data_dir: str, device: str):
    root = Path(data_dir)
    if cfg.text_encoder == "tiny-clip":
        return TinyScorer(root / cfg.inception_checkpoint)
    return FullScorer(root / cfg.inception_checkpoint, root / cfg.clip_text_checkpoint, device)
