"""A Python client of the tokentriage decision socket (SPEC §5, docs/protocol.md).

The socket speaks one msgpack map per message in each direction; responses come in request order
and echo the request's `seq`. This client sends one request at a time and waits for its answer,
which is what a request handler needs; it needs nothing beyond the standard library and msgpack
(Debian: python3-msgpack).

    from tokentriage_client import Client
    with Client() as tt:
        d = tt.decide({"team": "t-42", "key": "k-1"})
        if not d["admit"]:
            ...  # answer 429 with d["headers"] (Retry-After, RateLimit, ...)
        d = tt.decide({"team": "t-42"}, tokens=16384)  # a tpm estimate
        ...  # the call; then correct the estimate to what it used:
        tt.settle(d["reservation"], used)

It is not thread-safe: give each thread (or each worker process) its own Client.

The client speaks protocol 2: the daemon answers a decision with the numbers its rate headers
are made of ("policy", "requests", "tokens", "retry"), and render_headers() writes the headers
from them here, byte for byte as tests/vectors/headers.txt says (decide() puts them in the
answer's "headers", as protocol 1 answers had them).
"""

import math
import os
import socket

import msgpack

DEFAULT_SOCKET = "/run/tokentriage/tokentriage.sock"
PROTOCOL = 2
SF_INT_MAX = 999_999_999_999_999  # RFC 9651 Integers: 15 digits


def go_duration(ms):
    """Whole milliseconds as Go's time.Duration prints them: 0s, 250ms, 1.5s, 1m0s, 1h0m0s."""
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    s, frac = divmod(ms, 1000)
    out = ""
    if s >= 3600:
        out += f"{s // 3600}h"
    if s >= 60:
        out += f"{s % 3600 // 60}m"
    out += str(s % 60)
    if frac:
        out += "." + f"{frac:03d}".rstrip("0")
    return out + "s"


def _sf_int(v):
    return min(max(v, 0), SF_INT_MAX)


def render_headers(answer):
    """The rate headers of a protocol 2 decision, from its numbers, in the order of
    tests/vectors/headers.txt: a dict of name to value (empty when nothing is disclosed).

    policy   [id, "rpm"|"tpm", period_ms, quota, remaining, t_s]: Ratelimit-Policy, RateLimit
    requests [quota, remaining, reset_ms]: X-Ratelimit-*-Requests (likewise tokens)
    retry    seconds: Retry-After, never before RateLimit's t"""
    headers = {}
    retry = answer.get("retry")
    policy = answer.get("policy")
    if policy:
        pid, kind, period_ms, quota, remaining, t = policy
        g = math.gcd(period_ms, 1000) if period_ms > 0 else 1000
        w, scale = (period_ms // g, 1000 // g) if period_ms > 0 else (0, 1)
        unit = ';qu="tokens"' if kind == "tpm" else ""
        headers["Ratelimit-Policy"] = f'"{pid}";q={_sf_int(quota * scale)}{unit};w={_sf_int(w)}'
        headers["RateLimit"] = f'"{pid}";r={_sf_int(remaining)};t={_sf_int(t)}'
        if retry is not None and retry >= 0:
            retry = max(retry, min(t, SF_INT_MAX))
    for key, unit in (("requests", "Requests"), ("tokens", "Tokens")):
        trio = answer.get(key)
        if trio:
            headers[f"X-Ratelimit-Limit-{unit}"] = str(trio[0])
            headers[f"X-Ratelimit-Remaining-{unit}"] = str(trio[1])
            headers[f"X-Ratelimit-Reset-{unit}"] = go_duration(trio[2])
    if retry is not None and retry >= 0:
        headers["Retry-After"] = str(retry)
    return headers


class TokentriageError(Exception):
    """The daemon answered with an error map: `code` ("bad_value", ...) and `message`."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def socket_path(path=None):
    """The socket path as every tokentriage client resolves it (docs/protocol.md): the argument,
    then $TOKENTRIAGE_SOCKET, then the built-in default when a socket exists there, else the
    fallback of a daemon that could not write /run/tokentriage when a socket exists there."""
    if path or os.environ.get("TOKENTRIAGE_SOCKET"):
        return path or os.environ["TOKENTRIAGE_SOCKET"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    fallback = (os.path.join(runtime, "tokentriage", "tokentriage.sock") if runtime
                else f"/tmp/tokentriage-{os.getuid()}/tokentriage.sock")
    if not os.path.exists(DEFAULT_SOCKET) and os.path.exists(fallback):
        return fallback
    return DEFAULT_SOCKET


class Client:
    """One connection to the daemon. Connects lazily and reconnects after a broken connection."""

    def __init__(self, path=None, timeout=1.0):
        self.path = socket_path(path)
        self.timeout = timeout
        self._sock = None
        self._unpacker = None
        self._seq = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=64 * 1024)

    def call(self, op, **fields):
        """Sends one request and returns its response map. Raises TokentriageError for an error
        answer and OSError when the daemon cannot be reached (the caller decides: fail open or
        closed)."""
        if self._sock is None:
            self._connect()
        self._seq += 1
        request = {"op": op, "seq": self._seq, "v": PROTOCOL}
        request.update({k: v for k, v in fields.items() if v is not None})
        try:
            self._sock.sendall(msgpack.packb(request, use_bin_type=True))
            response = self._read()
        except (OSError, ValueError):
            self.close()  # the stream's framing is lost: start afresh next time
            raise
        if response.get("seq") != self._seq:
            self.close()
            raise TokentriageError("bad_frame", f"response seq {response.get('seq')} for request {self._seq}")
        if "error" in response:
            err = response["error"]
            raise TokentriageError(err.get("code", "error"), err.get("message", ""))
        return response

    def _read(self):
        while True:
            for message in self._unpacker:
                if not isinstance(message, dict):
                    raise ValueError("the daemon sent something other than a map")
                return message
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self._unpacker.feed(chunk)

    def decide(self, subject, tokens=None):
        """May this request go? subject maps levels to ids ({"team": "t-42", "key": "k-1"});
        tokens is the cost presented to tpm limits. Returns the decision map: admit, verdict
        (admit|deny|unfittable), limit, remaining, retry_after, reset_after, soft_denied, headers
        and, for unfittable, code "quota_cost_unfittable" (do not retry the same cost). An admitted
        decision that charged tpm limits carries "reservation": settle it when the call is done.
        The headers are rendered here from the answer's numbers (render_headers)."""
        d = self.call("decide", subject=subject, tokens=tokens)
        d.setdefault("soft_denied", [])
        if "headers" not in d:
            d["headers"] = render_headers(d)
        return d

    def settle(self, reservation, actual):
        """Corrects the tpm limits a decision charged to the call's `actual` token count, by the
        decision's "reservation" id. Applied once: a repeat (a retry after a timeout) is answered
        with already_settled True and changes nothing. Returns the answer map: settled (limits
        corrected) and already_settled. An unknown or expired reservation (not settled within the
        daemon's bound: it stays charged) raises TokentriageError "unknown_reservation"."""
        return self.call("settle", reservation=reservation, actual=actual)

    def charge(self, subject, tokens):
        """Charges `tokens` counted after the fact, with no reservation, to every tpm limit of
        the subject: never a refund. Returns the number of limits charged."""
        return self.call("charge", subject=subject, tokens=tokens)["charged"]

    def ping(self):
        return self.call("ping")

    def fleet(self):
        return self.call("fleet")

    def members(self):
        return self.call("members")
