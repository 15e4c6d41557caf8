#!/usr/bin/env bash
# bench/run.sh: tokentriage against the machine's ceiling and against Redis + Lua, side by side.
#
#   bench/run.sh [--quick] [--runs N] [--duration MS] [--build DIR] [--out DIR] [--targets LIST]
#                [--keys LIST] [--conns LIST] [--depths LIST]
#
# Starts, on unix sockets in a fresh temporary directory:
#   ceiling  bench/ceiling: frames the same msgpack requests, answers a fixed map, no rate logic
#   redis    redis-server 7 running bench/redis_gcra.lua by EVALSHA (the usual Redis limiter)
#   tt       tokentriage serve with bench/bench.yaml (one local gcra limit per key)
#   tt_redis tokentriage serve with bench/bench-redis.yaml (the same limit, store: redis, on
#            the same redis-server, over its unix socket)
# and drives each with bench/loadgen (one generator for all four: same connections, depth and
# key sequence) at depths 1, 16, 64 on 1 and 8 connections over 1, 10k and 1M keys. Runs are
# interleaved (run 1 of every case and target, then run 2, ...) so the machine's noise spreads
# over all of them; medians are reported with the ratios tt/ceiling, tt/redis and
# tt_redis/redis, and at depth 1 (unpipelined: one request in flight per connection) the median
# p99 round trip. Every key set is prefilled once per target before it is measured. The msgpack
# targets get protocol 2 requests (docs/protocol.md): the answer form clients use.
#
# --quick: one run of 1 s per case, keys 1 and 10k only (about a minute). Default: 5 runs of
# 2 s. Raw results (one JSON line per run) and the table go to --out (default
# BUILD/bench-results/<date>). Every server started is stopped on exit, whatever happens.
. "$(dirname "$0")/lib.sh"

build=build runs=5 duration=2000 warmup=300 out="" quick=0
targets="ceiling redis tt tt_redis"
depths="1 16 64" conns="1 8" keys="1 10000 1000000"
bench_args "runs duration build out targets keys conns depths" "quick" "$@"
if ((quick)); then runs=1 duration=1000 warmup=200 keys=${keys/1000000/}; fi
out=${out:-$build/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

bench_need "$build" "$build/bench/loadgen" "$build/bench/ceiling" "$build/cmd/tokentriage"
command -v redis-server >/dev/null || { echo "bench/run.sh: redis-server not found" >&2; exit 69; }

tmp=$bench_tmp

declare -A sock proto pid
have=()
start_target() { # name command...: starts it in the background, records whether it came up
  local name=$1; shift
  bench_spawn "$tmp/$name.log" "$@"
  pid[$name]=$bench_pid
  if bench_wait_socket "${sock[$name]}"; then
    have+=("$name")
  else
    echo "bench/run.sh: $name did not come up; skipping it (log follows)" >&2
    sed 's/^/  /' "$tmp/$name.log" >&2
  fi
}

sock[ceiling]=$tmp/ceiling.sock sock[redis]=$tmp/redis.sock sock[tt]=$tmp/tt.sock
sock[tt_redis]=$tmp/tt_redis.sock sock[redis-server]=$tmp/redis.sock
proto[ceiling]=msgpack proto[redis]=resp proto[tt]=msgpack proto[tt_redis]=msgpack

want() { [[ " $targets " == *" $1 "* ]]; }
needs_redis=0
want redis && needs_redis=1
want tt_redis && needs_redis=1
if ((needs_redis)); then
  start_target redis-server redis-server --port 0 --unixsocket "$tmp/redis.sock" \
    --unixsocketperm 700 --save "" --appendonly no --daemonize no
fi
if want redis && [[ " ${have[*]} " == *" redis-server "* ]]; then
  sha=$(redis-cli -s "$tmp/redis.sock" SCRIPT LOAD "$(cat bench/redis_gcra.lua)")
  have+=(redis)
  pid[redis]=${pid[redis-server]}
fi
want ceiling && start_target ceiling "$build/bench/ceiling" "$tmp/ceiling.sock"
want tt && start_target tt "$build/cmd/tokentriage" serve -c bench/bench.yaml -s "$tmp/tt.sock"
if want tt_redis; then
  sed "s#@REDIS@#$tmp/redis.sock#" bench/bench-redis.yaml >"$tmp/bench-redis.yaml"
  start_target tt_redis "$build/cmd/tokentriage" serve -c "$tmp/bench-redis.yaml" \
    -s "$tmp/tt_redis.sock"
fi
# tt_redis counts only if its decisions reach Redis: a daemon without the redis store wired in
# would answer from posture.fail alone. One decision must add commands beyond the INFO itself.
if [[ " ${have[*]} " == *" tt_redis "* ]]; then
  cmds() { redis-cli -s "$tmp/redis.sock" INFO stats | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p'; }
  before=$(cmds)
  "$build/bench/loadgen" --proto msgpack --socket "$tmp/tt_redis.sock" -k 1 -d 100 -w 0 >/dev/null
  if (($(cmds) - before < 2)); then
    echo "bench/run.sh: tt_redis does not talk to Redis (redis store not wired into serve?); skipping it" >&2
    have=("${have[@]/tt_redis/}")
  fi
fi
measured=()
for t in $targets; do [[ " ${have[*]} " == *" $t "* ]] && measured+=("$t"); done
((${#measured[@]})) || { echo "bench/run.sh: no target came up" >&2; exit 69; }

gen() { # target args...
  local t=$1; shift
  local extra=()
  [ "${proto[$t]}" = resp ] && extra=(--sha "$sha")
  "$build/bench/loadgen" --proto "${proto[$t]}" --socket "${sock[$t]}" --pid "${pid[$t]}" \
    "${extra[@]}" "$@"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "kernel: $(uname -srm)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc)"
  echo "redis: $(redis-server --version | cut -d' ' -f3)"
  echo "targets: ${measured[*]}; runs $runs x ${duration} ms (+${warmup} ms warm-up)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"

raw=$out/raw.jsonl
: >"$raw"
for ((r = 1; r <= runs; r++)); do
  for k in $keys; do
    for t in "${measured[@]}"; do
      # every key set once before its first measurement: tables and Redis hold every key
      ((r == 1 && k > 1)) && gen "$t" -c 8 -p 64 -k "$k" --prefill >/dev/null
    done
    for c in $conns; do
      for p in $depths; do
        for t in "${measured[@]}"; do
          line=$(gen "$t" -c "$c" -p "$p" -k "$k" -d "$duration" -w "$warmup" --seed "$r")
          echo "{\"target\":\"$t\",\"run\":$r,${line#\{}" >>"$raw"
        done
      done
    done
  done
  echo "run $r/$runs done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
python3 bench/report.py "$raw" | tee "$out/table.md"
