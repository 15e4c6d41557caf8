#!/usr/bin/env bash
# Decisions per second through a 3-primary Redis Cluster beside one Redis (docs/redis.md,
# "Figures"): starts one redis-server and three cluster-enabled ones (joined by redis-cli
# --cluster create, no replicas, so the primaries do all the work there is), then runs
# bench/bench_redis (engine + store, no socket) against each at depth 1 and 64, ROUNDS times
# interleaved, and prints every run and the medians. Everything lives in a temporary
# directory and is stopped on exit.
# Usage: bench/bench_cluster.sh [BUILD_DIR] [SECONDS] [ROUNDS]
. "$(dirname "$0")/lib.sh"
build=${1:-build}; secs=${2:-3}; rounds=${3:-5}
bench=$build/bench/bench_redis
bench_need "$build" "$bench"
dir=$bench_tmp
start() { # start NAME PORT [ARGS...]
  local name=$1 port=$2; shift 2
  mkdir -p "$dir/$name"
  bench_spawn "$dir/$name/out" redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/$name" \
    --save '' --appendonly no --logfile "$dir/$name/log" "$@"
  bench_poll 10 redis-cli -p "$port" ping || { echo "$bench_name: $name did not start" >&2; exit 69; }
}
single=$(bench_free_port); start single "$single"
seeds=()
for i in 1 2 3; do
  p=$(bench_free_port); start "c$i" "$p" --cluster-enabled yes --cluster-config-file nodes.conf
  seeds+=("127.0.0.1:$p")
done
redis-cli --cluster create "${seeds[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
cluster_ok() {
  local s
  for s in "${seeds[@]}"; do
    redis-cli -p "${s##*:}" cluster info | grep -q cluster_state:ok || return 1
  done
}
bench_poll 10 cluster_ok || { echo "$bench_name: the cluster did not become ok" >&2; exit 69; }
cluster="cluster:$(IFS=,; echo "${seeds[*]}")"
bench_load
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
