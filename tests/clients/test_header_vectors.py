#!/usr/bin/env python3
"""ctest header_vectors: every client-side renderer against the shared header vector table.

tests/vectors/headers.txt holds, per case, the numbers a protocol 2 decision carries and the
headers to render from them. This checks, field by field and in order:
  - the Python client's render_headers();
  - the CLI (`tokentriage decide`, text and --json), which prints what the C library rendered:
    a fake daemon on a temporary socket answers each decide with the case's numbers.
(The C library's tt_render_headers and the daemon's own renderer read the table in
tests/client/test_render.c and tests/engine/test_disclose.c.)

usage: test_header_vectors.py TOKENTRIAGE CLIENTS_DIR VECTORS
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import msgpack

FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def read_cases(path):
    """[(name, answer numbers as a protocol 2 answer carries them, [(header, value)])]"""
    cases, cur = [], None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("#"):
            continue
        if not line:
            cur = None
            continue
        if line.startswith("> "):
            name, value = line[2:].split(": ", 1)
            cur[2].append((name, value))
            continue
        f = line.split(" ")
        if f[0] == "case":
            cur = (f[1], {}, [])
            cases.append(cur)
        elif f[0] == "policy":
            cur[1]["policy"] = [f[1], f[2]] + [int(x) for x in f[3:7]]
        elif f[0] in ("requests", "tokens"):
            cur[1][f[0]] = [int(x) for x in f[1:4]]
        elif f[0] == "retry":
            cur[1]["retry"] = int(f[1])
        else:
            raise ValueError(f"{path}: unknown line {line!r}")
    return cases


class FakeDaemon:
    """Answers every decide on a unix socket with `self.numbers`, as a protocol 2 daemon would."""

    def __init__(self, path):
        self.numbers = {}
        self.requests = []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn:
                unpacker = msgpack.Unpacker(raw=False)
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    unpacker.feed(chunk)
                    for req in unpacker:
                        self.requests.append(req)
                        denied = "retry" in self.numbers
                        answer = {"seq": req.get("seq", 0), "admit": not denied,
                                  "verdict": "deny" if denied else "admit",
                                  "retry_after": self.numbers.get("retry", 0), "reset_after": 0}
                        answer.update(self.numbers)
                        conn.sendall(msgpack.packb(answer, use_bin_type=True))


def main():
    tt, clients, vectors = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    sys.path.insert(0, clients)
    from tokentriage_client import render_headers

    cases = read_cases(vectors)
    check(len(cases) >= 16, f"the table was read whole ({len(cases)} cases)")
    for name, numbers, want in cases:
        got = list(render_headers(numbers).items())
        check(got == want, f"python render_headers: {name}" + ("" if got == want else f": {got}"))

    work = tempfile.mkdtemp(prefix="tt-hv-")
    try:
        sock = os.path.join(work, "fake.sock")
        fake = FakeDaemon(sock)
        for name, numbers, want in cases:
            fake.numbers = numbers
            out = subprocess.run([tt, "decide", "-s", sock, "--subject", "key=k"],
                                 capture_output=True, text=True, timeout=10)
            lines = [tuple(l.split(": ", 1)) for l in out.stdout.splitlines()
                     if ": " in l and not l.startswith(" ")]
            check(out.returncode == 0 and lines == want,
                  f"cli decide: {name}" + ("" if lines == want else f": {out.stdout}{out.stderr}"))
            out = subprocess.run([tt, "decide", "-s", sock, "--subject", "key=k", "--json"],
                                 capture_output=True, text=True, timeout=10)
            try:
                got = list(json.loads(out.stdout, object_pairs_hook=list)[-1][1])
            except (ValueError, IndexError, TypeError) as e:
                got = f"{e}: {out.stdout}{out.stderr}"
            check(got == want, f"cli decide --json: {name}" + ("" if got == want else f": {got}"))
        check(all(r.get("v") == 2 for r in fake.requests),
              f"the C library asks in protocol 2 ({fake.requests[:1]})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'FAILED' if FAILED else 'passed'}: header vectors ({len(FAILED)} failure(s))")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
