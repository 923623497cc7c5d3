"""The README's `results compare --plot` figures, from the published data shipped with the repo.

    python bench/readme_plots.py [OUT_DIR]      (default docs/)

The database is what `mlperf results ingest` writes for the published v4.1, v5.0 and v5.1 folders
(rounds/ of tests/data/fixtures.tar.xz), plus the official scores of the 88 published v3.0-v4.0
results (published_v3.0-v4.0/scores.csv of the same archive; their logs are not shipped: rows
with the summarizer's score, system and accelerator). With whole rounds ingested
(`mlperf results ingest training_results_vX.Y --round vX.Y`), `mlperf results compare -b
llama2_70b_lora --plot p.png` draws the same figure from them.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def database() -> pd.DataFrame:
    from fixtures import fixture_path

    from harness.review.results.ingest import RESULT_COLUMNS, ingest, load

    with tempfile.TemporaryDirectory() as tmp:
        rounds = fixture_path("rounds")
        db = Path(tmp) / "db"
        for r in ("v4.1", "v5.0", "v5.1"):
            ingest(str(rounds / r), r, str(db))
        df = load(str(db))
    old = pd.read_csv(fixture_path("published_v3.0-v4.0/scores.csv")).drop(
        columns=["submitter"]
    )  # the JSON's name; the folder's is kept
    old = old.rename(
        columns={
            "submitter_folder": "submitter",
            "system_folder": "system",
            "accelerator_model_name": "accelerator",
        }
    ).assign(accelerators=lambda d: d["accelerators_count"])
    old = old[[c for c in RESULT_COLUMNS if c in old.columns]]
    return pd.concat([old, df[df["round"] != "v4.0"]], ignore_index=True)


def main() -> int:
    from harness.review.results.plot import plot

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs")
    df = database()
    for bench in ("llama2_70b_lora", "rgat"):
        print(plot(df, bench, str(out / f"compare_{bench}.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
