#!/usr/bin/env bash
# What TLS costs per decision through the redis store (docs/redis.md, "Credentials and TLS"):
# one redis-server with a plain port and a tls-port (certificates made here with openssl), and
# bench/bench_redis (engine + store, no socket) against each at depth 1 and 64, ROUNDS times
# interleaved. Prints every run, then per target and depth the medians of decisions/s, of the
# bench's CPU per decision (the daemon's side: the store, OpenSSL) and of redis-server's CPU per
# decision (its side of TLS). Everything lives in a temporary directory, stopped on exit.
# Usage: bench/bench_tls.sh [--build DIR] [--seconds S] [--rounds N]
. "$(dirname "$0")/lib.sh"
build=build seconds=3 rounds=5
bench_args "build seconds rounds" "" "$@"
bench=$build/bench/bench_redis
bench_need "$build" "$bench"
dir=$bench_tmp
ec=(ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 -newkey "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.pem" -subj /CN=bench-ca \
  -days 1 2>/dev/null
openssl req -newkey "${ec[@]}" -keyout "$dir/s.key" -out "$dir/s.csr" -subj /CN=bench 2>/dev/null
echo "subjectAltName=IP:127.0.0.1" >"$dir/ext"
openssl x509 -req -in "$dir/s.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
  -out "$dir/s.pem" -days 1 -extfile "$dir/ext" 2>/dev/null
plain=$(bench_free_port) tls=$(bench_free_port)
bench_spawn "$dir/redis.out" redis-server --port "$plain" --tls-port "$tls" --bind 127.0.0.1 \
  --tls-cert-file "$dir/s.pem" --tls-key-file "$dir/s.key" --tls-ca-cert-file "$dir/ca.pem" \
  --tls-auth-clients no --dir "$dir" --save '' --appendonly no --logfile "$dir/redis.log"
redis_pid=$bench_pid
bench_poll 10 redis-cli -p "$plain" ping || { echo "$bench_name: redis did not start" >&2; exit 69; }
hz=$(getconf CLK_TCK)
bench_load
declare -A rate cpu rcpu
for r in $(seq "$rounds"); do
  for depth in 1 64; do
    for target in plain tls; do
      args=("127.0.0.1:$plain"); [ $target = tls ] && args=("127.0.0.1:$tls" --tls "$dir/ca.pem")
      t0=$(bench_cpu_ticks "$redis_pid")
      line=$("$bench" "${args[@]}" --depth "$depth" --seconds "$seconds" --keys 1000)
      t1=$(bench_cpu_ticks "$redis_pid")
      n=$(sed 's/.*(\([0-9]*\) in .*/\1/' <<<"$line")
      echo "round $r: $line; redis-server $(awk -v t=$((t1 - t0)) -v n="$n" -v hz="$hz" \
        'BEGIN {printf "%.2f", t / hz * 1e6 / n}') us CPU per decision"
      rate[$target.$depth]+="$(sed 's/.*: \([0-9]*\) decisions\/s.*/\1/' <<<"$line") "
      cpu[$target.$depth]+="$(sed 's/.*; \([0-9.]*\) us CPU per decision/\1/' <<<"$line") "
      rcpu[$target.$depth]+="$(awk -v t=$((t1 - t0)) -v n="$n" -v hz="$hz" \
        'BEGIN {printf "%.2f", t / hz * 1e6 / n}') "
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for depth in 1 64; do
  for target in plain tls; do
    echo "median $target depth $depth: $(median "${rate[$target.$depth]}") decisions/s," \
      "$(median "${cpu[$target.$depth]}") us bench CPU and" \
      "$(median "${rcpu[$target.$depth]}") us redis-server CPU per decision"
  done
done
