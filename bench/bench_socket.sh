#!/usr/bin/env bash
# The socket benchmark of README "Benchmarks" and docs/performance.md: starts `tokentriage
# serve` on a private socket with two limits that always admit (so every request runs the
# whole path: both limits probed and committed, headers disclosed), then runs `tokentriage
# bench` unpipelined on 1 connection and pipelined (depth 256) on 1 and 8 connections, and
# prints the daemon's CPU time per decision (which, unlike decisions/s, does not depend on
# what else the machine is running). Usage: bench/bench_socket.sh [BUILD_DIR] [SECONDS]
. "$(dirname "$0")/lib.sh"
build=${1:-build}; secs=${2:-5}
tt=$build/cmd/tokentriage
bench_need "$build" "$tt"
dir=$bench_tmp
cat > "$dir/config.yaml" <<YAML
server: { socket: $dir/tt.sock, http: "", max_connections: 1024 }
governance:
  limits:
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 60000000, period: 1m }
    - { id: global_rpm, attach: { level: global }, type: rpm, amount: 600000000, period: 1m }
YAML
bench_serve "$dir/tt.sock" "$dir/log" "$tt" serve -c "$dir/config.yaml"
pid=$bench_pid
hz=$(getconf CLK_TCK)
run() {
  local t0 t1 out n
  t0=$(bench_cpu_ticks "$pid")
  out=$("$tt" bench -s "$dir/tt.sock" "$@" -k 10000 -d "$secs" --json)
  t1=$(bench_cpu_ticks "$pid")
  n=$(sed 's/.*"decisions":\([0-9]*\).*/\1/' <<<"$out")
  echo "$* : $out"
  awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" \
    'BEGIN { printf "    daemon CPU %.3f s = %.0f ns per decision (%.0f decisions/s per core)\n", t/hz, t/hz*1e9/n, n/(t/hz) }'
}
bench_load
run -c 1 -p 1
run -c 1 -p 256
run -c 8 -p 256
