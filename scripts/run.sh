#!/usr/bin/env bash
# Sets everything up and shows tokentriage deciding: until the daemon lands, it replays
# examples/arrivals-burst.txt through one gcra limit with `tokentriage simulate` (extra
# arguments go to simulate, e.g. --replicas 3).
# The daemon engineer switches this to `exec build/cmd/tokentriage serve "$@"`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
exec build/cmd/tokentriage simulate --algorithm gcra --amount 300 --period 1m --burst 60 "$@" \
  examples/arrivals-burst.txt
