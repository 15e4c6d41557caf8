#!/usr/bin/env bash
# The gRPC front door beside the socket (docs/performance.md): starts `tokentriage serve` with
# the decision socket and server.grpc (a unix socket) on one limit that always admits, then at
# concurrency 1 and 64 runs `tokentriage bench` on the socket (64: pipelined on one connection)
# and bench_grpc (64: streams on one HTTP/2 connection, as Envoy multiplexes), each over 10,000
# keys, and prints the daemon's CPU time per decision beside the rates.
# Usage: bench/bench_grpc.sh [BUILD_DIR] [SECONDS]
. "$(dirname "$0")/lib.sh"
build=${1:-build}; secs=${2:-5}
tt=$build/cmd/tokentriage
bench_need "$build" "$tt" "$build/bench/bench_grpc"
dir=$bench_tmp
cat > "$dir/config.yaml" <<YAML
server: { socket: $dir/tt.sock, http: "", grpc: $dir/grpc.sock, max_connections: 1024 }
governance:
  limits:
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 60000000, period: 1m }
YAML
bench_serve "$dir/grpc.sock" "$dir/log" "$tt" serve -c "$dir/config.yaml"
pid=$bench_pid
ticks() { bench_cpu_ticks "$pid"; }
hz=$(getconf CLK_TCK)
cpu() { # ticks before, ticks after, decisions
  awk -v t=$(($2 - $1)) -v hz="$hz" -v n="$3" \
    'BEGIN { printf "    daemon CPU %.0f ns per decision\n", t/hz*1e9/n }'
}
bench_load
for c in 1 64; do
  t0=$(ticks); out=$("$tt" bench -s "$dir/tt.sock" -c 1 -p "$c" -k 10000 -d "$secs" --json); t1=$(ticks)
  echo "socket concurrency $c: $out"; cpu "$t0" "$t1" "$(sed 's/.*"decisions":\([0-9]*\).*/\1/' <<<"$out")"
  t0=$(ticks); out=$("$build/bench/bench_grpc" "$dir/grpc.sock" "$c" "$secs" 10000); t1=$(ticks)
  echo "grpc   concurrency $c: $out"; cpu "$t0" "$t1" "$(sed 's/.*"calls":\([0-9]*\).*/\1/' <<<"$out")"
done
