#!/usr/bin/env bash
# Decisions per second through a 3-primary Redis Cluster beside one Redis (docs/redis.md,
# "Figures"): starts one redis-server and three cluster-enabled ones (joined by redis-cli
# --cluster create, no replicas, so the primaries do all the work there is), then runs
# bench/bench_redis (engine + store, no socket) against each at depth 1 and 64, ROUNDS times
# interleaved, and prints every run and the medians. Everything lives in a temporary
# directory and is stopped on exit.
# Usage: bench/bench_cluster.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; secs=${2:-3}; rounds=${3:-5}
bench=$build/bench/bench_redis
dir=$(mktemp -d /tmp/tt-bench-cluster-XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # start NAME PORT [ARGS...]
  local name=$1 port=$2; shift 2
  mkdir -p "$dir/$name"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/$name" --save '' --appendonly no \
    --logfile "$dir/$name/log" "$@" & pids+=($!)
  for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "bench_cluster: $name did not start" >&2; exit 69
}
single=$(free_port); start single "$single"
seeds=()
for i in 1 2 3; do
  p=$(free_port); start "c$i" "$p" --cluster-enabled yes --cluster-config-file nodes.conf
  seeds+=("127.0.0.1:$p")
done
redis-cli --cluster create "${seeds[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 200); do
  ok=1
  for s in "${seeds[@]}"; do
    redis-cli -p "${s##*:}" cluster info | grep -q cluster_state:ok || ok=0
  done
  [ $ok = 1 ] && break; sleep 0.05
done
cluster="cluster:$(IFS=,; echo "${seeds[*]}")"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
declare -A runs
for r in $(seq "$rounds"); do
  for depth in 1 64; do
    for target in single cluster; do
      addr=127.0.0.1:$single; [ $target = cluster ] && addr=$cluster
      line=$("$bench" "$addr" --depth "$depth" --seconds "$secs" --keys 1000)
      echo "round $r: $line"
      runs[$target.$depth]+="$(sed 's/.*: \([0-9]*\) decisions\/s.*/\1/' <<<"$line") "
    done
  done
done
for depth in 1 64; do
  for target in single cluster; do
    echo "median $target depth $depth: $(tr ' ' '\n' <<<"${runs[$target.$depth]}" | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') decisions/s"
  done
done
