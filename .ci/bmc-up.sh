#!/bin/bash
# Start the loopback BMC (.ci/loopback_bmc.py: pyghmi's IPMI server and a Redfish service, both on
# 127.0.0.1 only) for power mode: systems/cpu-local-power.yaml reads it with Debian's ipmitool.
# Idempotent: exits 0 at once when it already answers. Prints the credentials' exports on stdout:
#
#   eval "$(.ci/bmc-up.sh)" && mlperf run gpt3 --system cpu-local-power --runs 3 && .ci/bmc-down.sh
#
# Env: BMC_CI_IPMI_PORT (default 6230, UDP), BMC_CI_REDFISH_PORT (default 8230, TCP),
#      BMC_CI_STATE (pid, log and wattage file; default /tmp/bmc-ci), BMC_CI_WATTS (default 350),
#      BMC_CI_NO_INSTALL=1 (never apt-get/pip install; fail if ipmitool or pyghmi is missing)
# The served wattage is the number in $BMC_CI_STATE/watts (rewrite it to follow a profile).
# Exit: 0 up; 1 failed (the reason on stderr, one line)
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${BMC_CI_STATE:-/tmp/bmc-ci}
IPMI_PORT=${BMC_CI_IPMI_PORT:-6230}
REDFISH_PORT=${BMC_CI_REDFISH_PORT:-8230}
USER_NAME=admin
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
mkdir -p "$STATE"
# 16 characters: IPMI passwords hold at most 20 bytes
[ -s "$STATE/password" ] || (umask 077; head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$STATE/password")
PASSWORD=$(cat "$STATE/password")
exports() { printf 'export MLPERF_BMC_USER=%s\nexport MLPERF_BMC_PASSWORD=%s\n' "$USER_NAME" "$PASSWORD"; }

# --- packages (skipped when installed) ------------------------------------------
if ! command -v ipmitool >/dev/null; then
  [ "${BMC_CI_NO_INSTALL:-0}" = 1 ] && { echo "bmc-up: ipmitool is not installed" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "bmc-up: ipmitool is missing and installing it needs root (apt-get install ipmitool)" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends ipmitool >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get install -y --no-install-recommends ipmitool >/dev/null; } \
    || { echo "bmc-up: apt-get install ipmitool failed" >&2; exit 1; }
fi
if ! "$PY" -c "import pyghmi" 2>/dev/null; then
  [ "${BMC_CI_NO_INSTALL:-0}" = 1 ] && { echo "bmc-up: pyghmi is not installed ($PY)" >&2; exit 1; }
  "$PY" -m pip install -q pyghmi >/dev/null 2>&1 || { echo "bmc-up: pip install pyghmi failed" >&2; exit 1; }
fi

# --- already up? ------------------------------------------------------------------
answers() { IPMI_PASSWORD=$PASSWORD timeout 5 ipmitool -I lanplus -H 127.0.0.1 -p "$IPMI_PORT" -U "$USER_NAME" -E -C 3 dcmi power reading >/dev/null 2>&1; }
if [ -s "$STATE/bmc.pid" ] && kill -0 "$(cat "$STATE/bmc.pid")" 2>/dev/null && answers; then
  exports; exit 0
fi

# --- start ------------------------------------------------------------------------
[ -s "$STATE/watts" ] || echo "${BMC_CI_WATTS:-350}" > "$STATE/watts"
rm -f "$STATE/ready"
BMC_PASSWORD=$PASSWORD setsid "$PY" .ci/loopback_bmc.py --ipmi-port "$IPMI_PORT" --redfish-port "$REDFISH_PORT" \
  --user "$USER_NAME" --password-env BMC_PASSWORD --watts-file "$STATE/watts" --ready-file "$STATE/ready" \
  >"$STATE/bmc.log" 2>&1 < /dev/null &
echo $! > "$STATE/bmc.pid"
for _ in $(seq 100); do
  if [ -s "$STATE/ready" ] && answers; then exports; exit 0; fi
  kill -0 "$(cat "$STATE/bmc.pid")" 2>/dev/null || break
  sleep 0.1
done
echo "bmc-up: the loopback BMC did not answer on 127.0.0.1:$IPMI_PORT ($(tail -n 1 "$STATE/bmc.log" 2>/dev/null || echo 'no log'))" >&2
kill "$(cat "$STATE/bmc.pid")" 2>/dev/null || true
rm -f "$STATE/bmc.pid"
exit 1
