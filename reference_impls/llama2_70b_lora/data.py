"""GovReport (SCROLLS) in the MLPerf reference format, and the deterministic batch order.

The reference dataset is two parquet files, `train-00000-of-00001.parquet` (3,901 rows) and
`validation-00000-of-00001.parquet` (173 rows), with token-id list columns `input_ids` and
`labels` (labels = input_ids with -100 on the prompt, so only the summary is scored; an
`attention_mask` column may be present and is not needed: padding is on the right and the model
is causal). Rows are padded with pad id 0 / label -100 (or truncated) to max_sequence_length.
"""

from __future__ import annotations

from pathlib import Path

import torch

from harness.core.errors import ConfigError

TRAIN_FILE = "train-00000-of-00001.parquet"
EVAL_FILE = "validation-00000-of-00001.parquet"
COLUMNS = ("input_ids", "labels")
IGNORE = -100
SOURCE = (
    "the MLCommons preprocessed GovReport (scrolls_gov_report_preprocessed_mlperf); "
    "tiny size: `mlperf prepare llama2_70b_lora --size tiny`"
)


def dataset_files(data_dir: Path, cfg) -> tuple[Path, Path]:
    root = Path(data_dir) / cfg.dataset_dir
    out = (root / TRAIN_FILE, root / EVAL_FILE)
    for f in out:
        if not f.exists():
            raise ConfigError(f"dataset file {f} is missing; it comes from {SOURCE}")
    return out


def check_columns(path: Path) -> int:
    """Row count from the parquet metadata (does not read the data); ConfigError for wrong columns."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except Exception as e:  # pyarrow raises several types for a non-parquet file
        raise ConfigError(f"{path}: not a readable parquet file ({str(e).splitlines()[0]})") from None
    names = meta.schema.to_arrow_schema().names
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise ConfigError(
            f"{path}: missing column(s) {', '.join(missing)} (has {', '.join(names)}); "
            f"the reference format needs input_ids and labels token-id lists"
        )
    return meta.num_rows


def load_split(path: Path, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, labels) as [N, seq_len] int64 tensors, right-padded (pad 0, label -100) or truncated."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_columns(path)
    table = pq.read_table(path, columns=list(COLUMNS))
    out = []
    lengths = None
    for name, fill in (("input_ids", 0), ("labels", IGNORE)):
        col = table.column(name).combine_chunks()
        if not pa.types.is_list(col.type) and not pa.types.is_large_list(col.type):
            raise ConfigError(f"{path}: column {name} is {col.type}, expected a list of token ids")
        offsets = col.offsets.to_numpy()
        values = col.values.to_numpy(zero_copy_only=False).astype(np.int64)
        n = len(offsets) - 1
        lens = np.diff(offsets)
        if lengths is not None and not np.array_equal(lens, lengths):
            raise ConfigError(f"{path}: input_ids and labels differ in length in some rows")
        lengths = lens
        arr = np.full((n, seq_len), fill, dtype=np.int64)
        for i in range(n):
            m = min(int(lens[i]), seq_len)
            arr[i, :m] = values[offsets[i] : offsets[i] + m]
        out.append(torch.from_numpy(arr))
    return out[0], out[1]


def shift_labels(labels: torch.Tensor) -> torch.Tensor:
    """Target of position t is label t+1 (shifted once, up front, so CP shards stay aligned)."""
    out = torch.full_like(labels, IGNORE)
    out[:, :-1] = labels[:, 1:]
    return out
