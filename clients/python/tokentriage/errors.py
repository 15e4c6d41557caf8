"""Typed errors. Every error is a TokentriageError with the daemon's `code` (the wire name of its
error table: docs/protocol.md, "Errors") and `message`; its class says what the caller can do:

    Unavailable      the daemon cannot be reached, or the connection broke or timed out: decide
                     as the limit's posture says (fail open for capacity, closed for money). It
                     is also a ConnectionError (an OSError).
    RequestError     the daemon refused the request as malformed (a subject level too long, a
                     tpm limit without tokens, ...): a bug of the caller, nothing was decided.
      UnknownReservation  settle of a reservation the daemon does not hold (never issued,
                          expired: it stays charged)
      UnknownLease        a lease the daemon does not hold
    ServerError      the daemon could not answer (out of memory, the lease cap, a store's
                     error): retrying later may work.
    ProtocolError    the stream cannot be read (a bug on one side); the connection is dropped.
    LeaseDenied      lease(): the concurrency limit's slots are all held (`decision` says
                     which limit); not the daemon's error but its verdict.
"""


class TokentriageError(Exception):
    """The base of every error of this package: `code` and `message`."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Unavailable(TokentriageError, ConnectionError):
    """No answer from the daemon: not running, unreachable, gone mid-call, or too slow."""

    def __init__(self, message):
        super().__init__("unavailable", message)


class ProtocolError(TokentriageError):
    """The daemon's bytes cannot be read as its answers."""


class RequestError(TokentriageError):
    """The daemon refused the request; nothing was decided."""


class UnknownReservation(RequestError):
    """settle() of a reservation the daemon does not hold."""


class UnknownLease(RequestError):
    """A lease the daemon does not hold."""


class ServerError(TokentriageError):
    """The daemon could not answer the request."""


class LeaseDenied(TokentriageError):
    """lease(): every slot of a concurrency limit is held. `decision` is the daemon's answer."""

    def __init__(self, decision):
        limit = decision.get("limit") or "a concurrency limit"
        super().__init__("lease_denied", f"denied by {limit}: every slot is held")
        self.decision = decision


# The daemon's codes for a request it refuses as malformed (common/tt_err.h's TT_ERRNO_MAP).
_REQUEST = {
    "too_large", "too_deep", "wrong_type", "unknown_op", "missing_field", "bad_value",
    "unknown_field", "bad_request", "bad_subject", "tokens_required", "out_of_range",
    "no_tpm_limit",
}
_BY_CODE = {"unknown_reservation": UnknownReservation, "unknown_lease": UnknownLease,
            "bad_frame": ProtocolError}


def error_from(code, message):
    """The typed error for an error answer's code and message."""
    cls = _BY_CODE.get(code) or (RequestError if code in _REQUEST else ServerError)
    return cls(code, message)
