#!/usr/bin/env bash
# ctest packaging_systemd: packaging/systemd/tokentriage.service passes `systemd-analyze verify`
# with no complaint at all (verify exits 0 on unknown keys and bad values, so any output fails),
# and names what the daemon relies on.
# usage: systemd.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$1 bin=$2
unit="$src/packaging/systemd/tokentriage.service"
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze not found (Debian: systemd)" >&2; exit 77; }
fail=0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# verify wants ExecStart's binary to exist: point it at the one just built.
sed "s#^ExecStart=/usr/local/bin/tokentriage#ExecStart=$bin/cmd/tokentriage#" "$unit" > "$work/tokentriage.service"
out=$(systemd-analyze verify "$work/tokentriage.service" 2>&1) || true
if [ -n "$out" ]; then echo "FAIL systemd-analyze verify: $out"; fail=1; else echo "ok   systemd-analyze verify is silent"; fi

need() { # directive regex, why
  if grep -Eq "^$1" "$unit"; then echo "ok   $2"; else echo "FAIL $2 (no line matching ^$1)"; fail=1; fi
}
need 'ExecStart=.*tokentriage serve -c /etc/tokentriage/tokentriage\.yaml$' "ExecStart runs serve on /etc/tokentriage/tokentriage.yaml"
need '(ExecStartPost=.*TOKENTRIAGE_READYZ|Type=notify)' "readiness: sd_notify or a /readyz poll before the unit is active"
need 'Environment=TOKENTRIAGE_READYZ=http://127\.0\.0\.1:9464/readyz' "the /readyz poll uses server.http's default address"
need 'ExecReload=/bin/kill -HUP \$MAINPID' "reload is SIGHUP"
need 'KillSignal=SIGTERM' "stop is SIGTERM (graceful leave)"
need 'RuntimeDirectory=tokentriage$' "the socket directory is /run/tokentriage"
need 'StateDirectory=tokentriage$' "the state directory is /var/lib/tokentriage"
need 'User=tokentriage' "runs as the tokentriage user"
need 'CapabilityBoundingSet=$' "no capabilities"
need 'NoNewPrivileges=yes' "no new privileges"
need 'ProtectSystem=strict' "read-only file system"
# The unit's commands against a real daemon: ExecStartPost returns once /readyz answers,
# ExecReload (SIGHUP) reloads without stopping it, KillSignal (SIGTERM) ends it with status 0.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'server: { socket: %s/tt.sock, http: "127.0.0.1:%s" }\n' "$work" "$port" > "$work/tt.yaml"
"$bin/cmd/tokentriage" serve -c "$work/tt.yaml" 2>"$work/serve.log" &
pid=$!
# systemd splits the command line into words the way a shell does for this one (quotes only).
post=$(sed -n 's/^ExecStartPost=//p' "$unit")
if TOKENTRIAGE_READYZ="http://127.0.0.1:$port/readyz" timeout 10 python3 -c \
     'import os, shlex, sys; argv = shlex.split(sys.argv[1]); os.execv(argv[0], argv)' "$post"; then
  echo "ok   ExecStartPost returns once the daemon answers /readyz"
else
  echo "FAIL ExecStartPost did not see the daemon ready within 10 s"; fail=1
fi
reload=$(sed -n 's/^ExecReload=//p' "$unit")
MAINPID=$pid eval "$(sed 's/\$MAINPID/$MAINPID/' <<<"$reload")"
for _ in $(seq 100); do grep -q 'reload' "$work/serve.log" && break; sleep 0.05; done
if kill -0 "$pid" 2>/dev/null && grep -q reload "$work/serve.log"; then
  echo "ok   ExecReload (SIGHUP) reloads and the daemon keeps running"
else
  echo "FAIL ExecReload: no reload logged, or the daemon stopped"; fail=1
fi
kill -"$(sed -n 's/^KillSignal=SIG//p' "$unit")" "$pid"
if wait "$pid"; then echo "ok   KillSignal stops the daemon with status 0"; else echo "FAIL KillSignal: status $?"; fail=1; fi

grep -q '^u tokentriage ' "$src/packaging/systemd/tokentriage.sysusers" && echo "ok   sysusers.d creates the tokentriage user" \
  || { echo "FAIL sysusers.d does not create the tokentriage user"; fail=1; }

# The unit declares what it calls: every program its Exec lines run (inside `sh -c` scripts too)
# is on its "# Calls:" line, and comes from a package scripts/deps.sh's run group installs.
called=$(python3 - "$unit" <<'PY'
import re, shlex, sys
words = set()
keywords = {"until", "while", "do", "done", "if", "then", "else", "fi", "!", "{", "}"}
for line in open(sys.argv[1]):
    m = re.match(r"(ExecStart|ExecStartPre|ExecStartPost|ExecReload|ExecStop|ExecStopPost)=[-@:+!]*(.*)", line)
    if not m:
        continue
    argv = shlex.split(m.group(2))
    words.add(argv[0])
    if argv[0].split("/")[-1] in ("sh", "bash", "dash") and "-c" in argv:
        script = argv[argv.index("-c") + 1]
        at_start = True
        for tok in shlex.shlex(script, posix=True, punctuation_chars=True):
            if tok in (";", "&&", "||", "|", "&") or tok in keywords:
                at_start = True
                continue
            if at_start and "=" not in tok:
                words.add(tok)
            at_start = False
print("\n".join(sorted(words)))
PY
)
names=$(for w in $called; do basename "$w"; done | sort -u)
declared=$(sed -n 's/^# Calls: //p' "$unit" | tr ',' '\n' | sed 's/ *(.*//; s/^ *//; s/ *$//' | { grep -v '^$' || true; } | sort -u)
if [ -n "$declared" ] && [ "$names" = "$declared" ]; then
  echo "ok   the unit declares the programs it calls: $(echo $names)"
else
  echo "FAIL the unit calls $(echo $names) but its '# Calls:' line names '$(echo $declared)'"; fail=1
fi
have=$(apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances $("$src/scripts/deps.sh" --list run 2>/dev/null) 2>/dev/null |
  grep -v '^ ' | sed 's/:.*//' | sort -u)
for p in $called; do
  [ "$(basename "$p")" = tokentriage ] && continue # the daemon itself: cmake --install
  case $p in /*) path=$p ;; *) path=$(type -P "$p" || true) ;; esac # a program, not a builtin
  pkg=""
  for q in "$path" "$(readlink -f "$path")" "${path#/usr}" "/usr${path}"; do # usr-merge: one is dpkg's
    pkg=$(dpkg-query -S "$q" 2>/dev/null | grep -v '^diversion' | head -1 | sed 's/:.*//; s/,.*//') || true
    [ -n "$pkg" ] && break
  done
  essential=$(dpkg-query -W -f='${Essential}' "$pkg" 2>/dev/null || true)
  if [ -n "$pkg" ] && { grep -qx "$pkg" <<<"$have" || [ "$essential" = yes ]; }; then
    echo "ok   $p comes from $pkg, $([ "$essential" = yes ] && echo "essential on Debian" || echo "which scripts/deps.sh run installs")"
  else echo "FAIL $p (${path:-not found}, package ${pkg:-none}) is not installed by scripts/deps.sh run"; fail=1; fi
done
exit $fail
