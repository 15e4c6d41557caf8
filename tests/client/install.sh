#!/usr/bin/env bash
# The client library as a user gets it: install the build into a scratch prefix, then compile
# and run a program with nothing but `pkg-config --cflags --libs tokentriage`, against the
# shared library and against the static one.
set -euo pipefail
build=$1
extra=${2:-} # the sanitizer flags when the build is sanitized: the library needs their runtime
prefix=$(mktemp -d /tmp/tt-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(dirname "$(find "$prefix" -name tokentriage.pc | head -1)")
cat > "$prefix/hello.c" <<'C'
#include <stdio.h>
#include <tokentriage.h>
int main(void)
{
    char path[256];
    tt_client_t *c;
    if (tt_socket_path(path, sizeof(path), "/nonexistent/tt.sock", NULL, 0) != 0)
        return 1;
    int rc = tt_connect(&c, path);
    printf("%s: %s\n", path, tt_strerror(rc));
    return rc == TT_ECONNECT ? 0 : 1;
}
C
flags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs tokentriage)
cc -Wall -Werror $extra -o "$prefix/hello" "$prefix/hello.c" $flags -Wl,-rpath,"$prefix/lib"
# (outputs captured first: `grep -q` closing a pipe early would fail it under pipefail)
out=$("$prefix/hello"); [[ $out == *"cannot connect"* ]]
deps=$(ldd "$prefix/hello"); [[ $deps == *libtokentriage.so* ]]
cc -Wall -Werror $extra -o "$prefix/hello-static" "$prefix/hello.c" -I"$prefix/include" \
  "$(find "$prefix" -name libtokentriage.a)"
out=$("$prefix/hello-static"); [[ $out == *"cannot connect"* ]]
# only the public API is exported
syms=$(nm -D --defined-only "$(find "$prefix" -name 'libtokentriage.so.*.*' | head -1)" |
  awk '{print $3}')
if grep -v '^tt_' <<<"$syms"; then echo "symbols beyond tt_* are exported"; exit 1; fi
echo ok
