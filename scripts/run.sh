#!/usr/bin/env bash
# Sets everything up and runs the daemon on its embedded default config (extra arguments go to
# `tokentriage serve`, e.g. -c examples/single-node.yaml). Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh run build # what the daemon needs to run and to build; not the test tools
scripts/build.sh build
exec build/cmd/tokentriage serve "$@"
