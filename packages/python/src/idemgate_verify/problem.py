"""RFC 9457 problem answers, the same as the Node.js package's."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from .errors import VerifyError

PROBLEM_CONTENT_TYPE = "application/problem+json"


@dataclass(frozen=True)
class Problem:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


def _problem(
    status: int,
    name: str,
    title: str,
    detail: str,
    extra: dict[str, Any] | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> Problem:
    document = {"type": f"urn:idemgate-verify:problem:{name}", "title": title, "status": status, "detail": detail}
    document.update(extra or {})
    return Problem(
        status=status,
        body=json.dumps(document).encode(),
        headers=[("content-type", PROBLEM_CONTENT_TYPE), *(headers or [])],
    )


def unverified(error: VerifyError) -> Problem:
    """401: the request is not a forward idemgate signed (or not as received)."""
    return _problem(401, "unverified", "The request is not a forward signed by idemgate", str(error), {"code": error.code})


def stale_epoch(highest_epoch: int) -> Problem:
    """409: a later forward of the key was accepted; this one was superseded."""
    return _problem(
        409,
        "stale-epoch",
        "A later forward of this key was already accepted",
        f"the highest epoch accepted for this key is {highest_epoch}",
        {"highest_epoch": highest_epoch},
    )


def body_mismatch() -> Problem:
    """422: the key was first used with another body."""
    return _problem(
        422,
        "body-mismatch",
        "The key was first used with another body",
        "the body's SHA-256 differs from the first request's",
    )


def in_progress(retry_after_seconds: float) -> Problem:
    """503 with Retry-After: the key's handler is running. idemgate treats
    503 as a failure and retries with a higher epoch, by when the first run
    has stored its result."""
    seconds = max(1, math.ceil(retry_after_seconds))
    return _problem(
        503,
        "in-progress",
        "A forward of this key is being processed",
        f"retry in {seconds} s",
        headers=[("retry-after", str(seconds))],
    )
