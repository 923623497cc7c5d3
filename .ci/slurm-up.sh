#!/bin/bash
# Start a local Slurm cluster (munged + slurmctld + one or two slurmd) without systemd, for the
# integration tests (tests/integration/test_slurm*.py; systems/cpu-slurm.yaml, cpu-slurm-2n.yaml).
# Needs root. Idempotent: exits 0 at once
# when a cluster of the requested size already answers.
#
#   SLURM_CI_NODES=1 (default)  one slurmd on 127.0.0.1 named after this host
#   SLURM_CI_NODES=2            two slurmd, each in its own UTS namespace (hostnames n1, n2), on
#                               127.0.0.2:6818 and 127.0.0.3:6819 (loopback only), one slurmctld;
#                               '127.0.0.2 n1' / '127.0.0.3 n2' are added to /etc/hosts (marked
#                               '# slurm-ci', removed by slurm-down.sh) so the rendezvous resolves
# Env: SLURM_CI_CPUS (CPUs declared per node, default: nproc), SLURM_CI_GPUS (fake GPUs per node,
#      default 0), SLURM_CI_STATE (state/log dir, default /tmp/slurm-ci),
#      SLURM_CI_NO_INSTALL=1 (never apt-get install; fail if the packages are missing)
# Exit: 0 up; 1 failed (the reason on stderr); 2 bad SLURM_CI_NODES;
#       3 namespaces refused here (one line on stderr; the multi-node tests skip with it)
#
# Accounting: no slurmdbd. Finished jobs go to a text file (jobcomp/filetxt), which
# `sacct -c` (--completion) reads: `sacct -c -n -X -o JobID,JobName,State` lists each job once.
set -euo pipefail
HOST=$(hostname -s)
NODES=${SLURM_CI_NODES:-1}
# nproc honours OMP_NUM_THREADS (the test suite sets it to 1 per worker): count the cores, not that.
CPUS=${SLURM_CI_CPUS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}
GPUS=${SLURM_CI_GPUS:-0}
STATE=${SLURM_CI_STATE:-/tmp/slurm-ci}
MEM=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 1024 ))   # MiB, 1 GiB headroom
MARK="# slurm-ci"
case "$NODES" in 1|2) ;; *) echo "slurm-up: SLURM_CI_NODES=$NODES: choose 1 or 2" >&2; exit 2 ;; esac

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
up_nodes() { sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(idle|alloc|mix|comp)/' | wc -l; }
all_nodes() { sinfo -h -N -o %N 2>/dev/null | wc -l; }
if [ -s "$STATE/run/slurmctld.pid" ] && [ "$(all_nodes)" -gt 0 ]; then
  if [ "$(all_nodes)" != "$NODES" ]; then
    echo "slurm-up: a $(all_nodes)-node ci cluster is already running; stop it first (.ci/slurm-down.sh)" >&2
    exit 1
  fi
  [ "$(up_nodes)" = "$NODES" ] && exit 0
fi
if [ -s /etc/slurm/slurm.conf ] && ! grep -q '^ClusterName=ci$' /etc/slurm/slurm.conf \
   && [ "${SLURM_CI_FORCE:-0}" != 1 ]; then
  echo "slurm-up: /etc/slurm/slurm.conf belongs to another cluster; not replacing it (SLURM_CI_FORCE=1 to do so)" >&2
  exit 1
fi

# --- two nodes: namespaces and names --------------------------------------------
NAMES=("$HOST"); ADDRS=(127.0.0.1); PORTS=(6818)
if [ "$NODES" = 2 ]; then
  NAMES=(n1 n2); ADDRS=(127.0.0.2 127.0.0.3); PORTS=(6818 6819)
  if ! err=$(unshare --uts true 2>&1); then
    echo "slurm-up: UTS namespaces are refused here (unshare --uts: ${err:-no message}); no two-node cluster" >&2
    exit 3
  fi
  for i in 0 1; do  # another mapping of n1/n2 would send the rendezvous elsewhere: refuse
    other=$(awk -v h="${NAMES[$i]}" -v a="${ADDRS[$i]}" '$1 !~ /^#/ && $1 != a { for (k = 2; k <= NF; k++) if ($k == h) print $1 }' /etc/hosts)
    if [ -n "$other" ]; then
      echo "slurm-up: /etc/hosts maps ${NAMES[$i]} to $other already; not changing it" >&2; exit 1
    fi
  done
fi
mkdir -p "$STATE"/ctld "$STATE"/log "$STATE"/run /etc/slurm

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
  cp /run/munge/munged.pid "$STATE/run/munged.pid"   # ours: slurm-down.sh stops it (not a system munged)
fi

# --- config ----------------------------------------------------------------
EXTRA_NODE=""; GRES_LINE=""
if [ "$GPUS" -gt 0 ]; then  # one set of fake devices; every node lists them (nothing opens them)
  mkdir -p "$STATE"/fakegpu
  for i in $(seq 0 $((GPUS-1))); do
    [ -c "$STATE/fakegpu/nvidia$i" ] || mknod "$STATE/fakegpu/nvidia$i" c 195 "$i"
  done
  EXTRA_NODE=" Gres=gpu:$GPUS"; GRES_LINE="GresTypes=gpu"
  { echo AutoDetect=off
    for n in "${NAMES[@]}"; do
      printf 'NodeName=%s Name=gpu File=%s/fakegpu/nvidia[0-%d]\n' "$n" "$STATE" $((GPUS-1))
    done; } > /etc/slurm/gres.conf
fi
NODE_LINES=""
for i in "${!NAMES[@]}"; do
  NODE_LINES+="NodeName=${NAMES[$i]} NodeAddr=${ADDRS[$i]} Port=${PORTS[$i]} CPUs=${CPUS} Sockets=1 CoresPerSocket=${CPUS} ThreadsPerCore=1 RealMemory=${MEM}${EXTRA_NODE} State=UNKNOWN"$'\n'
done
# %n (the node name) keeps the two slurmd's spool, pid and log files apart.
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
JobCompType=jobcomp/filetxt
JobCompLoc=${STATE}/log/jobcomp.txt
MailProg=/bin/true
ReturnToService=2
KillWait=5
SlurmdParameters=config_overrides
${GRES_LINE}
StateSaveLocation=${STATE}/ctld
SlurmdSpoolDir=${STATE}/slurmd.%n
SlurmctldPidFile=${STATE}/run/slurmctld.pid
SlurmdPidFile=${STATE}/run/slurmd.%n.pid
SlurmctldLogFile=${STATE}/log/slurmctld.log
SlurmdLogFile=${STATE}/log/slurmd.%n.log
SlurmctldPort=6817
${NODE_LINES}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
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
if [ "$NODES" = 1 ]; then
  /usr/sbin/slurmd
else
  # /etc/hosts may be a bind mount (containers): rewrite it in place, never rename over it.
  for i in 0 1; do
    grep -q "^${ADDRS[$i]} ${NAMES[$i]} $MARK\$" /etc/hosts || echo "${ADDRS[$i]} ${NAMES[$i]} $MARK" >> /etc/hosts
  done
  # slurmd finds its NodeName from the hostname, which the new UTS namespace makes n1 / n2
  # (Debian's build has no multiple-slurmd support, hence no -N). The namespace lives as long
  # as the daemon and its job steps; slurm-down.sh checks that nothing is left in it.
  for n in "${NAMES[@]}"; do
    unshare --uts bash -c "hostname $n && exec /usr/sbin/slurmd"
    for _ in $(seq 100); do [ -s "$STATE/run/slurmd.$n.pid" ] && break; sleep 0.05; done
    pid=$(cat "$STATE/run/slurmd.$n.pid" 2>/dev/null || true)
    [ -n "$pid" ] && readlink "/proc/$pid/ns/uts" > "$STATE/run/uts.$n" || true
  done
fi
for _ in $(seq 300); do
  [ "$(up_nodes)" = "$NODES" ] && break; sleep 0.1
done
if [ "$(up_nodes)" != "$NODES" ]; then
  echo "slurm-up: $(up_nodes) of $NODES node(s) became idle; logs:" >&2
  tail -n 20 "$STATE"/log/*.log >&2 || true
  exit 1
fi
sinfo -N -o '%N %t %c %m %G'
