#!/usr/bin/env bash
# bench/bench_attack.sh: what a hostile client of the gRPC door costs everyone else (issue 34).
#
#   bench/bench_attack.sh [--runs N] [--duration MS] [--build DIR] [--tt BINARY]
#
# Starts `tokentriage serve` with the decision socket, HTTP on loopback and server.grpc on
# loopback TCP (max_connections 256), then, for each attack of bench/h2attack (none; hpack: 4
# connections of amplified header blocks; lawful: 4 connections of header lists just under the
# bound, every call complete; bodies: 4 connections holding every stream they may open with
# unfinished bodies; idle: 300 connections, half silent, held and reopened), runs one good client
# per door in turn, one request in flight (loadgen msgpack on the socket, loadgen http on TCP,
# bench_grpc on a new gRPC connection), and records each one's p99 round trip, the daemon's RSS
# and CPU during the attack. Runs are interleaved (run 1 of every attack, then run 2, ...); the
# table gives the medians and each attack's p99 against the same door unattacked.
# --tt runs another daemon binary with the same clients and attacks (a build of an older commit,
# for the before figures). Needs a build with tests (bench/h2attack uses tests/support/h2raw.c).
. "$(dirname "$0")/lib.sh"
build=build runs=5 duration=2000 tt=""
bench_args "runs duration build tt" "" "$@"
tt=${tt:-$build/cmd/tokentriage}
bench_need "$build" "$tt" "$build/bench/loadgen" "$build/bench/bench_grpc" "$build/bench/h2attack"
tmp=$bench_tmp
hport=$(bench_free_port)
gport=$(bench_free_port)
ulimit -n "$(ulimit -Hn)" # 300 idle connections and the clients: the daemon inherits it
# TCP doors decide only for a bearer token (SPEC §9): every client, good and hostile, has this one
token=bench-token-0123456789abcdef
echo "tokens: [{ name: bench, token: $token, subjects: { key: [\"*\"] } }]" >"$tmp/tokens.yaml"
cat >"$tmp/tt.yaml" <<YAML
server: { socket: $tmp/tt.sock, http: "127.0.0.1:$hport", grpc: "127.0.0.1:$gport",
          http_decide: on, tokens_file: $tmp/tokens.yaml, max_connections: 256 }
governance:
  limits:
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 60000000, period: 1m }
YAML
bench_serve "$tmp/tt.sock" "$tmp/serve.log" "$tt" serve -c "$tmp/tt.yaml"
pid=$bench_pid
bench_load
secs=$(awk -v d="$duration" 'BEGIN { printf "%.3f", d / 1000 }')
attacks=(none hpack lawful bodies idle)
conns() { case $1 in idle) echo 300 ;; *) echo 4 ;; esac; }
for ((r = 1; r <= runs; r++)); do
  for a in "${attacks[@]}"; do
    apid=""
    if [ "$a" != none ]; then
      # the attack runs through the three clients, stopped after them; niced, so that on a small
      # machine its own CPU does not stand for the daemon's delays (it still sends whenever the
      # daemon reads: the daemon is what is measured)
      nice -n 19 "$build/bench/h2attack" "$a" "tcp:$gport" "$(conns "$a")" 600 "$token" >"$tmp/attack.out" 2>&1 &
      apid=$!
      sleep 1 # under way: the connections made, the first megabytes sent
    fi
    t0=$(bench_cpu_ticks "$pid")
    none='{"calls":0,"errors":1,"p99_us":-1}' # a client that got no answer at all
    s=$("$build/bench/loadgen" --proto msgpack --socket "$tmp/tt.sock" -c 1 -p 1 -k 10000 \
      -d "$duration" -w 200 || echo "$none")
    h=$("$build/bench/loadgen" --proto http --socket "tcp:$hport" -c 1 -p 1 -k 10000 \
      -d "$duration" -w 200 --token "$token" || echo "$none")
    g=$(timeout $((duration / 1000 + 30)) "$build/bench/bench_grpc" "tcp:$gport" 1 "$secs" 10000 "$token" ||
      echo "$none")
    t1=$(bench_cpu_ticks "$pid")
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    if [ -n "$apid" ]; then
      kill "$apid" 2>/dev/null || true
      wait "$apid" 2>/dev/null || true
    fi
    echo "$a $rss $((t1 - t0)) $s|$h|$g" >>"$tmp/raw"
  done
done
python3 - "$tmp/raw" "$(getconf CLK_TCK)" <<'PY'
import json, statistics, sys
rows, hz = {}, int(sys.argv[2])
for line in open(sys.argv[1]):
    a, rss, ticks, rest = line.split(" ", 3)
    s, h, g = (json.loads(x) for x in rest.split("|"))
    rows.setdefault(a, []).append((int(rss), int(ticks) / hz, s, h, g))
def med(xs):
    return statistics.median(xs) if xs else float("nan")
print(f"{'attack':<8} {'socket p99':>11} {'http p99':>10} {'grpc p99':>10} {'grpc calls':>11} "
      f"{'errors':>7} {'RSS MiB':>8} {'CPU s':>6}   p99 vs unattacked (socket, http, grpc)")
base = None
for a in ["none", "hpack", "lawful", "bodies", "idle"]:
    if a not in rows:
        continue
    rs = rows[a]
    sp = med([x[2]["p99_us"] for x in rs])
    hp = med([x[3]["p99_us"] for x in rs])
    gp = med([x[4]["p99_us"] for x in rs])
    gc = med([x[4]["calls"] for x in rs])
    err = sum(x[2]["errors"] + x[3]["errors"] + x[4]["errors"] for x in rs)
    rss = med([x[0] / 1024 for x in rs])
    cpu = med([x[1] for x in rs])
    if a == "none":
        base = (sp, hp, gp)
    ratio = ", ".join(f"{v / b:.1f}x" if b > 0 and v > 0 else "-" for v, b in zip((sp, hp, gp), base))
    print(f"{a:<8} {sp:>9.0f}us {hp:>8.0f}us {gp:>8.0f}us {gc:>11.0f} {err:>7} {rss:>8.1f} "
          f"{cpu:>6.2f}   {ratio}")
print(f"medians of {len(rows['none'])} runs; p99 of one request in flight per door; "
      "errors summed over the runs; grpc -1: no answer at all")
PY
