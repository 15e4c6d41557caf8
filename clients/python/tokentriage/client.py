"""The blocking client: one connection, one request at a time (what a request handler or a
worker thread needs). Not thread-safe: one Client per thread or worker process."""

import socket

from ._core import Codec, Decision, Lease, Reservation, checked, socket_path
from .errors import ProtocolError, Unavailable


class Client:
    """One connection to the daemon at `path` (None: $TOKENTRIAGE_SOCKET, then the default).
    Connects on first use and again after a broken connection; `timeout` (seconds) bounds each
    call: the decision path must not hang. Leases live as long as the connection does."""

    def __init__(self, path=None, timeout=1.0):
        self.path = socket_path(path)
        self.timeout = timeout
        self._sock = None
        self._codec = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Closes the connection: the daemon releases every lease it held."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            raise Unavailable(f"{self.path}: {e.strerror or e}") from e
        self._sock, self._codec = sock, Codec()

    def call(self, op, **fields):
        """Sends one request and returns its answer map; raises the typed error of an error
        answer (errors.py) and Unavailable when the daemon cannot be reached."""
        if self._sock is None:
            self._connect()
        seq, data = self._codec.request(op, fields)
        try:
            self._sock.sendall(data)
            answer = self._read()
        except OSError as e:
            self.close()  # the stream's framing is lost: start afresh next time
            raise Unavailable(f"{self.path}: {e.strerror or e}") from e
        except ProtocolError:
            self.close()
            raise
        try:
            return checked(answer, seq)
        except ProtocolError:
            self.close()
            raise

    def _read(self):
        while True:
            for answer in self._codec.answers():
                return answer
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError(0, "the daemon closed the connection")
            self._codec.feed(chunk)

    def decide(self, subject, tokens=None):
        """May this request go? subject maps levels to ids ({"team": "t-42", "key": "k-1"});
        tokens is the cost presented to tpm limits (required when one applies). Returns a
        Decision: admit, verdict (admit | deny | unfittable), limit, remaining, retry_after,
        reset_after, headers, and for an admitted tpm decision its reservation (settle it)."""
        return Decision(self.call("decide", subject=subject, tokens=tokens))

    def settle(self, reservation, actual):
        """Corrects the tpm limits a decision charged to the `actual` tokens the call used.
        Once: a repeat answers already_settled True and changes nothing. Returns the answer map
        (settled: limits corrected, already_settled). UnknownReservation for an id the daemon
        does not hold (never issued, or expired: it stays charged)."""
        return self.call("settle", reservation=reservation, actual=actual)

    def charge(self, subject, tokens):
        """Counts tokens known after the fact (no reservation) against every tpm limit of the
        subject; never a refund. Returns how many limits were charged."""
        return self.call("charge", subject=subject, tokens=tokens)["charged"]

    def acquire(self, subject):
        """Takes a lease of every concurrency limit the subject reaches (the limits only
        acquire reaches: decide never counts them). Returns a Decision; admitted, its `lease`
        is held until release() or until this connection closes."""
        return Decision(self.call("acquire", subject=subject))

    def release(self, lease):
        """Releases a lease this connection holds. True when it was held."""
        return bool(self.call("release", lease=lease).get("released"))

    def reservation(self, subject, tokens):
        """`with client.reservation(subject, tokens=estimate) as r:` decides on entry (r.admit,
        r.headers, r.decision); set r.actual to the tokens the call used and the block's end
        settles it. Left unset (the call failed before it knew), the estimate stays charged."""
        return Reservation(self, subject, tokens)

    def lease(self, subject):
        """`with client.lease(subject) as d:` holds a concurrency lease for the block and
        releases it at the end; LeaseDenied on entry when every slot is held."""
        return Lease(self, subject)

    def ping(self):
        return self.call("ping")

    def fleet(self):
        return self.call("fleet")

    def members(self):
        return self.call("members")

