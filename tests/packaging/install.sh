#!/usr/bin/env bash
# ctest packaging_install: `cmake --install` into a scratch prefix lays out what a host install
# and the Dockerfile take from it: the daemon binary (which runs from there), the client
# library (shared and static), its header and its pkg-config file, the license, notice and changelog. Building a program against
# that prefix with pkg-config is ctest client_install (tests/client/install.sh).
# usage: install.sh BINARY_DIR
set -euo pipefail
bin=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$bin" --prefix "$prefix" >/dev/null
fail=0
want() { # description, glob under the prefix
  if compgen -G "$prefix/$2" >/dev/null; then echo "ok   $1: $(cd "$prefix" && echo $2)"; else echo "FAIL $1: nothing at $2"; fail=1; fi
}
want "the daemon binary" "bin/tokentriage"
want "the shared client library" "lib*/libtokentriage.so.*"
want "the static client library" "lib*/libtokentriage.a"
want "the client header" "include/tokentriage.h"
want "the pkg-config file" "lib*/pkgconfig/tokentriage.pc"
want "the license" "share/doc/tokentriage/LICENSE"
want "the notice" "share/doc/tokentriage/NOTICE"
want "the changelog" "share/doc/tokentriage/CHANGELOG.md"
want "the systemd unit" "lib/systemd/system/tokentriage.service"
want "the sysusers.d file" "lib/sysusers.d/tokentriage.conf"
# The installed unit runs the installed binary and its Documentation= is installed with it.
unit="$prefix/lib/systemd/system/tokentriage.service"
if [ -f "$unit" ]; then
  exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
  [ "$exe" = "$prefix/bin/tokentriage" ] && echo "ok   ExecStart runs the installed binary: $exe" \
    || { echo "FAIL ExecStart runs $exe, not $prefix/bin/tokentriage"; fail=1; }
  docs=$(sed -n 's/^Documentation=//p' "$unit" | tr ' ' '\n' | sed -n 's#^file:##p')
  [ -n "$docs" ] || { echo "FAIL the unit names no Documentation=file:"; fail=1; }
  for d in $docs; do
    [ -f "$d" ] && echo "ok   Documentation=file:$d is installed" \
      || { echo "FAIL Documentation=file:$d is not installed"; fail=1; }
  done
fi
if out=$("$prefix/bin/tokentriage" version); then echo "ok   the installed binary runs: $out"
else echo "FAIL the installed binary does not run"; fail=1; fi
exit $fail
