"""Exceptions and warnings raised by the stoker package."""


class StokerError(RuntimeError):
    """An error reported by the daemon or the ring.

    Attributes:
        code: the canonical status code name, e.g. "NOT_FOUND",
            "INVALID_ARGUMENT", "UNAVAILABLE" (gRPC's names).
        message: the daemon's message, which names the offending argument or
            path.
    """

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class SampleErrorWarning(UserWarning):
    """Samples of an epoch could not be read or decoded (on_error="replace"
    put others in their place; "zeros" left them blank)."""


class StarvationWarning(UserWarning):
    """The training loop spent a large share of an epoch waiting for data."""
