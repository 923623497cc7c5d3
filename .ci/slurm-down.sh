#!/bin/bash
# Stop what slurm-up.sh started (by PID file), then remove state. Safe to run twice.
STATE=${SLURM_CI_STATE:-/tmp/slurm-ci}
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s:0:1}" != Z ]; }  # zombie = dead
# 1) cancel every job and let slurmstepd clean up while slurmd is still there
if [ -s "$STATE/run/slurmctld.pid" ]; then
  squeue -h -o %i 2>/dev/null | xargs -r scancel
  for _ in $(seq 150); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
fi
# 2) stop daemons by PID
for p in "$STATE"/run/slurmd.pid "$STATE"/run/slurmctld.pid /run/munge/munged.pid; do
  [ -s "$p" ] || continue
  pid=$(cat "$p"); kill "$pid" 2>/dev/null || continue
  for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  alive "$pid" && { echo "pid $pid ($p) still alive, sending SIGKILL"; kill -9 "$pid"; }
done
# 3) remove state and generated config
[ -e "$STATE/run/cgroup.conf.ours" ] && rm -f /etc/slurm/cgroup.conf
rm -rf "$STATE" /etc/slurm/slurm.conf /etc/slurm/gres.conf
exit 0
