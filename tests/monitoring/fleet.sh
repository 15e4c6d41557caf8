#!/usr/bin/env bash
# ctest monitoring_fleet: the alert rules and the Grafana dashboard of k8s/components/monitoring
# against a real fleet (fleet_monitoring.py says what is run and checked). promtool and the
# Prometheus server come from Debian's prometheus package, unpacked into the build tree's cache.
# usage: fleet.sh SOURCE_DIR CACHE_DIR TOKENTRIAGE FLEETCTL
set -euo pipefail
src=$1 cache=$2 tt=$3 fleetctl=$4
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces" >&2; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not found (scripts/deps.sh)" >&2; exit 77; }
. "$src/tests/standards/tools.sh"
tt_promtool "$cache"
tt_prometheus "$cache"
# Debian's python3 carries python3-yaml (scripts/deps.sh); a python3 earlier on PATH may not.
exec /usr/bin/python3 "$src/tests/monitoring/fleet_monitoring.py" "$src" "$tt" "$fleetctl" \
  "$PROMTOOL" "$PROMETHEUS"
