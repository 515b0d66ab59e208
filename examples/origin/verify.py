import hashlib
import hmac
import re


def verify_idemgate(headers, method, path_and_query, raw_body, secret, now_seconds, tolerance_seconds=300):
    """Verifies idemgate's forwarded headers; `headers` has lowercase names,
    `method` and `path_and_query` are the request line as received (e.g.
    "/payments?currency=eur"), `raw_body` the exact bytes received.
    Returns (scope, key, epoch, body_sha256) or raises."""
    key = re.fullmatch(r'"([!#-\[\]-~]{1,255})"', headers.get("idempotency-key", ""))
    scope = re.fullmatch(r"[0-9a-f]{64}", headers.get("idempotency-scope", ""))
    epoch = re.fullmatch(r"[1-9][0-9]*", headers.get("idempotency-epoch", ""))
    signature = re.fullmatch(r"t=(0|[1-9][0-9]*),v1=([0-9a-f]{64})", headers.get("idempotency-signature", ""))
    if not (key and scope and epoch and signature):
        raise ValueError("malformed idempotency headers")
    t = int(signature.group(1))
    if abs(now_seconds - t) > tolerance_seconds:
        raise ValueError("stale idempotency signature")
    body_sha256 = hashlib.sha256(raw_body).hexdigest()
    content = "\n".join([str(t), method, path_and_query, scope.group(0), key.group(1), epoch.group(0), body_sha256])
    expected = hmac.new(secret.encode(), content.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature.group(2)):
        raise ValueError("bad idempotency signature")
    return scope.group(0), key.group(1), int(epoch.group(0)), body_sha256
