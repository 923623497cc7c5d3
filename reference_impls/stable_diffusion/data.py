"""Data as the reference stores it, read from local paths only.

Training: webdataset tars under `<data_dir>/<train_shards>/`, one sample = `<key>.npy` (VAE moments,
float, shape (2 x latent_channels, latent_size, latent_size): mean then log-variance) + `<key>.txt`
(the caption). A latent is drawn per use: mean + exp(logvar / 2) x N(0, 1), then shifted and scaled.
Evaluation: the COCO-2014 prompt TSV (image_id, id, caption) and the FID statistics (mu, sigma).
Every missing file or wrong shape is a one-line ConfigError (exit 2).
"""

from __future__ import annotations

import csv
import io
import tarfile
from pathlib import Path

import numpy as np

from harness.core.errors import ConfigError

FULL_ORIGIN = {
    "train": "LAION-400M CC-BY moments from MLCommons storage: mlcommons/training stable_diffusion/"
    "scripts/datasets/laion400m-filtered-download-moments.sh",
    "captions": "COCO-2014 30k prompts: scripts/datasets/coco2014-validation-download-prompts.sh",
    "stats": "COCO-2014 30k FID statistics: scripts/datasets/coco2014-validation-download-stats.sh",
}
TINY_ORIGIN = "run `mlperf prepare stable_diffusion --size tiny`"


def origin(cfg, what: str) -> str:
    return TINY_ORIGIN if cfg.text_encoder == "tiny-clip" else FULL_ORIGIN[what]


def shards(cfg, data_dir: str) -> list[Path]:
    folder = Path(data_dir) / cfg.train_shards
    tars = sorted(folder.glob("*.tar")) if folder.is_dir() else []
    if not tars:
        raise ConfigError(f"{folder}: missing training latents (no *.tar; {origin(cfg, 'train')})")
    return tars


def expected_shape(cfg) -> tuple[int, int, int]:
    return (2 * cfg.latent_channels, cfg.latent_size, cfg.latent_size)


def _check(arr: np.ndarray, cfg, where: str) -> np.ndarray:
    if arr.shape != expected_shape(cfg):
        raise ConfigError(
            f"{where}: latent moments have shape {tuple(arr.shape)}, expected "
            f"{expected_shape(cfg)} (2 x latent_channels {cfg.latent_channels}, latent_size "
            f"{cfg.latent_size}); the latents do not match this config"
        )
    return arr


def read_shard(path: Path, cfg):
    """Yield (key, moments, caption) from one webdataset tar, checking every latent's shape."""
    pending: dict[str, dict] = {}
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                if not member.isfile():
                    continue
                key, _, ext = member.name.rpartition(".")
                if ext not in ("npy", "txt"):
                    continue
                raw = tar.extractfile(member).read()
                s = pending.setdefault(key, {})
                s[ext] = np.load(io.BytesIO(raw)) if ext == "npy" else raw.decode().strip()
                if len(s) == 2:
                    del pending[key]
                    yield key, _check(s["npy"], cfg, f"{path}:{key}.npy"), s["txt"]
    except (tarfile.TarError, ValueError, OSError) as e:
        raise ConfigError(f"{path}: unreadable training shard ({e})") from None


def check_first(cfg, data_dir: str) -> None:
    """Fail fast (before init_stop) on missing shards or a latent of the wrong shape."""
    for _ in read_shard(shards(cfg, data_dir)[0], cfg):
        return
    raise ConfigError(f"{shards(cfg, data_dir)[0]}: no (npy, txt) samples in the shard")


class TrainStream:
    """Endless shuffled stream of (moments, caption) for one rank.

    Epoch e visits the shards in an order drawn from (seed, e); with at least as many shards as ranks
    each rank reads its own shards, else every rank reads all and keeps every world-th sample. A
    shuffle buffer of `buffer` samples mixes neighbours (webdataset's `shuffle(1000)` in the reference).
    """

    def __init__(self, cfg, data_dir: str, rank: int, world: int, seed: int, buffer: int = 1000):
        self.cfg, self.paths, self.rank, self.world = cfg, shards(cfg, data_dir), rank, world
        self.seed, self.buffer = seed, buffer

    def _samples(self):
        epoch = 0
        while True:
            rng = np.random.default_rng([self.seed, epoch])
            order = [self.paths[i] for i in rng.permutation(len(self.paths))]
            split = len(order) >= self.world
            mine = order[self.rank :: self.world] if split else order
            i = 0
            for p in mine:
                for _, moments, caption in read_shard(p, self.cfg):
                    if split or i % self.world == self.rank:
                        yield moments, caption
                    i += 1
            epoch += 1

    def __iter__(self):
        rng = np.random.default_rng([self.seed, 1 << 20, self.rank])
        buf = []
        for s in self._samples():
            buf.append(s)
            if len(buf) >= self.buffer:
                yield buf.pop(int(rng.integers(len(buf))))

    def batches(self, n: int):
        it = iter(self)
        while True:
            items = [next(it) for _ in range(n)]
            yield np.stack([m for m, _ in items]), [c for _, c in items]


def eval_prompts(cfg, data_dir: str) -> list[tuple[str, str]]:
    """The first eval_samples (image_id, caption) rows of the prompt TSV."""
    path = Path(data_dir) / cfg.eval_captions
    if not path.is_file():
        raise ConfigError(f"{path}: missing evaluation captions ({origin(cfg, 'captions')})")
    with open(path, newline="") as f:
        rows = [(r["image_id"], r["caption"]) for r in csv.DictReader(f, delimiter="\t")]
    if len(rows) < cfg.eval_samples:
        raise ConfigError(f"{path}: {len(rows)} captions, eval_samples needs {cfg.eval_samples}")
    return rows[: cfg.eval_samples]


def fid_stats(cfg, data_dir: str) -> tuple[np.ndarray, np.ndarray]:
    path = Path(data_dir) / cfg.fid_stats
    if not path.is_file():
        raise ConfigError(f"{path}: missing FID statistics of the real images ({origin(cfg, 'stats')})")
    with np.load(path) as z:
        if "mu" not in z or "sigma" not in z:
            raise ConfigError(f"{path}: FID statistics need arrays 'mu' and 'sigma'")
        return z["mu"], z["sigma"]
