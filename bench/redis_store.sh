#!/usr/bin/env bash
# bench/redis_store.sh: the redis store against plain Redis + Lua, with Redis' CPU per answer.
#
#   bench/redis_store.sh [--runs N] [--duration MS] [--depths "1 16 64"] [--build DIR]
#
# bench/run.sh's redis and tt_redis targets (the same redis-server on a unix socket: the
# baseline bench/redis_gcra.lua by EVALSHA, and tokentriage serve with bench/bench-redis.yaml),
# driven by the same bench/loadgen (8 connections, 10k keys, prefilled), rounds interleaved.
# Besides answers per second it reads what each answer cost Redis (the redis-server process's
# CPU time over the window, --pid) and the daemon (its CPU time over the run), and Redis' own
# usec_per_call of EVALSHA (INFO commandstats; tt_redis' calls are batches of decisions), because
# on a shared machine throughput says how much CPU a process got while CPU time per answer says
# what an answer costs it. Counts decided answers only (the summary says why). Prints one JSON
# line per run, then the medians.
. "$(dirname "$0")/lib.sh"

build=build runs=5 duration=2000 depths="1 16 64"
bench_args "runs duration depths build" "" "$@"
bench_need "$build" "$build/bench/loadgen" "$build/cmd/tokentriage"

tmp=$bench_tmp
cpu_ns() { awk '{print $1}' "/proc/$1/schedstat"; } # main thread: both servers are one thread

bench_serve "$tmp/redis.sock" "$tmp/redis.log" redis-server --port 0 \
  --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --save "" --appendonly no --daemonize no
rpid=$bench_pid
R() { redis-cli -s "$tmp/redis.sock" "$@"; }
sha=$(R SCRIPT LOAD "$(cat bench/redis_gcra.lua)")
sed "s#@REDIS@#$tmp/redis.sock#" bench/bench-redis.yaml >"$tmp/bench-redis.yaml"
bench_serve "$tmp/tt.sock" "$tmp/tt.log" "$build/cmd/tokentriage" serve -c "$tmp/bench-redis.yaml" \
  -s "$tmp/tt.sock"
tpid=$bench_pid

gen() { # target args...
  local t=$1; shift
  if [ "$t" = redis ]; then
    "$build/bench/loadgen" --proto resp --socket "$tmp/redis.sock" --sha "$sha" --pid "$rpid" "$@"
  else
    "$build/bench/loadgen" --proto msgpack --socket "$tmp/tt.sock" --pid "$rpid" "$@"
  fi
}
for t in redis tt_redis; do gen "$t" -c 8 -p 64 -k 10000 --prefill >/dev/null; done

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
raw=$tmp/raw.jsonl
for ((r = 1; r <= runs; r++)); do
  for p in $depths; do
    for t in redis tt_redis; do
      R CONFIG RESETSTAT >/dev/null
      d0=$(cpu_ns "$tpid")
      line=$(gen "$t" -c 8 -p "$p" -k 10000 -d "$duration" -w 300 --seed "$r")
      d1=$(cpu_ns "$tpid")
      upc=$(R INFO commandstats | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')
      echo "{\"target\":\"$t\",\"run\":$r,\"daemon_cpu_ms\":$(((d1 - d0) / 1000000)),\"redis_usec_per_call\":${upc:-0},${line#\{}" |
        tee -a "$raw"
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$raw" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs) if xs else 0
# Decided answers: admissions. No key reaches its burst of 100 here (10k keys, a few calls each
# per run), so with fail: closed every denial is a decision Redis did not make in time
# (timed out under load), answered fast by the posture: counting it would flatter a stall.
decided = lambda r: r["admitted"]
per_s = lambda r: decided(r) / r["seconds"]
cpu = lambda r: r.get("cpu_ns_per_answer", 0) * r["answers"] / max(decided(r), 1)
print("| depth | redis /s | tt_redis /s | ratio | Redis CPU/answer: redis | tt_redis | "
      "usec_per_call: redis | tt_redis (a batch) | daemon CPU/answer | undecided |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for d in sorted({r["depth"] for r in rows}):
    b = [r for r in rows if r["depth"] == d and r["target"] == "redis"]
    t = [r for r in rows if r["depth"] == d and r["target"] == "tt_redis"]
    ratios = [per_s(y) / per_s(x) for x, y in zip(b, t) if per_s(x)]
    daemon = med([y["daemon_cpu_ms"] * 1e6 / decided(y) for y in t if decided(y)])
    print(f"| {d} | {med([per_s(x) for x in b]):,.0f} | {med([per_s(y) for y in t]):,.0f} | "
          f"{med(ratios):.2f}x | {med([cpu(x) for x in b]) / 1e3:.1f} us | "
          f"{med([cpu(y) for y in t]) / 1e3:.1f} us | "
          f"{med([x['redis_usec_per_call'] for x in b]):.1f} | "
          f"{med([y['redis_usec_per_call'] for y in t]):.1f} | {daemon / 1e3:.1f} us* | "
          f"{sum(y['answers'] - decided(y) for y in t)} |")
print("* the daemon's CPU over the whole run (warm-up included) per decided answer: an upper bound")
EOF
