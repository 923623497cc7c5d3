#!/bin/bash
# Stop what slurm-up.sh started (by PID file), remove its /etc/hosts lines and its state; check
# that no process is left in the UTS namespaces of a two-node cluster. Safe to run twice.
# Exit: 0 clean; 1 something could not be removed (said on stderr).
STATE=${SLURM_CI_STATE:-/tmp/slurm-ci}
MARK="# slurm-ci"
rc=0
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s:0:1}" != Z ]; }  # zombie = dead
stop() {  # stop() PID WHAT: SIGTERM, wait up to 10 s, then SIGKILL
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 100); do alive "$1" || return 0; sleep 0.1; done
  echo "slurm-down: pid $1 ($2) still alive, sending SIGKILL" >&2; kill -9 "$1" 2>/dev/null
}
# 1) cancel every job and let slurmstepd clean up while slurmd is still there
if [ -s "$STATE/run/slurmctld.pid" ]; then
  squeue -h -o %i 2>/dev/null | xargs -r scancel
  for _ in $(seq 150); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
fi
# 2) stop daemons by PID (slurmd first: the controller must not see them as failed nodes)
for p in "$STATE"/run/slurmd*.pid "$STATE"/run/slurmctld.pid "$STATE"/run/munged.pid; do
  [ -s "$p" ] || continue
  stop "$(cat "$p")" "$p"
done
# 3) the namespaces vanish with their last process: anything still in one (a step daemon that
#    outlived its slurmd) was started by our slurmd, so it is ours to stop
pids_in() {  # pids_in NS: processes in that UTS namespace (one ls, not a readlink per process)
  ls -l /proc/[0-9]*/ns/uts 2>/dev/null | awk -v ns="$1" '$NF == ns { split($(NF-2), a, "/"); print a[3] }'
}
for f in "$STATE"/run/uts.*; do
  [ -s "$f" ] || continue
  ns=$(cat "$f")
  for pid in $(pids_in "$ns"); do stop "$pid" "left in $ns"; done
  for pid in $(pids_in "$ns"); do
    alive "$pid" && { echo "slurm-down: pid $pid is still in namespace $ns" >&2; rc=1; }
  done
done
# 4) our /etc/hosts lines (in place: /etc/hosts may be a bind mount)
if grep -q " $MARK\$" /etc/hosts 2>/dev/null; then
  kept=$(grep -v " $MARK\$" /etc/hosts)
  printf '%s\n' "$kept" > /etc/hosts || { echo "slurm-down: could not rewrite /etc/hosts" >&2; rc=1; }
fi
# 5) remove state and generated config
[ -e "$STATE/run/cgroup.conf.ours" ] && rm -f /etc/slurm/cgroup.conf
rm -rf "$STATE" /etc/slurm/slurm.conf /etc/slurm/gres.conf
exit $rc
