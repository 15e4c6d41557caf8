#!/usr/bin/env python3
"""A peer that answers GET /v1/fleet as told, for `tokentriage fleet --all`'s bounds.

usage: fakepeer.py HOST PORT MODE   (prints "listening" once it is)
  fleet    a well-formed fleet answer from node r2 that sees 5 replicas
  garbage  200 application/msgpack with bytes that are no msgpack map
  silent   accepts and never answers
  flood    200 with an endless body
"""
import socket
import sys
import threading

import msgpack


def answer(conn, mode):
    conn.settimeout(30)
    try:
        conn.recv(4096)
        if mode == "silent":
            conn.recv(4096)  # until the client gives up
            return
        if mode == "flood":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\n\r\n")
            while True:
                conn.sendall(b"\x91" * 65536)
        if mode == "fleet":
            body = msgpack.packb({"seq": 0, "node": "r2", "n": 5, "snapshot_age_ms": -1,
                                  "truncated": False,
                                  "limits": [{"id": "team_rpm", "type": "rpm", "store": "share",
                                              "algorithm": "gcra", "amount": 600, "period_s": 60,
                                              "burst": 30, "n": 5, "sustained_bound": 600,
                                              "burst_bound": 30, "state": "armed",
                                              "local_share": 120, "divisor_min": 5,
                                              "divisor_max": 5, "detect_within_s": 9,
                                              "converged": True}]})
        else:
            body = b"\xc1<html>not a fleet</html>"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(16)
    print("listening", flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=answer, args=(conn, mode), daemon=True).start()


if __name__ == "__main__":
    main()
