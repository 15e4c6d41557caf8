#!/usr/bin/env bash
# Sets everything up and runs the daemon on its embedded default config.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
exec build/cmd/tokentriage serve "$@"
