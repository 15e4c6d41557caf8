#!/usr/bin/env bash
# One command: builds what the demo needs and runs it (three replicas on loopback, load, a
# kill, the re-division; about 100 s). Usage: examples/fleet-demo/run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build}
[ -f "$dir/CMakeCache.txt" ] || cmake -S . -B "$dir" >/dev/null
cmake --build "$dir" --target fleet-demo -j2 >/dev/null
exec "$dir/examples/fleet-demo/fleet-demo"
