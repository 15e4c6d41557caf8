"""A small HTTP service that asks tokentriage before serving each request and hands the rate-limit
headers of the decision back to its caller (docs/clients.md).

    python3 http_gate.py --port 8080 [--socket PATH] [--fail closed]

Every request names its subject in headers: X-Team and X-Api-Key become the levels `team` and
`key`; X-Tokens, when present, is the token estimate for tpm limits. The answer is 200 with the
RateLimit / X-Ratelimit-* headers when admitted, 429 with Retry-After when denied, and 413 when
the token cost can never fit (retrying the same cost is pointless). When the daemon cannot be
reached the gate follows --fail: open serves the request (the default, like the limits' own
posture.fail), closed answers 503.
"""

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tokentriage_client import Client, TokentriageError

SUBJECT_HEADERS = {"X-Team": "team", "X-Api-Key": "key"}
STATUS = {"admit": 200, "deny": 429, "unfittable": 413}


class Gate(BaseHTTPRequestHandler):
    socket_path = None
    fail_open = True
    _local = threading.local()  # one connection per server thread

    def client(self):
        if getattr(self._local, "client", None) is None:
            self._local.client = Client(self.socket_path)
        return self._local.client

    def do_GET(self):
        subject = {level: self.headers[h] for h, level in SUBJECT_HEADERS.items() if self.headers.get(h)}
        tokens = self.headers.get("X-Tokens")
        try:
            decision = self.client().decide(subject, int(tokens) if tokens else None)
        except TokentriageError as e:  # a request the daemon refused: the caller's mistake
            return self.reply(400, {}, {"error": e.code, "message": e.message})
        except (OSError, ValueError) as e:  # the daemon cannot be reached
            self.log_message("tokentriage unavailable: %s", e)
            if self.fail_open:
                return self.reply(200, {}, {"admit": True, "unavailable": True})
            return self.reply(503, {"Retry-After": "1"}, {"admit": False, "unavailable": True})
        body = {k: decision.get(k) for k in ("admit", "verdict", "limit", "code") if k in decision}
        self.reply(STATUS.get(decision.get("verdict"), 500), decision.get("headers", {}), body)

    def reply(self, status, headers, body):
        data = (json.dumps(body) + "\n").encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--socket", default=None, help="default: $TOKENTRIAGE_SOCKET, then the built-in path")
    ap.add_argument("--fail", choices=("open", "closed"), default="open")
    args = ap.parse_args(argv)
    Gate.socket_path = args.socket
    Gate.fail_open = args.fail == "open"
    server = ThreadingHTTPServer((args.bind, args.port), Gate)
    print(f"listening on {args.bind}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
