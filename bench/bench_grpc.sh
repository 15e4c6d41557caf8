#!/usr/bin/env bash
# The gRPC front door beside the socket (docs/performance.md). Starts two `tokentriage serve`,
# each with the decision socket and server.grpc on unix sockets: one with its rules local, one
# with them in Redis (a redis-server of its own, when redis-server is installed). Their rules
# are envoy ratelimit's files (server.grpc_config_dir): domain "bench", one rule per key (key,
# key1, key2, key3), a counter per value, never over; domain "levels" is answered by a limit
# of levels (key_rpm), as before the rule language. At concurrency 1 and 64 it runs
# `tokentriage bench` on the socket (64: pipelined on one connection) and bench_grpc (64:
# streams on one HTTP/2 connection, as Envoy multiplexes) with 1 and 4 descriptors a call, each
# over 10,000 values, and prints the daemon's CPU time per call (and Redis's) beside the rates.
# Usage: bench/bench_grpc.sh [BUILD_DIR] [SECONDS]   (BUILD_DIR built with the tests: bench_grpc's
# calls are tests/support/h2raw.c's)
. "$(dirname "$0")/lib.sh"
build=${1:-build}; secs=${2:-5}
tt=$build/cmd/tokentriage
bench_need "$build" "$tt" "$build/bench/bench_grpc"
dir=$bench_tmp
mkdir "$dir/rules"
cat > "$dir/rules/bench.yaml" <<YAML
domain: bench
descriptors:
  - { key: key, rate_limit: { unit: second, requests_per_unit: 1000000000 } }
  - { key: key1, rate_limit: { unit: second, requests_per_unit: 1000000000 } }
  - { key: key2, rate_limit: { unit: second, requests_per_unit: 1000000000 } }
  - { key: key3, rate_limit: { unit: second, requests_per_unit: 1000000000 } }
YAML
config() { # NAME STORE [SHARED_STATE]
  mkdir -p "$dir/$1"
  cat > "$dir/$1/config.yaml" <<YAML
server: { socket: $dir/$1/tt.sock, http: "", grpc: $dir/$1/grpc.sock, max_connections: 1024,
          grpc_config_dir: $dir/rules, grpc_config_store: $2 }
governance:
  limits:
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 60000000, period: 1m }
${3:-}
YAML
}
hz=$(getconf CLK_TCK)
cpu() { # what, ticks before, ticks after, calls
  awk -v w="$1" -v t=$(($3 - $2)) -v hz="$hz" -v n="$4" \
    'BEGIN { printf "    %s CPU %.0f ns per call\n", w, t/hz*1e9/n }'
}
config local local
bench_serve "$dir/local/grpc.sock" "$dir/local/log" "$tt" serve -c "$dir/local/config.yaml"
local_pid=$bench_pid
redis_pid=""
if command -v redis-server >/dev/null; then
  port=$(bench_free_port)
  bench_spawn "$dir/redis.log" redis-server --port "$port" --save "" --appendonly no
  redis_pid=$bench_pid
  bench_poll 10 redis-cli -p "$port" ping
  config redis redis "shared_state: { redis: { address: 127.0.0.1:$port } }"
  bench_serve "$dir/redis/grpc.sock" "$dir/redis/log" "$tt" serve -c "$dir/redis/config.yaml"
  redis_daemon=$bench_pid
fi
calls() { sed 's/.*"\(calls\|decisions\)":\([0-9]*\).*/\2/' <<<"$1"; }
bench_load
for c in 1 64; do
  t0=$(bench_cpu_ticks "$local_pid")
  out=$("$tt" bench -s "$dir/local/tt.sock" -c 1 -p "$c" -k 10000 -d "$secs" --json)
  t1=$(bench_cpu_ticks "$local_pid")
  echo "socket concurrency $c: $out"; cpu daemon "$t0" "$t1" "$(calls "$out")"
  for run in "local levels 1" "local bench 1" "local bench 4" "redis bench 1" "redis bench 4"; do
    read -r store domain nd <<<"$run"
    if [ "$store" = redis ]; then
      [ -n "$redis_pid" ] || continue
      pid=$redis_daemon
    else
      pid=$local_pid
    fi
    t0=$(bench_cpu_ticks "$pid"); r0=$([ -n "$redis_pid" ] && bench_cpu_ticks "$redis_pid" || echo 0)
    out=$("$build/bench/bench_grpc" "$dir/$store/grpc.sock" "$c" "$secs" 10000 "" "$nd" "$domain")
    t1=$(bench_cpu_ticks "$pid"); r1=$([ -n "$redis_pid" ] && bench_cpu_ticks "$redis_pid" || echo 0)
    echo "grpc $store $domain descriptors $nd concurrency $c: $out"
    cpu daemon "$t0" "$t1" "$(calls "$out")"
    [ "$store" = redis ] && cpu redis-server "$r0" "$r1" "$(calls "$out")"
  done
done
