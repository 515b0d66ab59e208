"""Verifying a forward's signature against the request as received."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

from .errors import VerifyError
from .headers import HeadersInput
from .parse import (
    SIGNATURE_HEADER,
    SIGNATURE_V2_HEADER,
    SOURCE_HEADER,
    STALE_HEADER,
    STALE_VALUE,
    parse_epoch,
    parse_key,
    parse_scope,
    parse_signature,
    parse_signature_v2,
    parse_source,
    parse_stale,
)

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
    #: The signatures' t, Unix seconds.
    signed_at: int
    #: Idempotency-Source: "reconciliation" on a forward that idemgate's
    #: reconciliation made, None on a live delivery.
    source: str | None = None
    #: Idempotency-Stale: True on a forward older than one already
    #: delivered for its entity.
    stale: bool = False


def signed_content(
    signed_at: int, method: str, path_and_query: str, scope: str, key: str, epoch: int, body_sha256: str
) -> str:
    """The seven lines v1 signs, joined by "\\n"."""
    return "\n".join([str(signed_at), method, path_and_query, scope, key, str(epoch), body_sha256])


def signed_content_v2(
    signed_at: int,
    method: str,
    path_and_query: str,
    scope: str,
    key: str,
    epoch: int,
    body_sha256: str,
    source: str | None,
    stale: bool,
) -> str:
    """The nine lines v2 signs: v1's seven, then the Idempotency-Source
    value and the Idempotency-Stale value, each empty when the header is
    absent."""
    v1 = signed_content(signed_at, method, path_and_query, scope, key, epoch, body_sha256)
    return "\n".join([v1, source or "", STALE_VALUE if stale else ""])


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

    Both signatures must be there and well-formed, with the same t (two t's
    were not signed as one forward: bad-signature). Only v2's HMAC is
    checked: it covers all that v1's does, and Idempotency-Source and
    Idempotency-Stale besides.
    """
    key_bytes = _secret_bytes(secret)
    key = parse_key(headers)
    scope = parse_scope(headers)
    epoch = parse_epoch(headers)
    # v1 must be there and well-formed; its HMAC is not computed.
    signed_at = parse_signature(headers).signed_at
    signature = parse_signature_v2(headers)
    source = parse_source(headers)
    stale = parse_stale(headers)
    if signed_at != signature.signed_at:
        raise VerifyError(
            "bad-signature",
            f"{SIGNATURE_HEADER} and {SIGNATURE_V2_HEADER} have different t's: idemgate signs both at once",
        )
    now = int(time.time()) if now is None else now
    skew = abs(signed_at - now)
    if skew > tolerance_seconds:
        raise VerifyError("stale", f"stale signature: signed {skew} s from now, tolerance {tolerance_seconds} s")
    body_sha256 = hashlib.sha256(body).hexdigest()
    content = signed_content_v2(signed_at, method, path_and_query, scope, key, epoch, body_sha256, source, stale)
    expected = hmac.new(key_bytes, content.encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature.mac):
        raise VerifyError(
            "bad-signature", "the signature does not match the request, scope, key, epoch, source, staleness and body"
        )
    return Forwarded(
        scope=scope,
        key=key,
        epoch=epoch,
        body_sha256=body_sha256,
        signed_at=signed_at,
        source=source,
        stale=stale,
    )


def sign(
    method: str,
    path_and_query: str,
    body: bytes,
    secret: str | bytes,
    scope: str,
    key: str,
    epoch: int,
    signed_at: int,
    *,
    source: str | None = None,
    stale: bool = False,
) -> list[tuple[str, str]]:
    """For tests of origin code: the headers idemgate would add besides
    Key, Scope and Epoch, as (name, value) pairs in its order:
    Idempotency-Source and Idempotency-Stale when given, then
    Idempotency-Signature and Idempotency-Signature-V2, both at `signed_at`."""
    body_sha256 = hashlib.sha256(body).hexdigest()
    fields = (signed_at, method, path_and_query, scope, key, epoch, body_sha256)
    secret_bytes = _secret_bytes(secret)

    def mac(content: str) -> str:
        return hmac.new(secret_bytes, content.encode(), hashlib.sha256).hexdigest()

    headers: list[tuple[str, str]] = []
    if source is not None:
        headers.append((SOURCE_HEADER, source))
    if stale:
        headers.append((STALE_HEADER, STALE_VALUE))
    headers.append((SIGNATURE_HEADER, f"t={signed_at},v1={mac(signed_content(*fields))}"))
    headers.append((SIGNATURE_V2_HEADER, f"t={signed_at},v2={mac(signed_content_v2(*fields, source, stale))}"))
    return headers
