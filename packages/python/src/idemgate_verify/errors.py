"""Why a forward was refused."""

from __future__ import annotations

from typing import Literal

#: The categories of tests/vectors/forwards.json.
VerifyErrorCode = Literal["missing-header", "malformed-header", "stale", "bad-signature"]


class VerifyError(Exception):
    """A request that idemgate did not sign, or not as received."""

    def __init__(self, code: VerifyErrorCode, message: str, header: str | None = None) -> None:
        super().__init__(message)
        self.code: VerifyErrorCode = code
        #: The header at fault, for missing-header and malformed-header.
        self.header = header
