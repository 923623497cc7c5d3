"""`mlperf results ingest ROUND_ROOT --round v4.0`: score a published round into a results table.

Layout under the database folder (default `results/db/`):
    <round>            -> a symlink to the round's current snapshot folder `.<round>-<id>/`
    .<round>-<id>/results.parquet   one row per (submitter, system, benchmark) result
    .<round>-<id>/runs.parquet      one row per run (result_<i>.txt)
Re-ingesting a round writes a new snapshot and swaps the symlink with `os.replace` (atomic: a
reader sees the old round or the new one, never a mix), then removes the old snapshot.
Every row records the round, the mlperf-logging version and the ruleset it was scored under
(`--ruleset`, else the round's: v5.0 -> 5.0.0), its energy where the folder has power logs, and
the end-to-end throughput of its runs (progress per second per accelerator, for `diagnose`).
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from importlib import metadata

from harness.core import rulesets as rules
from harness.core.errors import ConfigError
from harness.review.results.score import score_tree

DEFAULT_DB = os.path.join("results", "db")
ROUND_RE = re.compile(r"^v?\d+\.\d+$")

RESULT_COLUMNS = [
    "round",
    "submitter",
    "system",
    "benchmark",
    "division",
    "availability",
    "system_name",
    "accelerator",
    "accelerators",
    "nodes",
    "runs",
    "runs_scored",
    "olympic_mean_min",
    "scaling_factor",
    "score_min",
    "accelerator_minutes",
    "energy_j",
    "framework",
    "progress_unit",
    "progress_per_s",
    "progress_per_s_per_acc",
    "problems",
    "path",
    "ruleset",
    "ruleset_source",
    "checked",
    "mlperf_logging",
    "run_ids",  # ';'-joined '<run_start ms>-<run_stop ms>' of its runs: compare.duplicates
    "submission_org",  # the org its logs name
]
# columns newer than some stored rounds: read as missing (no duplicate detection), not an error
_OPTIONAL = {"run_ids", "submission_org"}


def normalise_round(name: str) -> str:
    name = name.strip()
    if not ROUND_RE.match(name):
        raise ConfigError(f"round '{name}' is not like v4.0")
    return name if name.startswith("v") else "v" + name


def _logging_version() -> str:
    try:
        return metadata.version("mlperf-logging")
    except metadata.PackageNotFoundError:
        return "unknown"


def rows_for(
    round_root: str, round_name: str, ruleset: str | None = None, check: bool = True
) -> tuple[list[dict], list[dict]]:
    """(result rows, run rows) for every result folder under round_root."""
    version = _logging_version()
    results, runs = [], []
    for r in score_tree(round_root, with_runs=True, check=check, ruleset=ruleset, round_name=round_name):
        scored = [m for m in r["run_minutes"] if m is not None]
        acc = r["accelerators"]
        row = {
            "round": round_name,
            **{k: r.get(k) for k in RESULT_COLUMNS if k in r},
            "runs_scored": len(scored),
            "accelerator_minutes": (r["score_min"] * acc) if r["score_min"] is not None and acc else None,
            "progress_per_s_per_acc": r["progress_per_s"] / acc if r["progress_per_s"] and acc else None,
            "problems": "; ".join(r["problems"]),
            "mlperf_logging": version,
            "run_ids": ";".join(r["run_ids"]),
        }
        results.append({k: row.get(k) for k in RESULT_COLUMNS})
        for i, d in enumerate(r["run_details"]):
            runs.append(
                {
                    "round": round_name,
                    "submitter": r["submitter"],
                    "system": r["system"],
                    "benchmark": r["benchmark"],
                    "file": os.path.basename(d["path"]),
                    "run": i,
                    "minutes": d["minutes"],
                    "counted_minutes": r["run_minutes"][i],
                    "status": d["status"],
                    "global_batch_size": _num(d["global_batch_size"]),
                    "seed": _num(d["seed"]),
                    "energy_j": d["energy_j"],
                    "progress_unit": d["progress_unit"],
                    "progress_per_s": d["progress_per_s"],
                    "tracked_throughput": d["tracked_throughput"],
                    "problems": "; ".join(d["problems"]),
                }
            )
    return results, runs


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def ingest(
    round_root: str, round_name: str, db: str = DEFAULT_DB, ruleset: str | None = None, check: bool = True
) -> dict:
    import pandas as pd

    if not os.path.isdir(round_root):
        raise ConfigError(f"no such directory: {round_root}")
    round_name = normalise_round(round_name)
    ruleset = rules.resolve(ruleset, round_name=round_name)[0] if ruleset else None
    if ruleset is None:
        rules.resolve(round_name=round_name)  # one clear line for a round the package does not know
    results, runs = rows_for(round_root, round_name, ruleset, check)
    if not results:
        raise ConfigError(
            f"no result folders (<org>/results/<system>/<benchmark>/result_*.txt) under {round_root}"
        )
    os.makedirs(db, exist_ok=True)
    snap = os.path.join(db, f".{round_name}-{uuid.uuid4().hex[:12]}")
    os.makedirs(snap)
    try:
        pd.DataFrame(results, columns=RESULT_COLUMNS).to_parquet(
            os.path.join(snap, "results.parquet"), index=False
        )
        pd.DataFrame(runs).to_parquet(os.path.join(snap, "runs.parquet"), index=False)
        link = os.path.join(db, round_name)
        old = os.path.realpath(link) if os.path.islink(link) else None
        if os.path.exists(link) and not os.path.islink(link):
            raise ConfigError(f"{link} exists and is not a round snapshot link; move it away")
        tmp_link = os.path.join(db, f".{round_name}.link-{uuid.uuid4().hex[:8]}")
        os.symlink(os.path.basename(snap), tmp_link)
        os.replace(tmp_link, link)  # the atomic step
    except BaseException:
        shutil.rmtree(snap, ignore_errors=True)
        raise
    if old and os.path.isdir(old) and old != os.path.realpath(snap):
        shutil.rmtree(old, ignore_errors=True)
    return {
        "round": round_name,
        "ruleset": ", ".join(sorted({r["ruleset"] for r in results})),
        "db": db,
        "results": len(results),
        "runs": len(runs),
        "scored": sum(r["score_min"] is not None for r in results),
        "with_energy": sum(r["energy_j"] is not None for r in results),
        "path": os.path.join(db, round_name),
        "warnings": [
            f"{r['submitter']}/{r['system']}/{r['benchmark']}: {r['problems']}"
            for r in results
            if r["problems"]
        ],
    }


def load(db: str = DEFAULT_DB, rounds: list[str] | None = None, table: str = "results"):
    """The stored table (results or runs) for the given rounds (all when None)."""
    import pandas as pd

    if not os.path.isdir(db):
        raise ConfigError(
            f"no results database at {db}: run `mlperf results ingest ROUND_ROOT --round vX.Y` first"
        )
    available = sorted(
        n for n in os.listdir(db) if not n.startswith(".") and os.path.isdir(os.path.join(db, n))
    )
    wanted = [normalise_round(r) for r in rounds] if rounds else available
    missing = [r for r in wanted if r not in available]
    if missing:
        raise ConfigError(
            f"round(s) {', '.join(missing)} not ingested; available: {', '.join(available) or 'none'}"
        )
    frames = [_read_table(os.path.join(db, r, f"{table}.parquet"), r, table) for r in wanted]
    if not frames:
        raise ConfigError(f"no rounds ingested in {db}")
    return pd.concat(frames, ignore_index=True)


# What every reader of the database may index: a snapshot without them is not one we wrote.
REQUIRED = {
    "results": [c for c in RESULT_COLUMNS if c not in _OPTIONAL],
    "runs": ["round", "submitter", "system", "benchmark", "file", "minutes"],
}


def _read_table(path: str, round_name: str, table: str):
    """One round's table; a missing, unreadable or foreign parquet is one ConfigError line saying
    how to rebuild it (the published folders are the source; the database is only a cache)."""
    import pandas as pd

    fix = f"re-ingest it: mlperf results ingest ROUND_ROOT --round {round_name}"
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: missing (round {round_name} is incomplete); {fix}")
    try:
        frame = pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises many kinds for a damaged file
        raise ConfigError(f"{path}: not a readable parquet table ({type(e).__name__}); {fix}") from None
    missing = [c for c in REQUIRED[table] if c not in frame.columns]
    if missing:
        raise ConfigError(f"{path}: no {', '.join(missing[:3])} column(s): not a {table} table; {fix}")
    return frame
