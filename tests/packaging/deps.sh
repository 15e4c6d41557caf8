#!/usr/bin/env bash
# ctest packaging_deps: scripts/deps.sh's groups hold what they claim to, read from a real build.
# - run: every shared library the built tokentriage loads comes from a package of the run group
#   or one they depend on (what a host that only runs the daemon installs);
# - run + build: every system header an object outside tests/ was compiled with (gcc's .d files),
#   and the tools the build calls (cc, cmake, pkg-config, protoc-c), likewise;
# so scripts/run.sh, which installs only those two groups, can build and run the daemon on a fresh
# Debian 12. A package the build starts to need without a line in deps.sh fails here, named.
# usage: deps.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$1 bin=$2
for t in dpkg-query apt-cache; do
  command -v "$t" >/dev/null || { echo "SKIP: $t not found (not a Debian system)" >&2; exit 77; }
done
fail=0

# Everything a group's packages pull in, installed here (the closure apt would install).
closure() {
  # shellcheck disable=SC2046
  apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances $("$src/scripts/deps.sh" --list "$@") 2>/dev/null |
    grep -v '^ ' | sed 's/:.*//' | sort -u
}
# The packages that own FILE... one a line; "? FILE" for a file none owns. A file is looked up
# as named and with its symlinks resolved (usr-merge: /lib is /usr/lib, dpkg knows one of them).
owners() {
  local f found
  mapfile -t names < <(for f in "$@"; do echo "$f"; readlink -f "$f"; done | sort -u)
  found=$(dpkg-query -S "${names[@]}" 2>/dev/null | grep -v '^diversion ') || true
  for f in "$@"; do
    grep -qF -e ": $f" -e ": $(readlink -f "$f")" <<<"$found" || echo "? $f"
  done
  sed 's/: .*//; s/, /\n/g' <<<"$found" | sed 's/:[a-z0-9]*$//' | sort -u
}
check() { # what, closure file, files...
  local what=$1 have=$2 p n=0 bad=0; shift 2
  while read -r p; do
    case $p in
      "?"*) echo "FAIL $what: ${p#? } belongs to no package"; bad=1 ;;
      *) if grep -qx "$p" "$have"; then n=$((n + 1)); else
        echo "FAIL $what: needs $p, which scripts/deps.sh does not install"; bad=1
      fi ;;
    esac
  done < <(owners "$@")
  if ((bad)); then fail=1; else echo "ok   $what: $n packages, all in the groups' closure"; fi
}

for g in run build test; do
  [ -n "$("$src/scripts/deps.sh" --list "$g" 2>/dev/null)" ] ||
    { echo "FAIL scripts/deps.sh --list $g lists no package"; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
closure run >"$work/run"
closure run build >"$work/build"

[ -x "$bin/cmd/tokentriage" ] || { echo "FAIL $bin/cmd/tokentriage not built"; exit 1; }
mapfile -t libs < <(ldd "$bin/cmd/tokentriage" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
((${#libs[@]} > 3)) || { echo "FAIL ldd found ${#libs[@]} libraries"; exit 1; }
if grep -Eq '/lib(a|ub)san\.' <<<"$(printf '%s\n' "${libs[@]}")"; then
  # A sanitizer build (TT_SANITIZE): its runtimes come with the compiler, a build package.
  check "run + build: the libraries a sanitizer build of tokentriage loads" "$work/build" "${libs[@]}"
else
  check "run: the libraries tokentriage loads" "$work/run" "${libs[@]}"
fi

# gcc's depfiles: "obj: src hdr hdr \" lines; the system headers are the absolute paths under /usr.
mapfile -t hdrs < <(find "$bin" -path "$bin/tests" -prune -o -name '*.o.d' -print0 |
  xargs -0 cat | tr ' \\' '\n\n' | grep '^/usr/' | sort -u)
((${#hdrs[@]} > 20)) || { echo "FAIL the build's depfiles name ${#hdrs[@]} system headers (built with gcc?)"; exit 1; }
for h in uv.h yaml.h sodium.h hiredis/hiredis.h nghttp2/nghttp2.h protobuf-c/protobuf-c.h http_parser.h msgpack.h; do
  grep -q "/$h$" <<<"$(printf '%s\n' "${hdrs[@]}")" || { echo "FAIL no object was compiled with $h"; fail=1; }
done
mapfile -t tools < <(for t in cc cmake pkg-config protoc-c; do command -v "$t"; done)
check "run + build: ${#hdrs[@]} system headers the objects outside tests/ read, and cc cmake pkg-config protoc-c" \
  "$work/build" "${hdrs[@]}" "${tools[@]}"

# The groups name real packages, each once.
for g in run build test; do
  dup=$("$src/scripts/deps.sh" --list "$g" | sort | uniq -d)
  [ -z "$dup" ] || { echo "FAIL group $g lists $dup twice"; fail=1; }
done
"$src/scripts/deps.sh" --list nope 2>/dev/null && { echo "FAIL an unknown group is accepted"; fail=1; }
exit $fail
