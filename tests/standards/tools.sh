# Sourced by the tests that check tokentriage with other people's tools. Each function installs
# its tool into a cache under the build tree (CI starts from a fresh machine), is quick on
# re-runs, serialises concurrent tests on a lock, and exits 77 (ctest's skip) with a message
# only when the tool cannot be had at all.

TT_SF_PARSER=structured-headers@2.1.0 # RFC 9651 (and 8941) Structured Field Values, node >= 18
TT_PLAYWRIGHT=playwright-core@1.65.2   # drives Debian's chromium (never downloads a browser)

tt_tools_skip() { echo "SKIP: $*" >&2; exit 77; }

# tt_prometheus_bin CACHE_DIR NAME: prints the path of NAME (promtool or prometheus): the one on
# PATH, else the one in Debian's prometheus package, unpacked (not installed: that would set up a
# Prometheus service) into the cache.
tt_prometheus_bin() {
  local cache=$1 name=$2 bin
  bin=$(command -v "$name" || true)
  [ -n "$bin" ] && { echo "$bin"; return 0; }
  bin="$cache/promtool/usr/bin/$name"
  mkdir -p "$cache"
  exec 9>"$cache/.lock-promtool"
  flock 9
  if [ ! -x "$bin" ]; then
    local tmp; tmp=$(mktemp -d)
    # (the package lists may be missing on a fresh machine: update them once and retry)
    (cd "$tmp" && { apt-get download -qq prometheus || { apt-get update -qq && apt-get download -qq prometheus; }; } >/dev/null 2>&1) \
      || { rm -rf "$tmp"; tt_tools_skip "$name not on PATH and apt-get download prometheus failed"; }
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
    mkdir -p "$cache/promtool/usr/bin" && mv "$tmp/x/usr/bin/$name" "$bin"
    rm -rf "$tmp"
  fi
  flock -u 9
  echo "$bin"
}

# tt_promtool CACHE_DIR: sets PROMTOOL.
tt_promtool() {
  PROMTOOL=$(tt_prometheus_bin "$1" promtool) || exit $?
}

# tt_prometheus CACHE_DIR: sets PROMETHEUS, the server (run by the monitoring tests on loopback
# or in a test's network namespace, with a config and a storage directory of their own).
tt_prometheus() {
  PROMETHEUS=$(tt_prometheus_bin "$1" prometheus) || exit $?
}

# tt_sf_parser CACHE_DIR: sets SF_NODE_PATH, the node_modules folder holding npm's
# structured-headers (nodejs and npm come from scripts/deps.sh).
tt_sf_parser() {
  SF_NODE_PATH=$(tt_npm_package "$1/sf" "$TT_SF_PARSER") || exit $?
}

# tt_npm_package CACHE_DIR SPEC: installs npm's SPEC (name@version) into CACHE_DIR once, under a
# lock; prints its node_modules folder.
tt_npm_package() {
  local cache=$1 spec=$2
  command -v node >/dev/null || tt_tools_skip "node not found (Debian: nodejs)"
  command -v npm >/dev/null || tt_tools_skip "npm not found (Debian: npm)"
  mkdir -p "$cache"
  exec 8>"$cache/.lock"
  flock 8
  if [ ! -f "$cache/.stamp-$spec" ]; then
    echo "installing $spec into $cache" >&2
    npm install --prefix "$cache" --no-audit --no-fund --no-package-lock --no-save \
      --loglevel=error "$spec" >&2 \
      || tt_tools_skip "npm could not install $spec (registry unreachable?)"
    touch "$cache/.stamp-$spec"
  fi
  flock -u 8
  echo "$cache/node_modules"
}

# tt_playwright CACHE_DIR: sets PW_NODE_PATH (npm's playwright-core) and CHROMIUM (Debian's
# chromium, scripts/deps.sh; playwright-core drives it and downloads nothing).
tt_playwright() {
  CHROMIUM=$(command -v chromium || true)
  [ -n "$CHROMIUM" ] || tt_tools_skip "chromium not found (Debian: chromium, scripts/deps.sh)"
  PW_NODE_PATH=$(tt_npm_package "$1/playwright" "$TT_PLAYWRIGHT") || exit $?
}
