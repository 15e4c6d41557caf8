#!/usr/bin/env python3
"""ctest server_http_proxies: the HTTP front door behind real proxies, and curl.

Starts `tokentriage serve` (its wall clock frozen with libfaketime, so a 300/min limit admits
exactly 300 and no refill blurs the 301st), a tiny upstream (python3 http.server, echoing the
Tokentriage-Reservation header the proxy handed it), Debian's
nginx with examples/proxy/nginx.conf (auth_request to the daemon over its unix socket) and
Debian's caddy with examples/proxy/Caddyfile (forward_auth over the socket), each as a child
with its own temporary directory and ports. Through each proxy: 300 requests of one team are
served with the rate headers, the 301st is answered 429 by the proxy with Retry-After and
RateLimit, malformed subjects are never served, and a tpm decision's reservation reaches the
upstream, which settles it once with POST /v1/settle. Then curl against the TCP listener and the
unix socket.

usage: test_http_proxies.py TOKENTRIAGE SOURCE_DIR
"""

import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from ttcheck import check, connectable, failed, free_port, summary, wait_for  # noqa: E402

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

# The upstream: serves "hello\n", and says which reservation the proxy handed it.
UPSTREAM = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "6")
        self.send_header("X-Upstream-Saw-Reservation", self.headers.get("Tokentriage-Reservation", "none"))
        self.end_headers()
        self.wfile.write(b"hello\\n")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def through(name, port, team, expect_headers_on_admit=True):
    """300 requests of `team` served with the rate headers, the 301st denied with 429."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    bad = None
    for i in range(300):
        c.request("GET", "/index.html", headers={"X-Team": team})
        r = c.getresponse()
        body = r.read()
        ok = r.status == 200 and body == b"hello\n"
        if expect_headers_on_admit:
            ok = ok and r.getheader("RateLimit", "").startswith('"team_rpm";r=') and \
                r.getheader("Ratelimit-Policy") == '"team_rpm";q=300;w=60'
        if not ok and bad is None:
            bad = (i + 1, r.status, dict(r.getheaders()), body[:200])
    check(bad is None, f"{name}: requests 1-300 served with RateLimit and Ratelimit-Policy (first bad: {bad})")
    c.request("GET", "/index.html", headers={"X-Team": team})
    r = c.getresponse()
    r.read()
    retry = r.getheader("Retry-After", "")
    check(r.status == 429 and retry.isdigit() and int(retry) >= 1,
          f"{name}: request 301 is 429 with Retry-After ({r.status}, {retry!r})")
    check(r.getheader("RateLimit", "").startswith('"team_rpm";r=0'),
          f"{name}: the 429 carries RateLimit ({r.getheader('RateLimit')!r})")
    # bad subjects: the daemon answers 400, the proxy never serves the request
    for headers in ({"X-Team": ""}, {}, {"X-Team": "x" * 300}):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/index.html", headers=headers)
        r = c.getresponse()
        body = r.read()
        check(r.status >= 400 and body != b"hello\n",
              f"{name}: a bad subject {list(headers.items())[:1]!r:.40} is not served ({r.status})")
        c.close()


def settle_over(sock, reservation, actual):
    """POST /v1/settle on the daemon's socket with curl: (status line, body)."""
    out = subprocess.run(["curl", "-sS", "-i", "-X", "POST", "--unix-socket", sock,
                          f"http://tt/v1/settle?reservation={reservation}&actual={actual}"],
                         capture_output=True, text=True, timeout=10).stdout
    return out.split("\n", 1)[0].strip(), out.rsplit("\n\n", 1)[-1]


def reservation_handoff(name, port, sock):
    """A tpm decision's reservation reaches the upstream through the proxy, and settles once;
    a client cannot hand the upstream a reservation of its own choosing."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/index.html", headers={"X-Api-Key": f"k-{name}", "X-Tokens": "1000",
                                             "Tokentriage-Reservation": "42"})
    r = c.getresponse()
    r.read()
    saw = r.getheader("X-Upstream-Saw-Reservation", "")
    check(r.status == 200 and saw.isdigit() and saw != "42",
          f"{name}: the upstream gets the decision's reservation, not the client's ({r.status}, {saw!r})")
    status, body = settle_over(sock, saw, 250)
    check(status.endswith("200 OK") and '"settled":1,"already_settled":false' in body,
          f"{name}: the upstream's settle is applied ({status!r}, {body.strip()!r})")
    status, body = settle_over(sock, saw, 250)
    check(status.endswith("200 OK") and '"settled":0,"already_settled":true' in body,
          f"{name}: a retried settle changes nothing ({status!r}, {body.strip()!r})")
    c.request("GET", "/index.html", headers={"X-Team": f"t-{name}-rpm-only",
                                             "Tokentriage-Reservation": "42"})
    r = c.getresponse()
    r.read()
    saw = r.getheader("X-Upstream-Saw-Reservation", "")
    # nginx sends none; Debian's Caddy 2.6 sends its unreplaced placeholder (2.7 sends none):
    # either way no id, and never the client's
    check(r.status == 200 and not saw.isdigit(),
          f"{name}: with no reservation, the client's header does not reach the upstream ({saw!r})")
    c.close()


def main():
    tt, src = sys.argv[1], os.path.abspath(sys.argv[2])
    for tool in ("nginx", "caddy", "curl"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            check(False, f"{tool} is installed (scripts/deps.sh)")
            return 1
    work = tempfile.mkdtemp(prefix="tt-proxies-")
    sock = os.path.join(work, "tt.sock")
    http_port, up_port, nginx_port, caddy_port = (free_port() for _ in range(4))
    procs = []

    def spawn(name, argv, env=None, cwd=None):
        log = open(os.path.join(work, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                             stdin=subprocess.DEVNULL)
        procs.append((name, p))
        return p

    try:
        token = "curl-token-0123456789abcdef"
        with open(os.path.join(work, "tokens.yaml"), "w") as f:
            f.write(f"tokens:\n  - {{ name: curl, token: {token}, subjects: {{ team: [t-curl] }} }}\n")
        with open(os.path.join(work, "tt.yaml"), "w") as f:
            f.write(f"""server:
  socket: {sock}
  http: 127.0.0.1:{http_port}
  http_decide: on
  tokens_file: {os.path.join(work, "tokens.yaml")}
  http_subject: {{ team: X-Team, key: X-Api-Key }}
  http_tokens: X-Tokens
governance:
  limits:
    - id: team_rpm
      attach: {{ level: team }}
      type: rpm
      amount: 300
      period: 1m
    - id: key_tpm
      attach: {{ level: key }}
      type: tpm
      amount: 100000
      period: 1m
""")
        # an ASan build wants its runtime first; libfaketime preloaded ahead of it is harmless
        asan = ",".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
        env = dict(os.environ, LD_PRELOAD=FAKETIME_LIB, FAKETIME="2026-12-01 12:00:00",
                   FAKETIME_DONT_FAKE_MONOTONIC="1", ASAN_OPTIONS=asan)
        daemon = spawn("tokentriage", [tt, "serve", "-c", os.path.join(work, "tt.yaml")], env=env)
        wait_for("the daemon's socket", lambda: connectable(sock), procs=[daemon])

        up = spawn("upstream", [sys.executable, "-c", UPSTREAM, str(up_port)])
        wait_for("the upstream", lambda: connectable(("127.0.0.1", up_port)), procs=[up])

        # nginx: the example, pointed at this daemon, this upstream and this port
        site = open(os.path.join(src, "examples/proxy/nginx.conf")).read()
        site = site.replace("/run/tokentriage/tokentriage.sock", sock) \
            .replace("listen 8080;", f"listen 127.0.0.1:{nginx_port};") \
            .replace("127.0.0.1:8081", f"127.0.0.1:{up_port}")
        with open(os.path.join(work, "site.conf"), "w") as f:
            f.write(site)
        temps = "".join(f"{k}_temp_path {work}/{k};\n" for k in
                        ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(os.path.join(work, "nginx.conf"), "w") as f:
            f.write(f"pid {work}/nginx.pid;\nerror_log {work}/nginx.err info;\nevents {{}}\n"
                    f"http {{\n access_log off;\n{temps} include {work}/site.conf;\n}}\n")
        nginx = spawn("nginx", [shutil.which("nginx") or "/usr/sbin/nginx", "-p", work, "-c",
                                os.path.join(work, "nginx.conf"), "-g",
                                "daemon off; master_process off;"])
        wait_for("nginx", lambda: connectable(("127.0.0.1", nginx_port)), procs=[nginx])
        through("nginx", nginx_port, "t-nginx")
        reservation_handoff("nginx", nginx_port, sock)

        caddyfile = open(os.path.join(src, "examples/proxy/Caddyfile")).read()
        caddyfile = caddyfile.replace("unix//run/tokentriage/tokentriage.sock", "unix/" + sock) \
            .replace("http://:8080", f"http://127.0.0.1:{caddy_port}") \
            .replace("127.0.0.1:8081", f"127.0.0.1:{up_port}")
        with open(os.path.join(work, "Caddyfile"), "w") as f:
            f.write(caddyfile)
        cenv = dict(os.environ, HOME=work, XDG_DATA_HOME=work, XDG_CONFIG_HOME=work)
        caddy = spawn("caddy", ["caddy", "run", "--config", os.path.join(work, "Caddyfile"),
                                "--adapter", "caddyfile"], env=cenv)
        wait_for("caddy", lambda: connectable(("127.0.0.1", caddy_port)), procs=[caddy])
        through("caddy", caddy_port, "t-caddy")
        reservation_handoff("caddy", caddy_port, sock)

        # curl, as a person would try it: the TCP listener (with its bearer token) and the socket
        for how, args in (("TCP", ["-H", f"Authorization: Bearer {token}",
                                   f"http://127.0.0.1:{http_port}/v1/decide?team=t-curl"]),
                          ("unix socket", ["--unix-socket", sock, "http://tt/v1/decide?team=t-curl"])):
            out = subprocess.run(["curl", "-sS", "-i", *args], capture_output=True, text=True,
                                 timeout=10).stdout
            check(out.startswith("HTTP/1.1 200 OK") and '"verdict":"admit"' in out and
                  '\nRateLimit: "team_rpm";r=' in out.replace("\r\n", "\n"),
                  f"curl over {how}: 200 with RateLimit and a JSON decision ({out[:60]!r})")
        out = subprocess.run(["curl", "-sS", "-i", "--unix-socket", sock,
                              "http://tt/v1/decide?team=t-curl&tokens=1e3"],
                             capture_output=True, text=True, timeout=10).stdout
        check(out.startswith("HTTP/1.1 400") and "is not a whole number" in out,
              f"curl over the socket, tokens=1e3: 400 naming it ({out[:60]!r})")
        check(daemon.poll() is None, "the daemon is still serving")
    except Exception as e:
        check(False, f"{type(e).__name__}: {e}")
    finally:
        for name, p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if failed():
            for name, _ in procs:
                path = os.path.join(work, name + ".log")
                if os.path.exists(path):
                    print(f"--- {name}.log\n" + open(path).read()[-2000:])
            if os.path.exists(os.path.join(work, "nginx.err")):
                print("--- nginx.err\n" + open(os.path.join(work, "nginx.err")).read()[-2000:])
        shutil.rmtree(work, ignore_errors=True)
    return summary("proxies")


if __name__ == "__main__":
    sys.exit(main())
