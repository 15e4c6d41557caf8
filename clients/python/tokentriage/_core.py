"""What both clients share, with no I/O: the socket's path, requests as bytes, the stream of
answers read back into maps, an answer checked against its request, decisions as objects.

The socket speaks one msgpack map per message each way (docs/protocol.md); answers come in
request order and echo the request's `seq`. This client speaks protocol 2: a decision carries
the numbers its rate headers are made of, and headers.render_headers() writes them here.
"""

import os

import msgpack

from .errors import LeaseDenied, ProtocolError, TokentriageError, error_from
from .headers import render_headers

DEFAULT_SOCKET = "/run/tokentriage/tokentriage.sock"
SOCKET_ENV = "TOKENTRIAGE_SOCKET"
PROTOCOL = 2
MESSAGE_MAX = 64 * 1024  # the daemon's bound on one message, either way


def socket_path(path=None):
    """The socket path as every tokentriage client resolves it (docs/protocol.md): the argument,
    then $TOKENTRIAGE_SOCKET, then the built-in default when a socket exists there, else the
    fallback of a daemon that could not write /run/tokentriage when a socket exists there."""
    if path or os.environ.get(SOCKET_ENV):
        return path or os.environ[SOCKET_ENV]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    fallback = (os.path.join(runtime, "tokentriage", "tokentriage.sock") if runtime
                else f"/tmp/tokentriage-{os.getuid()}/tokentriage.sock")
    if not os.path.exists(DEFAULT_SOCKET) and os.path.exists(fallback):
        return fallback
    return DEFAULT_SOCKET


class Decision(dict):
    """A decision (decide, acquire): the daemon's answer map, with its common fields as
    attributes. `headers` are rendered from the answer's numbers when it carries none."""

    def __init__(self, answer):
        super().__init__(answer)
        self.setdefault("soft_denied", [])
        if "headers" not in self:
            self["headers"] = render_headers(self)

    admit = property(lambda self: bool(self.get("admit")))
    verdict = property(lambda self: self.get("verdict"))          # admit | deny | unfittable
    limit = property(lambda self: self.get("limit", ""))          # the deciding limit
    remaining = property(lambda self: self.get("remaining"))
    retry_after = property(lambda self: self.get("retry_after", 0))  # seconds
    reset_after = property(lambda self: self.get("reset_after", 0))  # seconds
    headers = property(lambda self: self["headers"])
    soft_denied = property(lambda self: self["soft_denied"])
    code = property(lambda self: self.get("code"))  # "quota_cost_unfittable": do not retry it
    # a deny because a limit's store could not answer (Redis down, the share store not armed) and
    # its posture fails closed: retry later, as after an outage, not as after a rate limit
    unavailable = property(lambda self: self.get("code") == "unavailable")
    reservation = property(lambda self: self.get("reservation"))  # tpm: settle it
    lease = property(lambda self: self.get("lease"))  # acquire: release it


class Codec:
    """One connection's requests and answers, as bytes: seq numbering, framing, checking."""

    def __init__(self):
        self.seq = 0
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=4 * MESSAGE_MAX)

    def request(self, op, fields):
        """The next request: (seq, bytes). Fields that are None are left out."""
        self.seq += 1
        request = {"op": op, "seq": self.seq, "v": PROTOCOL}
        request.update({k: v for k, v in fields.items() if v is not None})
        return self.seq, msgpack.packb(request, use_bin_type=True)

    def feed(self, data):
        try:
            self._unpacker.feed(data)
        except msgpack.BufferFull as e:
            raise ProtocolError("bad_frame", "an answer beyond the message bound") from e

    def answers(self):
        """The answers read so far, in order. ProtocolError when the stream is not maps."""
        try:
            for message in self._unpacker:
                if not isinstance(message, dict):
                    raise ProtocolError("bad_frame", "the daemon sent something other than a map")
                yield message
        except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as e:
            raise ProtocolError("bad_frame", f"the daemon's stream cannot be read: {e}") from e


def checked(answer, seq):
    """The answer map of request `seq`, or its typed error raised."""
    if answer.get("seq") != seq:
        raise ProtocolError("bad_frame", f"answer seq {answer.get('seq')} for request {seq}")
    if "error" in answer:
        err = answer["error"] if isinstance(answer["error"], dict) else {}
        raise error_from(err.get("code", "error"), err.get("message", ""))
    return answer


class Reservation:
    """A tpm decision and its settle as a block: `with client.reservation(...)` on a Client,
    `async with` on an AsyncClient. Set `actual` to the tokens the call used and the block's
    end settles it; left unset, the estimate stays charged."""

    def __init__(self, client, subject, tokens):
        self._client, self._subject, self._tokens = client, subject, tokens
        self.decision = None
        self.actual = None

    admit = property(lambda self: self.decision.admit)
    headers = property(lambda self: self.decision.headers)

    def _settles(self):
        return self.decision.admit and self.decision.reservation and self.actual is not None

    def __enter__(self):
        self.decision = self._client.decide(self._subject, tokens=self._tokens)
        return self

    def __exit__(self, *exc):
        if self._settles():
            self._client.settle(self.decision.reservation, self.actual)

    async def __aenter__(self):
        self.decision = await self._client.decide(self._subject, tokens=self._tokens)
        return self

    async def __aexit__(self, *exc):
        if self._settles():
            await self._client.settle(self.decision.reservation, self.actual)


class Lease:
    """A concurrency lease held for a block (`with` on a Client, `async with` on an
    AsyncClient): LeaseDenied on entry when every slot is held, released at the end."""

    def __init__(self, client, subject):
        self._client, self._subject = client, subject
        self.decision = None

    def _held(self, decision):
        self.decision = decision
        if not decision.admit:
            raise LeaseDenied(decision)
        return decision

    def __enter__(self):
        return self._held(self._client.acquire(self._subject))

    def __exit__(self, *exc):
        try:
            self._client.release(self.decision.lease)
        except TokentriageError:
            pass  # a broken connection released it already

    async def __aenter__(self):
        return self._held(await self._client.acquire(self._subject))

    async def __aexit__(self, *exc):
        try:
            await self._client.release(self.decision.lease)
        except TokentriageError:
            pass  # a broken connection released it already
