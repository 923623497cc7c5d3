"""A torch-free stand-in for a reference implementation, for launcher tests: every rank reads the
plan; rank 0 writes a short MLPerf log through harness.core.mllog (seed, run_start, run_stop).

    python -m tests.integration.slurm_entry --plan PLAN.json
Exits 0, or 3 when the plan's config sets `global_batch_size` 13 (a "target not reached" run).
"""

from __future__ import annotations

import argparse
import os
import sys

from harness.core.mllog import MLLog
from harness.core.runplan import RunPlan


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", required=True)
    plan = RunPlan.load(ap.parse_args().plan)
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", 0)))
    world = int(os.environ.get("WORLD_SIZE", 1))
    log = MLLog(plan.log_path, rank)
    log.event("seed", plan.seed)
    log.event("harness_world", world, {"cache_cleared_env": os.environ.get("MLPERF_CACHE_CLEARED")})
    log.run_start()
    ok = plan.config.get("global_batch_size") != 13
    log.run_stop(ok)
    log.close()
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
