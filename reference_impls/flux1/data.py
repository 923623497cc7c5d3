"""The reference's preprocessed FLUX.1 data, read from local paths only (tiny and full alike).

A split is a folder as `datasets.Dataset.save_to_disk` writes it (the reference's
scripts/preprocess_flux_dataset.py): `state.json` listing `_data_files`, each an Arrow IPC *stream*
file (`data-00000-of-0000N.arrow`). One row = `__key__` (string); `t5_encodings` (text_max_length x
joint_attention_dim), `clip_encodings` (pooled_projection_dim), `mean` and `logvar` (the VAE
posterior, latent_channels x latent_size x latent_size), each `np.save` bytes of bfloat16 viewed as
uint16; validation rows add `timestep` (int 0 .. 7). The files are memory-mapped (zero-copy: a
2.5 TB training set costs no memory) and rows are decoded per batch. The empty caption's encodings
(caption dropout): `<empty_encodings_dir>/t5_empty.npy` and `clip_empty.npy`.
Every missing file, column or wrong shape is one ConfigError line (exit 2).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import torch

from harness.core.errors import ConfigError

STATE = "state.json"
ARRAYS = ("t5_encodings", "clip_encodings", "mean", "logvar")
FULL_ORIGIN = {
    "train": "CC12M preprocessed (flux-1-cc12m-preprocessed.uri; mlcommons/training text_to_image/README.md)",
    "eval": "COCO-2014 preprocessed (flux-1-coco-preprocessed.uri; mlcommons/training text_to_image/README.md)",
    "empty": "the empty caption's encodings (empty_encodings/ of the preprocessed download)",
}
TINY_ORIGIN = "run `mlperf prepare flux1 --size tiny`"


def origin(cfg, what: str) -> str:
    return TINY_ORIGIN if cfg.vae_scale_factor is None else FULL_ORIGIN[what]


def shapes(cfg) -> dict[str, tuple[int, ...]]:
    lat = (cfg.latent_channels, cfg.latent_size, cfg.latent_size)
    return {
        "t5_encodings": (cfg.text_max_length, cfg.joint_attention_dim),
        "clip_encodings": (cfg.pooled_projection_dim,),
        "mean": lat,
        "logvar": lat,
    }


def decode(raw: bytes) -> torch.Tensor:
    """np.save bytes -> float32 tensor; uint16 is bfloat16's bits (the reference's storage)."""
    arr = np.load(io.BytesIO(raw), allow_pickle=False)
    if arr.dtype == np.uint16:
        return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16).float()
    return torch.from_numpy(np.asarray(arr, dtype=np.float32))


def arrow_files(folder: Path, what: str) -> list[Path]:
    """The data files `state.json` lists (datasets' save_to_disk layout)."""
    state = folder / STATE
    try:
        names = [f["filename"] for f in json.loads(state.read_text())["_data_files"]]
    except FileNotFoundError:
        raise ConfigError(f"{state}: missing ({what})") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{state}: not a datasets save_to_disk state ({type(e).__name__}: {e})") from None
    files = [folder / n for n in names]
    missing = [str(f) for f in files if not f.is_file()]
    if missing or not files:
        raise ConfigError(f"{folder}: data files {missing or '(none listed)'} missing ({what})")
    return files


class Split:
    """One preprocessed split, memory-mapped; `batch(rows)` decodes rows into stacked tensors."""

    def __init__(self, cfg, folder: Path, what: str, timesteps: bool):
        import pyarrow as pa

        self.folder, self.shapes = folder, shapes(cfg)
        self.files = arrow_files(folder, what)
        tables = []
        for f in self.files:
            try:
                tables.append(pa.ipc.open_stream(pa.memory_map(str(f))).read_all())
            except (pa.ArrowInvalid, OSError) as e:
                raise ConfigError(f"{f}: not an Arrow stream file ({str(e).splitlines()[0][:160]})") from None
        self.table = pa.concat_tables(tables)
        need = ARRAYS + (("timestep",) if timesteps else ())
        missing = [c for c in need if c not in self.table.column_names]
        if missing:
            raise ConfigError(
                f"{folder}: column(s) {', '.join(missing)} missing (has {', '.join(self.table.column_names)})"
            )
        self.cols = {c: self.table.column(c) for c in need}
        self.n = self.table.num_rows
        if self.n == 0:
            raise ConfigError(f"{folder}: no rows")
        first = self.batch([0])  # fail before init_stop on a wrong shape
        for c, shape in self.shapes.items():
            if tuple(first[c].shape[1:]) != shape:
                raise ConfigError(
                    f"{folder}: {c} has shape {tuple(first[c].shape[1:])}, this config needs {shape} "
                    "(text_max_length, joint_attention_dim, pooled_projection_dim, latent_channels, latent_size)"
                )

    def batch(self, rows) -> dict[str, torch.Tensor]:
        out = {c: torch.stack([decode(self.cols[c][int(i)].as_py()) for i in rows]) for c in ARRAYS}
        if "timestep" in self.cols:
            out["timestep"] = torch.tensor([int(self.cols["timestep"][int(i)].as_py()) for i in rows])
        return out


def empty_encodings(cfg, data_dir: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(T5, CLIP) encodings of the empty caption, shaped as one row's."""
    folder = Path(data_dir) / cfg.empty_encodings_dir
    want = shapes(cfg)
    out = []
    for name, col in (("t5_empty.npy", "t5_encodings"), ("clip_empty.npy", "clip_encodings")):
        path = folder / name
        if not path.is_file():
            raise ConfigError(f"{path}: missing ({origin(cfg, 'empty')})")
        t = decode(path.read_bytes())
        if t.numel() != int(np.prod(want[col])):
            raise ConfigError(f"{path}: {tuple(t.shape)} elements do not fit {col}'s {want[col]}")
        out.append(t.reshape(want[col]))
    return out[0], out[1]


def check_validation(cfg, val: Split) -> None:
    """The validation split holds eval_samples rows whose timesteps are 0 .. eval_timesteps - 1."""
    import pyarrow.compute as pc

    if val.n < cfg.eval_samples:
        raise ConfigError(f"{val.folder}: {val.n} rows, eval_samples needs {cfg.eval_samples}")
    ts = val.cols["timestep"].slice(0, cfg.eval_samples)
    lo, hi = pc.min(ts).as_py(), pc.max(ts).as_py()
    if lo is None or lo < 0 or hi >= cfg.eval_timesteps:
        raise ConfigError(
            f"{val.folder}: timestep values {lo}..{hi}, eval_timesteps {cfg.eval_timesteps} needs 0..{cfg.eval_timesteps - 1}"
        )


def splits(cfg, data_dir: str) -> tuple[Split, Split]:
    root = Path(data_dir)
    train = Split(cfg, root / cfg.train_dir, origin(cfg, "train"), timesteps=False)
    val = Split(cfg, root / cfg.eval_dir, origin(cfg, "eval"), timesteps=True)
    check_validation(cfg, val)
    return train, val


def write_split(folder: Path, rows: list[dict], timesteps: bool) -> list[Path]:
    """Write rows as save_to_disk does (state.json, dataset_info.json, one Arrow stream file):
    the tiny data in the full size's format, byte-identical on every prepare."""
    import pyarrow as pa

    folder.mkdir(parents=True, exist_ok=True)
    fields = [pa.field("__key__", pa.string())] + [pa.field(c, pa.binary()) for c in ARRAYS]
    fields += [pa.field("timestep", pa.int32())] if timesteps else []
    schema = pa.schema(fields)
    table = pa.table({f.name: [r[f.name] for r in rows] for f in fields}, schema=schema)
    name = "data-00000-of-00001.arrow"
    with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, schema) as w:
        w.write_table(table)
    (folder / STATE).write_text(json.dumps({"_data_files": [{"filename": name}], "_split": None}, indent=2))
    features = {f.name: {"dtype": str(f.type), "_type": "Value"} for f in fields}
    (folder / "dataset_info.json").write_text(json.dumps({"features": features}, indent=2))
    return [folder / name, folder / STATE, folder / "dataset_info.json"]


def npy_bf16(t: torch.Tensor) -> bytes:
    """A tensor as the reference stores it: bfloat16 bits as uint16, np.save'd."""
    buf = io.BytesIO()
    np.save(buf, t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16))
    return buf.getvalue()
