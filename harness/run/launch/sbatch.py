"""Render the sbatch script of an allocation: a readable artifact in the style of NVIDIA's `run.sub`.

One allocation runs the runs listed in RUN_DIRS one after another (`launcher.runs_as:
sequence`), or each task of a job array runs one of them (`array`). Per run:

    rendezvous    MASTER_ADDR = first host of the allocation (rack order when racks are listed),
                  MASTER_PORT from the job id and the run index (a fresh port per run)
    caches        page-cache drop where launcher.drop_caches allows it (as root or sudo -n),
                  exporting MLPERF_CACHE_CLEARED=1/0 so the log's cache_clear tells the truth,
                  and RUN_DIR/cache_cleared 1/0 so `mlperf run` says when a node refused
    time          --time = runs x launcher.time_limit_min + setup (jobinfo.time_limit)
    training      srun, one task per node (pyxis --container-* when a container is declared),
                  each running torchrun with N ranks: python -m torch.distributed.run ...
                  -m ENTRY --plan RUN_DIR/plan.json >> RUN_DIR/stdout.log
    exit code     RUN_DIR/exit_code (written atomically) as soon as the run ends; a failed run
                  does not stop the next one; SIGINT/SIGTERM to the batch shell (`scancel
                  --batch`) starts no further run
Node tuning runs once per allocation (only with --apply-tuning; otherwise shown as comments).

Every value from the descriptor or the plans is checked (harness/run/launch/script_values.py) and
goes through `shlex.quote`. The output depends only on its inputs (no clock, no host), which
keeps `--dry-run` diffable and the golden tests stable.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from harness.core.errors import ConfigError
from harness.run.launch import jobinfo, pyxis, topology
from harness.run.launch.script_values import check_launcher, q

REPO = jobinfo.REPO  # the checkout the job mounts and runs from


def job_name(plans) -> str:
    p, last = plans[0], plans[-1].run_index
    runs = f"r{p.run_index}" + (f"-{last}" if len(plans) > 1 else "")
    return f"mlperf-{p.benchmark}-{p.submission.system}-{runs}"


def runs_root(plans) -> Path:
    """The folder holding every run folder of these plans (results/runs/<bench>/<system>)."""
    parents = {Path(p.run_dir).parent for p in plans}
    if len(parents) != 1:
        raise ConfigError(f"runs of one allocation must share a folder, not {sorted(map(str, parents))}")
    return parents.pop()


def _header(plans, system, array: bool) -> list[str]:
    p, lay, lc = plans[0], plans[0].layout, system.launcher
    n = len(plans)
    minutes, time_text = jobinfo.time_limit(system, n)
    what = f"run {p.run_index + 1}" if n == 1 else f"runs {p.run_index + 1}..{plans[-1].run_index + 1}"
    how = "" if n == 1 else (" as a job array" if array else " in one allocation, one after another")
    L = [
        "#!/bin/bash",
        f"# MLPerf Training: {p.benchmark} ({p.size}) on {system.name}, {what}{how}; "
        f"rendered by mlperf-harness (harness/run/launch/sbatch.py).",
        f"# Layout: {lay.describe()}",
        "# Resubmit: sbatch job.sbatch (runs every run listed in RUN_DIRS again)",
        f"# {time_text}",
    ]
    sb = [("job-name", job_name(plans)), ("nodes", lay.nodes), ("ntasks-per-node", 1)]
    if system.accelerator.kind == "gpu":
        sb += [("gpus-per-node", lay.procs_per_node), ("exclusive", None)]
    else:
        sb.append(("cpus-per-task", lay.procs_per_node * p.threads_per_process))
    sb.append(("time", minutes))
    if array and n > 1:
        sb.append(("array", f"0-{n - 1}"))
    for key in ("partition", "account", "switches"):
        if getattr(lc, key):
            sb.append((key, getattr(lc, key)))
    out = Path(p.run_dir) / ("slurm-%A_%a.out" if array and n > 1 else "slurm-%j.out")
    sb += [("chdir", REPO), ("output", out), ("open-mode", "append")]
    L += [f"#SBATCH --{k}" + ("" if v is None else f"={q(v)}") for k, v in sb]
    return L


def render(plans, system, entry: str, apply_tuning: bool = False, python: str | None = None) -> str:
    """The sbatch script running `plans` (written to each RUN_DIR/job.sbatch, printed by --dry-run)."""
    check_launcher(system)
    pyxis.check(system.launcher.container, system.name)
    lc = system.launcher
    array = lc.runs_as == "array"
    p = plans[0]
    # In a container the image's python runs the code (pyxis.py mounts the checkout in place).
    python = python or ("python" if lc.container else sys.executable)
    per_node = 'srun --ntasks="$SLURM_NNODES" --ntasks-per-node=1'

    L = _header(plans, system, array)
    L += ["set -uo pipefail", ""]
    L.append(
        "# --- the runs (each folder: plan.json with its own seed, the MLPerf log, stdout.log, exit_code)"
    )
    L.append("RUN_DIRS=(")
    L += [f"  {q(x.run_dir)}" for x in plans]
    L += [")", ""]

    L.append("# --- environment of every rank (harness defaults + the descriptor's launcher.env)")
    env = {"OMP_NUM_THREADS": p.threads_per_process, "PYTHONUNBUFFERED": 1, "HF_HUB_OFFLINE": 1}
    env.update(lc.env)
    L += [f"export {k}={q(v)}" for k, v in env.items()]
    L.append("")

    if lc.node_tuning:
        if apply_tuning:
            L.append("# --- node tuning from the descriptor (--apply-tuning), once per allocation")
            for cmd in lc.node_tuning:
                L.append(f"{per_node} {shlex.join(shlex.split(cmd))} \\")
                L.append(f"  || echo {q('warning: node tuning failed: ' + cmd)} >&2")
        else:
            L.append("# --- node tuning from the descriptor: NOT applied (pass --apply-tuning to run these)")
            L += [f"#   {shlex.join(shlex.split(cmd))}" for cmd in lc.node_tuning]
        L.append("")

    L += _run_function(plans, system, entry, python, per_node)
    L.append("")
    L.append("# --- Ctrl-C of `mlperf run` (scancel --batch --signal=INT) or scancel: no further run")
    L.append("STOP=0")
    L.append("trap 'STOP=1' INT TERM")
    L.append("FAILED=0")
    if array and len(plans) > 1:
        L.append("# A job array: this task runs the run with its index.")
        L.append('INDEXES=("$SLURM_ARRAY_TASK_ID")')
    else:
        L.append('INDEXES=("${!RUN_DIRS[@]}")')
    L.append('for i in "${INDEXES[@]}"; do')
    L.append('  [ "$STOP" = 1 ] && break')
    L.append('  run_one "$i" || FAILED=$?   # a failed run does not stop the next one')
    L.append("done")
    L.append('exit "$FAILED"')
    return "\n".join(L) + "\n"


def _run_function(plans, system, entry: str, python: str, per_node: str) -> list[str]:
    lc, lay = system.launcher, plans[0].layout
    gpu = system.accelerator.kind == "gpu"
    L = ["# --- one run on the whole allocation: run_one INDEX", "run_one() {"]
    L.append("  local i=$1 RUN_DIR=${RUN_DIRS[$1]} rc")
    L.append("  # Rendezvous on the first host; the port follows the job id (jobs sharing a node don't")
    L.append("  # collide) and the run (the previous run's port may still be in TIME_WAIT).")
    if lc.racks:
        L.append("  # Hosts in rack order (launcher.racks) so TP/PP groups stay behind one leaf switch;")
        L.append("  # task i runs on line i (SLURM_HOSTFILE + --distribution=arbitrary) and is node rank i.")
        L.append('  scontrol show hostnames "$SLURM_JOB_NODELIST" \\')
        L.append(f"    | awk {q(topology.awk_program(lc.racks))} \\")
        L.append("    | sort | cut -d' ' -f3 > \"$RUN_DIR/hostfile\"")
        L.append('  export SLURM_HOSTFILE="$RUN_DIR/hostfile"')
        L.append('  MASTER_ADDR=$(head -n 1 "$SLURM_HOSTFILE")')
    else:
        L.append('  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)')
    L.append("  MASTER_PORT=$(( 20000 + (SLURM_JOB_ID * 16 + i) % 20000 ))")
    L.append("  export MASTER_ADDR MASTER_PORT")
    L.append(
        "  # Clear caches before the run (MLPerf rules); the log's cache_clear says whether it happened."
    )
    L.append("  export MLPERF_CACHE_CLEARED=0")
    if jobinfo.drop_caches(system):
        # Jobs run as the user: root drops directly, others through sudo -n (NVIDIA's run.sub
        # uses sudo), which fails at once where no passwordless rule exists.
        drop = "sysctl -q -w vm.drop_caches=3"
        root_or_sudo = f'if [ "$(id -u)" = 0 ]; then {drop}; else sudo -n {drop}; fi'
        L.append(f"  if {per_node} bash -c {q('sync && ' + root_or_sudo)}; then")
        L.append("    MLPERF_CACHE_CLEARED=1")
        L.append("  else")
        L.append(
            "    echo 'warning: could not drop the page cache (root or passwordless sudo sysctl "
            "needed on every node); logging cache_clear=false' >&2"
        )
        L.append("  fi")
    else:
        L.append("  # (no cache drop: launcher.drop_caches is false, or unset on a CPU system)")
    L.append(f'  echo "$MLPERF_CACHE_CLEARED" > "$RUN_DIR/{jobinfo.CACHE_FILE}"   # read by mlperf run')
    if system.power is not None:
        L += _power_start(python, system.power)
    L.append(f"  # Train: one torchrun per node, {lay.procs_per_node} rank(s) each.")
    srun = [f"{per_node} --kill-on-bad-exit=1"]
    if not gpu:
        srun.append(f"--cpus-per-task={lay.procs_per_node * plans[0].threads_per_process}")
    if lc.racks:
        srun.append("--distribution=arbitrary")
    if lc.container:
        srun += pyxis.srun_flags(lc.container, REPO, runs_root(plans), plans[0].data_dir)
    if lc.racks:
        # Static rendezvous with the node rank from the rack-ordered hostfile (c10d would rank
        # nodes by host name); SLURM_PROCID is expanded per task, hence the small bash wrapper.
        srun.append("bash -c 'PET_NODE_RANK=$SLURM_PROCID exec \"$@\"' bash")
        rdzv = '--master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT"'
    else:
        rdzv = '--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$SLURM_JOB_ID-$i"'
    if lay.nodes > 1:
        # Container start-up on a thousand nodes can outlast the default 600 s join timeout.
        rdzv += " --rdzv-conf=join_timeout=1800"
    torchrun = [
        f"{q(python)} -m torch.distributed.run",
        f'--nnodes="$SLURM_NNODES" --nproc-per-node={lay.procs_per_node}',
        rdzv,
        f'-m {q(entry)} --plan "$RUN_DIR/plan.json" >> "$RUN_DIR/stdout.log" 2>&1',
    ]
    parts = srun + torchrun
    L += [("  " if i == 0 else "    ") + x + " \\" for i, x in enumerate(parts[:-1])]
    L.append("    " + parts[-1])
    L.append("  rc=$?")
    if system.power is not None:
        L += _power_stop(python, system.power)
    L.append("  # The launcher reads the run's end from here (atomically: it never sees half a number).")
    L.append('  echo "$rc" > "$RUN_DIR/exit_code.tmp" && mv -f "$RUN_DIR/exit_code.tmp" "$RUN_DIR/exit_code"')
    L.append('  return "$rc"')
    L.append("}")
    return L


def _power_start(python: str, power) -> list[str]:
    """MLPerf Power (the descriptor's power:): the samplers, started before training, which waits
    for every node's first reading. per-node: one `srun --overlap` step, a task on each node
    beside the training step; central: one process per node in this batch shell (the first node
    of the allocation), each reading its node's BMC over the network."""
    py = q(python)
    args = (
        '--spec "$RUN_DIR/power/power.json" --node "$n" --hostname "$h" '
        '--out "$RUN_DIR/power/node_$n.raw.jsonl" --stop-file "$RUN_DIR/power/stop"'
    )
    L = [
        f"  # MLPerf Power ({power.sampler} samplers, harness/run/power/job.py): no training before every",
        "  # node's first reading; after it a stop file (each takes its last reading), then by pid.",
        '  rm -f "$RUN_DIR"/power/node_*.raw.jsonl "$RUN_DIR"/power/node_*.gpu.jsonl "$RUN_DIR/power/stop"',
        "  POWER_T0=$(date +%s%3N)",
    ]
    if power.sampler == "per-node":
        task = (
            '\'n=$SLURM_NODEID h=$(hostname -s); RUN_DIR=$1; exec "$0" -m harness.run.power.sampler '
            + args
            + "'"
        )
        L += [
            f'  srun --overlap --ntasks="$SLURM_NNODES" --ntasks-per-node=1 bash -c {task} {py} "$RUN_DIR" \\',
            '    >> "$RUN_DIR/power/sampler.log" 2>&1 &',
            "  SAMPLERS=($!)",
        ]
    else:
        L += [
            "  SAMPLERS=() n=0",
            '  for h in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do',
            f'    {py} -m harness.run.power.sampler {args} >> "$RUN_DIR/power/sampler.log" 2>&1 &',
            "    SAMPLERS+=($!) n=$((n + 1))",
            "  done",
        ]
    L += [
        f'  if ! {py} -m harness.run.power.job wait "$RUN_DIR" --nodes "$SLURM_NNODES" --pid "${{SAMPLERS[@]}}"; then',
        '    kill "${SAMPLERS[@]}" 2>/dev/null; wait "${SAMPLERS[@]}"',
        '    echo 2 > "$RUN_DIR/exit_code.tmp" && mv -f "$RUN_DIR/exit_code.tmp" "$RUN_DIR/exit_code"',
        "    return 2",
        "  fi",
    ]
    return L


def _power_stop(python: str, power) -> list[str]:
    return [
        f'  {q(python)} -m harness.run.power.job stop "$RUN_DIR" --pid "${{SAMPLERS[@]}}" --interval-s {power.interval_s} \\',
        '    --started-ms "$POWER_T0" --hostnames $(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        '  touch "$RUN_DIR/power/stop"   # each sampler takes its last reading and ends (srun would kill on TERM)',
        "  for _ in $(seq 100); do",
        '    up=0; for p in "${SAMPLERS[@]}"; do kill -0 "$p" 2>/dev/null && up=1; done',
        '    [ "$up" = 0 ] && break; sleep 0.1',
        "  done",
        '  kill -TERM "${SAMPLERS[@]}" 2>/dev/null; wait "${SAMPLERS[@]}"   # by pid, whatever happened above',
    ]
