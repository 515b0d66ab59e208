import hashlib
import hmac
import re


def verify_idemgate(headers, raw_body, secret, now_seconds, tolerance_seconds=300):
    """Verifies idemgate's forwarded headers; `headers` has lowercase names,
    `raw_body` is the exact bytes received. Returns (key, epoch) or raises."""
    key = re.fullmatch(r'"([!#-\[\]-~]{1,255})"', headers.get("idempotency-key", ""))
    epoch = re.fullmatch(r"[1-9][0-9]*", headers.get("idempotency-epoch", ""))
    signature = re.fullmatch(r"t=([0-9]+),v1=([0-9a-f]{64})", headers.get("idempotency-signature", ""))
    if not (key and epoch and signature):
        raise ValueError("malformed idempotency headers")
    t = int(signature.group(1))
    if abs(now_seconds - t) > tolerance_seconds:
        raise ValueError("stale idempotency signature")
    body_hash = hashlib.sha256(raw_body).hexdigest()
    message = f"{t}.{key.group(1)}.{epoch.group(0)}.{body_hash}".encode()
    expected = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature.group(2)):
        raise ValueError("bad idempotency signature")
    return key.group(1), int(epoch.group(0))
