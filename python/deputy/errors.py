"""Errors of the C API as Python exceptions."""

from __future__ import annotations

from deputy._lib import lib
from deputy.constants import Status


class DeputyError(RuntimeError):
    """A call of the C API failed. `status` is the dp_status_t (a Status),
    `name` its enum name ("DP_ERR_MISMATCH"), `text` its description; the
    message names the call too. The agent's or library's detailed reason is
    in the log (stderr, or the file DEPUTY_LOG_FILE names)."""

    def __init__(self, call: str, status: int, detail: str = ""):
        self.call = call
        try:
            self.status: Status | int = Status(status)
        except ValueError:
            self.status = status
        self.name = lib.dp_status_name(status).decode()
        self.text = lib.dp_strerror(status).decode()
        super().__init__(f"{call}: {self.text}" + (f" ({detail})" if detail else ""))


def check(call: str, status: int, detail: str = "") -> None:
    """Raises DeputyError unless status is DP_OK."""
    if status != 0:
        raise DeputyError(call, status, detail)
