#!/usr/bin/env bash
# ctest packaging_install: `cmake --install` into a scratch prefix puts the binary, the client
# library (shared and static), its header and its pkg-config file in place, and a program built
# with nothing but `pkg-config --cflags --libs tokentriage` from that prefix links and runs.
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
"$prefix/bin/tokentriage" version >/dev/null && echo "ok   the installed binary runs" \
  || { echo "FAIL the installed binary does not run"; fail=1; }

pcdir=$(dirname "$(compgen -G "$prefix/lib*/pkgconfig/tokentriage.pc" | head -1)")
cat > "$prefix/app.c" <<'EOC'
#include <stdio.h>
#include <string.h>
#include <tokentriage.h>
int main(void)
{
    char path[256];
    if (tt_socket_path(path, sizeof path, "/tmp/x.sock", NULL, 0) != 0 || strcmp(path, "/tmp/x.sock") != 0)
        return 1;
    tt_client_t *c = NULL;
    int rc = tt_connect(&c, "/nonexistent/tokentriage.sock"); /* no daemon: a clean error */
    printf("%s\n", tt_strerror(rc));
    return rc == TT_ECONNECT ? 0 : 2;
}
EOC
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs tokentriage)
if cc "$prefix/app.c" -o "$prefix/app" $flags 2>&1 && LD_LIBRARY_PATH=$(dirname "$pcdir") "$prefix/app" >/dev/null; then
  echo "ok   a program built with \`pkg-config --cflags --libs tokentriage\` ($flags) links and runs"
else
  echo "FAIL a program built with \`pkg-config --cflags --libs tokentriage\` ($flags) does not link or run"; fail=1
fi
# Relocatable: the .pc file must point into the prefix it was installed to.
case "$flags" in *"$prefix"*) echo "ok   the pkg-config file points into the install prefix" ;;
  *) echo "FAIL the pkg-config file points elsewhere than $prefix: $flags"; fail=1 ;; esac
exit $fail
