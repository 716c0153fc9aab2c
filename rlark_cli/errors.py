"""Exit codes (SPEC 17): 0-6 are the only ones, each with one meaning, and one error type."""

from __future__ import annotations

from typing import Any

OK = 0
ERRORS = 1  # findings with errors (validate, sweep), or the job failed (submit --wait)
USAGE = 2  # a bad file or usage, or anything that stopped the command (network, token, server)
CANCELLED = 3  # the job was cancelled while `submit --wait` followed it
TIMED_OUT = 4  # `submit --wait` stopped waiting: --timeout passed, or Ctrl-C
BLOCKED = 5  # the submit was refused by error-level findings (422)
NOT_FOUND = 6  # no such job (or another team's: the server answers the same 404)


class CliError(Exception):
    """One clear line for the user, and the exit code it ends with."""

    def __init__(self, message: str, code: int = USAGE, details: list[str] | None = None,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details or []
        self.body = body
