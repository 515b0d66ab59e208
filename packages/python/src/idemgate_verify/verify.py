"""Verifying a forward's signature against the request as received."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

from .errors import VerifyError
from .headers import HeadersInput
from .parse import parse_epoch, parse_key, parse_scope, parse_signature

DEFAULT_TOLERANCE_SECONDS = 300


@dataclass(frozen=True)
class Forwarded:
    """A forward idemgate signed."""

    #: Idempotency-Scope: 64 lowercase hex digits.
    scope: str
    #: The idempotency key, without its quotes.
    key: str
    #: The fencing epoch: higher than every earlier forward of (scope, key).
    epoch: int
    #: Hex SHA-256 of the raw body: keep the first one per (scope, key).
    body_sha256: str
    #: The signature's t, Unix seconds.
    signed_at: int


def signed_content(
    signed_at: int, method: str, path_and_query: str, scope: str, key: str, epoch: int, body_sha256: str
) -> str:
    """The seven signed lines, joined by "\\n"."""
    return "\n".join([str(signed_at), method, path_and_query, scope, key, str(epoch), body_sha256])


def _secret_bytes(secret: str | bytes) -> bytes:
    if not secret:
        # An unset secret is a deployment mistake, not a verdict on the request.
        raise ValueError("idemgate_verify: the secret is empty")
    return secret.encode() if isinstance(secret, str) else secret


def verify(
    method: str,
    path_and_query: str,
    headers: HeadersInput,
    body: bytes,
    secret: str | bytes,
    now: int | None = None,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> Forwarded:
    """Verifies idemgate's Idempotency-* headers against the request as
    received: `method` and `path_and_query` as on the request line (e.g.
    "/payments?currency=eur"), `body` the raw bytes, `now` Unix seconds
    (the system clock by default). Raises VerifyError, whose `code` says why.
    """
    key_bytes = _secret_bytes(secret)
    key = parse_key(headers)
    scope = parse_scope(headers)
    epoch = parse_epoch(headers)
    signature = parse_signature(headers)
    now = int(time.time()) if now is None else now
    skew = abs(signature.signed_at - now)
    if skew > tolerance_seconds:
        raise VerifyError("stale", f"stale signature: signed {skew} s from now, tolerance {tolerance_seconds} s")
    body_sha256 = hashlib.sha256(body).hexdigest()
    content = signed_content(signature.signed_at, method, path_and_query, scope, key, epoch, body_sha256)
    expected = hmac.new(key_bytes, content.encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature.mac):
        raise VerifyError("bad-signature", "the signature does not match the request, scope, key, epoch and body")
    return Forwarded(scope=scope, key=key, epoch=epoch, body_sha256=body_sha256, signed_at=signature.signed_at)


def sign(
    method: str,
    path_and_query: str,
    body: bytes,
    secret: str | bytes,
    scope: str,
    key: str,
    epoch: int,
    signed_at: int,
) -> str:
    """For tests of origin code: the Idempotency-Signature idemgate would send."""
    body_sha256 = hashlib.sha256(body).hexdigest()
    content = signed_content(signed_at, method, path_and_query, scope, key, epoch, body_sha256)
    mac = hmac.new(_secret_bytes(secret), content.encode(), hashlib.sha256).hexdigest()
    return f"t={signed_at},v1={mac}"
