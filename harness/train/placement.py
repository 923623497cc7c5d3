"""Where each rank runs: RUN_DIR/ranks.json, written by rank 0 once the process group is up.

    [{"rank": 0, "local_rank": 0, "node_id": 0, "hostname": "n1", "slurm_node_id": 0, "pid": 4711}, ...]

`node_id` is the node rank of the rendezvous (torchrun's GROUP_RANK; SLURM_NODEID without
torchrun; 0 for one process), `slurm_node_id` Slurm's own node index (null outside Slurm): the
two differ when c10d ranks nodes in join order. One all_gather_object at start-up, nothing per
step. A resumed run rewrites the file: it shows where the newest attempt ran.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from harness.core.files import atomic_write
from harness.core.runfolder import RANKS_FILE


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def record(rt) -> None:
    """Gather every rank's place; rank 0 writes ranks.json into the run folder."""
    me = {
        "rank": rt.rank,
        "local_rank": rt.local_rank,
        "node_id": _env_int("GROUP_RANK", "SLURM_NODEID") or 0,
        "hostname": socket.gethostname(),
        "slurm_node_id": _env_int("SLURM_NODEID"),
        "pid": os.getpid(),
    }
    rows = [me]
    if rt.world_size > 1:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rows = [None] * rt.world_size
            dist.all_gather_object(rows, me)
    if rt.rank == 0:
        atomic_write(Path(rt.plan.run_dir) / RANKS_FILE, json.dumps(rows, indent=1) + "\n")
