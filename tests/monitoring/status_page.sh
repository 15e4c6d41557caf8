#!/usr/bin/env bash
# ctest monitoring_status_page: r0's /status of a real three-replica fleet in Debian's chromium
# (status_page.py says what is checked). playwright-core comes from npm into the build tree's
# cache and drives the chromium scripts/deps.sh installs; it downloads no browser.
# usage: status_page.sh SOURCE_DIR CACHE_DIR TOKENTRIAGE FLEETCTL SHOTS_DIR
set -euo pipefail
src=$1 cache=$2 tt=$3 fleetctl=$4 shots=$5
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces" >&2; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not found (scripts/deps.sh)" >&2; exit 77; }
. "$src/tests/standards/tools.sh"
tt_playwright "$cache"
export NODE_PATH=$PW_NODE_PATH
exec /usr/bin/python3 "$src/tests/monitoring/status_page.py" "$src" "$tt" "$fleetctl" "$CHROMIUM" \
  "$shots"
