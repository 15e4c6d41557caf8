#!/usr/bin/env bash
# The tests that start the real daemon, with every daemon under valgrind memcheck
# (--leak-check=full --error-exitcode=99; tests/integration/daemon.c and the fleet harness
# tests/share/fleet.c honour TT_VALGRIND=<dir>), the multi-replica fleets included.
# Passes when every test passes and no daemon's log shows an error or a leak (a leak counts as
# an error with --error-exitcode). A daemon a test SIGKILLs on purpose writes no summary: counted.
# Usage: scripts/valgrind.sh [build-dir]   (a plain, non-sanitizer build; default build-vg)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-vg}
[ -f "$dir/CMakeCache.txt" ] || scripts/build.sh "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j2 >/dev/null
logs=$(mktemp -d /tmp/tt-valgrind-XXXXXX)
trap 'rm -rf "$logs"' EXIT
rc=0
TT_VALGRIND=$logs ctest --test-dir "$dir" --output-on-failure --timeout 1800 \
  -R '^test_(integration_.*|rls_door|server_srv|server_http|server_http_decide|redis_daemons|redis_cluster_daemons|membership_fleet|membership_restart|membership_pushpull|share_fleet|demand_processes)$' \
  || rc=1
n=$(ls "$logs" | wc -l)
bad=$(grep -l 'ERROR SUMMARY: [1-9]' "$logs"/vg.*.log || true)
clean=$(grep -l 'ERROR SUMMARY: 0 errors' "$logs"/vg.*.log | wc -l)
# A process forked by a daemon without exec (the state snapshot's writer) is traced too. Its
# heap is a copy of its parent's at the fork, so whatever the parent's other threads held then
# (a seed lookup in libuv's threadpool) has no owner in the child and shows as lost at its
# _exit: not a leak of the product's. Such a child's report counts only its memory errors.
memory_errors='^==[0-9]+== (Invalid|Conditional|Syscall param|Mismatched|Source and destination overlap|Use of uninitialised)'
errors="" forked=0
for f in $bad; do
  parent=$(sed -n 's/^==[0-9]*== Parent PID: \([0-9]*\)$/\1/p' "$f" | head -1)
  if [ -n "$parent" ] && [ -f "$logs/vg.$parent.log" ] && ! grep -qE "$memory_errors" "$f"; then
    forked=$((forked + 1))
  else
    errors="$errors $f"
  fi
done
echo "valgrind: $n daemon runs: $clean with 0 errors, $(echo $errors | wc -w) with errors," \
  "$forked fork children with only their parent's copied heap lost," \
  "$((n - clean - $(echo $bad | wc -w))) killed before a summary"
for f in $errors; do
  echo "== $f"; grep -A40 -E '^==[0-9]+== (Invalid|Conditional|Syscall|.*definitely lost|.*possibly lost|ERROR SUMMARY)' "$f" | head -80
  rc=1
done
[ "$n" -gt 0 ] || { echo "valgrind: no daemon ran under valgrind"; rc=1; }
exit $rc
