#!/bin/bash
# Stop the loopback BMC that .ci/bmc-up.sh started (by its pid file). Exit 0 also when none runs.
set -euo pipefail
STATE=${BMC_CI_STATE:-/tmp/bmc-ci}
if [ -s "$STATE/bmc.pid" ]; then
  pid=$(cat "$STATE/bmc.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$STATE/bmc.pid" "$STATE/ready"
fi
