#!/usr/bin/env bash
# ctest packaging_dockerfile: the Dockerfile can't be built here (no container engine), so this
# checks what can go wrong offline:
#  - the runtime stage installs the Debian package of every library the built binaries link
#    directly (NEEDED) and no other, and nothing links a library from a -dev-only path;
#  - the build stage's packages are all in scripts/deps.sh's run and build groups;
#  - every file the build stage copies out of `cmake --install` is installed by it.
# usage: dockerfile.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$1 bin=$2
df="$src/Dockerfile"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# The package lists of each stage: the words of the `apt-get install` command in each FROM block.
stage_pkgs() { # stage number (1-based)
  awk -v want="$1" '/^FROM /{n++} n==want' "$df" | tr -d '\\' | tr -s ' \n' '\n' |
    awk '/apt-get/ {a=0} /^install$/ {a=1; next} a && /^[a-z0-9][a-z0-9.+-]+$/ {print} /^&&$/ {a=0}'
}
build_pkgs=$(stage_pkgs 1 | sort -u)
runtime_pkgs=$(stage_pkgs 2 | sort -u)
[ -n "$build_pkgs" ] && [ -n "$runtime_pkgs" ] || { echo "FAIL could not read the apt-get lists"; exit 1; }

# Binaries the image ships: the daemon and, once it exists, the client library.
objs=("$bin/cmd/tokentriage")
while IFS= read -r so; do objs+=("$so"); done < <(find "$bin" -name 'libtokentriage.so.*' -type f)

linked_pkgs=""
for o in "${objs[@]}"; do
  while read -r soname path; do
    real=$(readlink -f "$path")
    pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || true)
    pkg=${pkg%%:*}
    # a NEEDED entry the binary imports no symbol from (a -O0 sanitizer link keeps libmsgpackc,
    # whose inline header is all the codecs use) costs nothing at runtime: not counted
    if [ -z "$(comm -12 <(nm -D --undefined-only "$o" | awk '{sub(/@.*/, "", $NF); print $NF}' | sort -u) \
                        <(nm -D --defined-only "$real" | awk '{sub(/@.*/, "", $NF); print $NF}' | sort -u))" ]; then
      ok "$(basename "$o") lists $soname but imports nothing from it"
      continue
    fi
    case "$pkg" in
      libc6 | libgcc-s1) continue ;; # in every Debian base image
      libasan* | libubsan* | liblsan* | libtsan*) continue ;; # a sanitizer build; the image is not one
      "") bad "$(basename "$o") links $soname ($path), which no Debian package owns" ;;
      *) linked_pkgs+="$pkg"$'\n'
         grep -qx "$pkg" <<<"$runtime_pkgs" && ok "$(basename "$o") links $soname: runtime stage installs $pkg" \
           || bad "$(basename "$o") links $soname from $pkg, missing in the runtime stage's apt-get install" ;;
    esac
  done < <(ldd "$o" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
             grep -Fwf <(readelf -d "$o" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'))
done

# ...and nothing more: a runtime package no shipped binary links only grows the image.
for p in $runtime_pkgs; do
  grep -qx "$p" <<<"$linked_pkgs" && ok "runtime stage package $p is linked" \
    || bad "runtime stage package $p is linked by no shipped binary"
done

deps=$("$src/scripts/deps.sh" --list run build)
for p in $build_pkgs; do
  grep -qx "$p" <<<"$deps" && ok "build stage package $p is in scripts/deps.sh run build" \
    || bad "build stage package $p is not in scripts/deps.sh run build"
done

# What the build stage copies out of the install tree must be installed (prefix /usr, as there).
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
DESTDIR="$stage" cmake --install "$bin" --prefix /usr >/dev/null
for pattern in $(grep -o '/install/usr/[^ ]*' "$df" | sed 's#^/install##'); do
  compgen -G "$stage$pattern" >/dev/null && ok "cmake --install provides $pattern" \
    || bad "cmake --install provides nothing matching $pattern (copied by the Dockerfile)"
done
exit $fail
