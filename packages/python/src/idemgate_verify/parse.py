"""The forwarded headers, read as idemgate writes them and no other way."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import VerifyError
from .headers import HeadersInput, header_values

KEY_HEADER = "Idempotency-Key"
SCOPE_HEADER = "Idempotency-Scope"
EPOCH_HEADER = "Idempotency-Epoch"
SIGNATURE_HEADER = "Idempotency-Signature"
SIGNATURE_V2_HEADER = "Idempotency-Signature-V2"
SOURCE_HEADER = "Idempotency-Source"
STALE_HEADER = "Idempotency-Stale"
#: The only value of Idempotency-Stale.
STALE_VALUE = "true"

U64_MAX = 2**64 - 1

#: An RFC 8941 string of idemgate's key characters: visible ASCII but `"` and `\`.
_KEY = re.compile(r'"([!#-\[\]-~]{1,255})"')
_SCOPE = re.compile(r"[0-9a-f]{64}")
#: Decimal as idemgate writes numbers: no sign, no leading zero.
_POSITIVE = re.compile(r"[1-9][0-9]*")
_SIGNATURE = re.compile(r"t=(0|[1-9][0-9]*),v1=([0-9a-f]{64})")
_SIGNATURE_V2 = re.compile(r"t=(0|[1-9][0-9]*),v2=([0-9a-f]{64})")
#: An RFC 9110 token, never empty (an empty value would sign as an absent
#: header). Any token verifies, so that a source idemgate adds later needs
#: no new verifier; what it means is the origin's to decide.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _malformed(header: str, reason: str) -> VerifyError:
    return VerifyError("malformed-header", f"malformed header {header}: {reason}", header)


def _single(headers: HeadersInput, header: str) -> str:
    """The header's one value without HTTP's optional whitespace around it.
    A header sent twice is refused: a verifier that read one occurrence and
    application code that read another would disagree on the key."""
    value = _optional(headers, header)
    if value is None:
        raise VerifyError("missing-header", f"missing header {header}", header)
    return value


def _optional(headers: HeadersInput, header: str) -> str | None:
    """As `_single`, for a header that may be absent."""
    values = header_values(headers, header)
    if not values:
        return None
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


def _signature(headers: HeadersInput, header: str, form: re.Pattern[str], label: str) -> ParsedSignature:
    match = form.fullmatch(_single(headers, header))
    if not match:
        raise _malformed(header, f"expected t=<unix seconds>,{label}=<64 lowercase hex digits>")
    signed_at = int(match.group(1))
    if signed_at > U64_MAX:
        raise _malformed(header, "t is not a Unix time")
    return ParsedSignature(signed_at, bytes.fromhex(match.group(2)))


def parse_signature(headers: HeadersInput) -> ParsedSignature:
    """Idempotency-Signature: `t=<unix seconds>,v1=<64 lowercase hex digits>`."""
    return _signature(headers, SIGNATURE_HEADER, _SIGNATURE, "v1")


def parse_signature_v2(headers: HeadersInput) -> ParsedSignature:
    """Idempotency-Signature-V2: `t=<unix seconds>,v2=<64 lowercase hex digits>`."""
    return _signature(headers, SIGNATURE_V2_HEADER, _SIGNATURE_V2, "v2")


def parse_source(headers: HeadersInput) -> str | None:
    """Idempotency-Source, or None when absent (a live delivery)."""
    source = _optional(headers, SOURCE_HEADER)
    if source is not None and not _TOKEN.fullmatch(source):
        raise _malformed(SOURCE_HEADER, "not a token")
    return source


def parse_stale(headers: HeadersInput) -> bool:
    """Whether `Idempotency-Stale: true` came; any other value is refused."""
    stale = _optional(headers, STALE_HEADER)
    if stale is None:
        return False
    if stale != STALE_VALUE:
        raise _malformed(STALE_HEADER, "not `true`")
    return True
