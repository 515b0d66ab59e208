"""The four headers, read as idemgate writes them and no other way."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import VerifyError
from .headers import HeadersInput, header_values

KEY_HEADER = "Idempotency-Key"
SCOPE_HEADER = "Idempotency-Scope"
EPOCH_HEADER = "Idempotency-Epoch"
SIGNATURE_HEADER = "Idempotency-Signature"

U64_MAX = 2**64 - 1

#: An RFC 8941 string of idemgate's key characters: visible ASCII but `"` and `\`.
_KEY = re.compile(r'"([!#-\[\]-~]{1,255})"')
_SCOPE = re.compile(r"[0-9a-f]{64}")
#: Decimal as idemgate writes numbers: no sign, no leading zero.
_POSITIVE = re.compile(r"[1-9][0-9]*")
_SIGNATURE = re.compile(r"t=(0|[1-9][0-9]*),v1=([0-9a-f]{64})")


def _malformed(header: str, reason: str) -> VerifyError:
    return VerifyError("malformed-header", f"malformed header {header}: {reason}", header)


def _single(headers: HeadersInput, header: str) -> str:
    """The header's one value without HTTP's optional whitespace around it.
    A header sent twice is refused: a verifier that read one occurrence and
    application code that read another would disagree on the key."""
    values = header_values(headers, header)
    if not values:
        raise VerifyError("missing-header", f"missing header {header}", header)
    if len(values) > 1:
        raise _malformed(header, "sent more than once")
    return values[0].strip(" \t")


def parse_key(headers: HeadersInput) -> str:
    match = _KEY.fullmatch(_single(headers, KEY_HEADER))
    if not match:
        raise _malformed(KEY_HEADER, "not a quoted idempotency key")
    return match.group(1)


def parse_scope(headers: HeadersInput) -> str:
    scope = _single(headers, SCOPE_HEADER)
    if not _SCOPE.fullmatch(scope):
        raise _malformed(SCOPE_HEADER, "not 64 lowercase hex digits")
    return scope


def parse_epoch(headers: HeadersInput) -> int:
    text = _single(headers, EPOCH_HEADER)
    if not _POSITIVE.fullmatch(text) or int(text) > U64_MAX:
        raise _malformed(EPOCH_HEADER, "not a positive 64-bit integer")
    return int(text)


@dataclass(frozen=True)
class ParsedSignature:
    signed_at: int
    mac: bytes


def parse_signature(headers: HeadersInput) -> ParsedSignature:
    match = _SIGNATURE.fullmatch(_single(headers, SIGNATURE_HEADER))
    if not match:
        raise _malformed(SIGNATURE_HEADER, "expected t=<unix seconds>,v1=<64 lowercase hex digits>")
    signed_at = int(match.group(1))
    if signed_at > U64_MAX:
        raise _malformed(SIGNATURE_HEADER, "t is not a Unix time")
    return ParsedSignature(signed_at, bytes.fromhex(match.group(2)))
