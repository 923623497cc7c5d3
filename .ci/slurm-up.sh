#!/bin/bash
# Start a single-node Slurm cluster (munged + slurmctld + slurmd) without systemd, for the
# integration tests (tests/integration/test_slurm.py, system descriptor systems/cpu-slurm.yaml).
# Recipe and pitfalls: ../shared/notes/slurm-local.md. Needs root. Idempotent: exits 0 at once
# when the node already answers `idle`.
# Env: SLURM_CI_CPUS (default: nproc), SLURM_CI_GPUS (fake GPUs, default 0),
#      SLURM_CI_STATE (state/log dir, default /tmp/slurm-ci),
#      SLURM_CI_NO_INSTALL=1 (never apt-get install; fail if the packages are missing)
set -euo pipefail
HOST=$(hostname -s)
CPUS=${SLURM_CI_CPUS:-$(nproc)}
GPUS=${SLURM_CI_GPUS:-0}
STATE=${SLURM_CI_STATE:-/tmp/slurm-ci}
MEM=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 1024 ))   # MiB, 1 GiB headroom

# --- packages (skipped when installed) --------------------------------------
if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/munged ] \
   || ! command -v sbatch >/dev/null; then
  [ "${SLURM_CI_NO_INSTALL:-0}" = 1 ] && { echo "slurm-up: Slurm/munge not installed" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "slurm-up: must run as root to install Slurm" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
    || { apt-get update -qq && apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null; }
fi
[ "$(id -u)" = 0 ] || { echo "slurm-up: must run as root (slurmd starts tasks as the submitter)" >&2; exit 1; }

# --- already up? --------------------------------------------------------------
case "$(sinfo -h -N -o %t 2>/dev/null || true)" in
  idle|alloc|mix|comp) [ -s "$STATE/run/slurmctld.pid" ] && exit 0 ;;
esac
if [ -s /etc/slurm/slurm.conf ] && ! grep -q '^ClusterName=ci$' /etc/slurm/slurm.conf \
   && [ "${SLURM_CI_FORCE:-0}" != 1 ]; then
  echo "slurm-up: /etc/slurm/slurm.conf belongs to another cluster; not replacing it (SLURM_CI_FORCE=1 to do so)" >&2
  exit 1
fi
mkdir -p "$STATE"/ctld "$STATE"/slurmd "$STATE"/log "$STATE"/run /etc/slurm

# --- munge -----------------------------------------------------------------
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
fi
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged        # forks; pid in /run/munge/munged.pid
  for _ in $(seq 100); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.05; done
  munge -n | unmunge >/dev/null
fi

# --- config ----------------------------------------------------------------
EXTRA_NODE=""; GRES_LINE=""
if [ "$GPUS" -gt 0 ]; then
  mkdir -p "$STATE"/fakegpu
  for i in $(seq 0 $((GPUS-1))); do
    [ -c "$STATE/fakegpu/nvidia$i" ] || mknod "$STATE/fakegpu/nvidia$i" c 195 "$i"
  done
  EXTRA_NODE=" Gres=gpu:$GPUS"; GRES_LINE="GresTypes=gpu"
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s/fakegpu/nvidia[0-%d]\n' \
    "$HOST" "$STATE" $((GPUS-1)) > /etc/slurm/gres.conf
fi
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=ci
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
KillWait=5
SlurmdParameters=config_overrides
${GRES_LINE}
StateSaveLocation=${STATE}/ctld
SlurmdSpoolDir=${STATE}/slurmd
SlurmctldPidFile=${STATE}/run/slurmctld.pid
SlurmdPidFile=${STATE}/run/slurmd.pid
SlurmctldLogFile=${STATE}/log/slurmctld.log
SlurmdLogFile=${STATE}/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} Sockets=1 CoresPerSocket=${CPUS} ThreadsPerCore=1 RealMemory=${MEM}${EXTRA_NODE} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

# cgroup-v2-only hosts (container runners): slurmd 22.05 autodetects cgroup/v2 and dies when it
# cannot reach systemd over dbus. Untested here (this recipe was verified on hybrid v1 hosts); the
# documented development setting lets it build its own hierarchy instead.
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] && [ ! -e /etc/slurm/cgroup.conf ]; then
  printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemdOnFailure=yes\n' > /etc/slurm/cgroup.conf
  touch "$STATE/run/cgroup.conf.ours"
fi

# --- daemons (daemon mode: they fork and write pid files) ------------------
/usr/sbin/slurmctld -c      # -c: do not recover jobs/state from an earlier run
/usr/sbin/slurmd
for _ in $(seq 300); do
  st=$(sinfo -h -N -o %t 2>/dev/null || true)
  [ "$st" = idle ] && break; sleep 0.1
done
if [ "$(sinfo -h -N -o %t 2>/dev/null || true)" != idle ]; then
  echo "slurm-up: node never became idle; logs:" >&2
  tail -n 20 "$STATE"/log/*.log >&2 || true
  exit 1
fi
sinfo -N -o '%N %t %c %m %G'
