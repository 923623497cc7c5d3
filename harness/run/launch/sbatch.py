"""Render the sbatch script of one run: a readable artifact in the style of NVIDIA's `run.sub`.

    #SBATCH lines        nodes, one task per node, GPUs, time, partition/account, --switches
    environment          OMP_NUM_THREADS + the descriptor's NCCL_*/UCX_* (launcher.env)
    rendezvous           MASTER_ADDR = first host (rack order when racks are listed),
                         MASTER_PORT = 20000 + job id % 20000
    prologue             node tuning (only with --apply-tuning; otherwise shown as comments),
                         page-cache drop where launcher.drop_caches allows it, exporting
                         MLPERF_CACHE_CLEARED=1/0 so the log's cache_clear tells the truth
    training             srun, one task per node (pyxis --container-* when an image is named),
                         each running torchrun with N ranks: python -m torch.distributed.run
                         ... -m ENTRY --plan RUN_DIR/plan.json

Every value from the descriptor or the plan goes through `shlex.quote`, and values that carry
shell metacharacters are refused before rendering (ConfigError naming the field), so a system
file can never smuggle code into a job. The output depends only on its inputs (no clock, no
host), which keeps `--dry-run` diffable and the golden test stable.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from harness.core.errors import ConfigError
from harness.run.launch import topology

REPO = Path(__file__).resolve().parents[3]

# A value may not contain these: they start commands, substitutions or redirections in bash.
_META = set("`$;&|<>()\\'\"\n\r\t\0")
# Slurm names (partition, account, host): a stricter id alphabet.
_SLURM_ID = re.compile(r"[A-Za-z0-9_.@+-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_value(field: str, value: str, system_name: str, *, slurm_id: bool = False) -> str:
    """Refuse a descriptor value that would inject shell code (or is not a Slurm name)."""
    bad = sorted({c for c in value if c in _META or ord(c) < 32})
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise ConfigError(
            f"system '{system_name}': {field} {value!r} contains shell metacharacter(s) {shown}; refused"
        )
    if slurm_id and value and not _SLURM_ID.fullmatch(value):
        raise ConfigError(
            f"system '{system_name}': {field} {value!r} is not a valid Slurm name (letters, digits, '_.@+-')"
        )
    return value


def _checked_launcher(system) -> None:
    lc, name = system.launcher, system.name
    check_value("launcher.partition", lc.partition, name, slurm_id=True)
    check_value("launcher.account", lc.account, name, slurm_id=True)
    check_value("launcher.container_image", lc.container_image, name)
    if " " in lc.container_image:
        raise ConfigError(
            f"system '{name}': launcher.container_image {lc.container_image!r} contains a space"
        )
    for i, m in enumerate(lc.container_mounts):
        check_value(f"launcher.container_mounts[{i}]", m, name)
        if "," in m or " " in m:
            raise ConfigError(
                f"system '{name}': launcher.container_mounts[{i}] {m!r}: one SRC:DST[:FLAGS] "
                f"per entry, without ',' or spaces"
            )
    for k, v in lc.env.items():
        if not _ENV_NAME.fullmatch(k):
            raise ConfigError(f"system '{name}': launcher.env key {k!r} is not an environment variable name")
        check_value(f"launcher.env.{k}", str(v), name)
    for i, cmd in enumerate(lc.node_tuning):
        check_value(f"launcher.node_tuning[{i}]", cmd, name)
    for r, rack in enumerate(lc.racks):
        for h in rack:
            check_value(f"launcher.racks[{r}]", h, name, slurm_id=True)


def _q(value) -> str:
    return shlex.quote(str(value))


def job_name(plan) -> str:
    return f"mlperf-{plan.benchmark}-{plan.submission.system}-r{plan.run_index}"


def render(plan, system, entry: str, apply_tuning: bool = False, python: str | None = None) -> str:
    """The sbatch script for one run (written to RUN_DIR/job.sbatch and printed by --dry-run)."""
    _checked_launcher(system)
    lc = system.launcher
    lay = plan.layout
    gpu = system.accelerator.kind == "gpu"
    run_dir = Path(plan.run_dir)
    # In a container the image's python runs the code; the checkout is mounted at the same path
    # so that the absolute paths inside plan.json stay valid.
    python = python or ("python" if lc.container_image else sys.executable)

    L: list[str] = ["#!/bin/bash"]
    L.append(
        f"# MLPerf Training: {plan.benchmark} ({plan.size}) on {system.name}, run {plan.run_index + 1}; "
        f"rendered by mlperf-harness (harness/run/launch/sbatch.py)."
    )
    L.append(f"# Layout: {lay.describe()}")
    L.append("# Resubmit: sbatch job.sbatch (the run's plan and logs live in RUN_DIR below)")
    sb = [("job-name", job_name(plan)), ("nodes", lay.nodes), ("ntasks-per-node", 1)]
    if gpu:
        sb += [("gpus-per-node", lay.procs_per_node), ("exclusive", None)]
    else:
        sb.append(("cpus-per-task", lay.procs_per_node * plan.threads_per_process))
    sb.append(("time", lc.time_limit_min))
    if lc.partition:
        sb.append(("partition", lc.partition))
    if lc.account:
        sb.append(("account", lc.account))
    if lc.switches:
        sb.append(("switches", lc.switches))
    sb += [("chdir", REPO), ("output", run_dir / "stdout.log"), ("open-mode", "append")]
    for k, v in sb:
        L.append(f"#SBATCH --{k}" + ("" if v is None else f"={_q(v)}"))
    L += ["set -uo pipefail", "", f"RUN_DIR={_q(run_dir)}", 'PLAN="$RUN_DIR/plan.json"', ""]

    L.append("# --- environment of every rank (harness defaults + the descriptor's launcher.env)")
    env = {"OMP_NUM_THREADS": plan.threads_per_process, "PYTHONUNBUFFERED": 1, "HF_HUB_OFFLINE": 1}
    env.update(lc.env)
    L += [f"export {k}={_q(v)}" for k, v in env.items()]
    L.append("")

    L.append("# --- rendezvous: the first host runs the store; the port follows the job id so that jobs")
    L.append("#     sharing a node don't collide")
    if lc.racks:
        L.append("# Hosts in rack order (launcher.racks) so TP/PP groups stay behind one leaf switch;")
        L.append("# task i runs on line i (SLURM_HOSTFILE + --distribution=arbitrary) and is node rank i.")
        L.append('scontrol show hostnames "$SLURM_JOB_NODELIST" \\')
        L.append(f"  | awk {_q(topology.awk_program(lc.racks))} \\")
        L.append("  | sort | cut -d' ' -f3 > \"$RUN_DIR/hostfile\"")
        L.append('export SLURM_HOSTFILE="$RUN_DIR/hostfile"')
        L.append('MASTER_ADDR=$(head -n 1 "$SLURM_HOSTFILE")')
    else:
        L.append('MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)')
    L.append("MASTER_PORT=$(( 20000 + SLURM_JOB_ID % 20000 ))")
    L.append("export MASTER_ADDR MASTER_PORT")
    L.append("")

    per_node = 'srun --ntasks="$SLURM_NNODES" --ntasks-per-node=1'
    if lc.node_tuning:
        if apply_tuning:
            L.append("# --- node tuning from the descriptor (--apply-tuning)")
            for cmd in lc.node_tuning:
                argv = shlex.join(shlex.split(cmd))
                L.append(f"{per_node} {argv} \\")
                L.append(f"  || echo {_q('warning: node tuning failed: ' + cmd)} >&2")
        else:
            L.append("# --- node tuning from the descriptor: NOT applied (pass --apply-tuning to run these)")
            L += [f"#   {shlex.join(shlex.split(cmd))}" for cmd in lc.node_tuning]
        L.append("")

    L.append(
        "# --- clear caches before the run (MLPerf rules); the log's cache_clear says whether it happened"
    )
    L.append("export MLPERF_CACHE_CLEARED=0")
    if lc.drop_caches:
        L.append(f"if {per_node} bash -c 'sync && sysctl -q -w vm.drop_caches=3'; then")
        L.append("  MLPERF_CACHE_CLEARED=1")
        L.append("else")
        L.append("  echo 'warning: could not drop the page cache; logging cache_clear=false' >&2")
        L.append("fi")
    else:
        L.append("# (launcher.drop_caches is false: jobs on this cluster may not drop the page cache)")
    L.append("")

    L.append(f"# --- train: one torchrun per node, {lay.procs_per_node} rank(s) each")
    srun = [f"{per_node} --kill-on-bad-exit=1"]
    if not gpu:
        srun.append(f"--cpus-per-task={lay.procs_per_node * plan.threads_per_process}")
    if lc.racks:
        srun.append("--distribution=arbitrary")
    if lc.container_image:
        # The checkout, the run folder and the data appear at the same paths inside the container,
        # so plan.json's absolute paths (log, data) hold there too.
        same = [str(REPO), str(run_dir), str(plan.data_dir)]
        for p in same:
            if any(c in p for c in ",: ") or any(c in _META for c in p):
                raise ConfigError(
                    f"path {p!r} cannot be a pyxis container mount (',', ':' or a space in it); "
                    f"use --results-dir/--data-dir without them"
                )
        rest = ",".join(
            [f"{p}:{p}" for p in dict.fromkeys(same[2:]) if p != same[0]] + list(lc.container_mounts)
        )
        srun.append(f"--container-image={_q(lc.container_image)}")
        srun.append(
            f"--container-mounts={_q(f'{REPO}:{REPO}')}"
            + ',"$RUN_DIR:$RUN_DIR"'
            + (f",{_q(rest)}" if rest else "")
        )
        srun.append(f"--container-workdir={_q(REPO)}")
    if lc.racks:
        # Static rendezvous with the node rank from the rack-ordered hostfile (c10d would rank
        # nodes by host name); SLURM_PROCID is expanded per task, hence the small bash wrapper.
        srun.append("bash -c 'PET_NODE_RANK=$SLURM_PROCID exec \"$@\"' bash")
        rdzv = '--master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT"'
    else:
        rdzv = '--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$SLURM_JOB_ID"'
    if lay.nodes > 1:
        # Container start-up on a thousand nodes can outlast the default 600 s join timeout.
        rdzv += " --rdzv-conf=join_timeout=1800"
    torchrun = [
        f"{_q(python)} -m torch.distributed.run",
        f'--nnodes="$SLURM_NNODES" --nproc-per-node={lay.procs_per_node}',
        rdzv,
        f'-m {_q(entry)} --plan "$PLAN"',
    ]
    parts = srun + torchrun
    L += [("" if i == 0 else "  ") + p + " \\" for i, p in enumerate(parts[:-1])]
    L.append("  " + parts[-1])
    return "\n".join(L) + "\n"
