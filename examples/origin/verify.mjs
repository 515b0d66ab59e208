import { createHash, createHmac, timingSafeEqual } from "node:crypto";

// Verifies idemgate's forwarded headers; `headers` has lowercase names,
// `method` and `pathAndQuery` are the request line as received (e.g.
// "/payments?currency=eur"), `rawBody` the exact bytes received.
// Returns { scope, key, epoch, bodySha256 } or throws.
export function verifyIdemgate(headers, method, pathAndQuery, rawBody, secret, nowSeconds, toleranceSeconds = 300) {
  const key = /^"([!#-[\]-~]{1,255})"$/.exec(headers["idempotency-key"] ?? "")?.[1];
  const scope = /^[0-9a-f]{64}$/.exec(headers["idempotency-scope"] ?? "")?.[0];
  const epoch = /^[1-9][0-9]*$/.test(headers["idempotency-epoch"] ?? "")
    ? Number(headers["idempotency-epoch"]) : NaN;
  const signature = /^t=(0|[1-9][0-9]*),v1=([0-9a-f]{64})$/.exec(headers["idempotency-signature"] ?? "");
  if (!key || !scope || !Number.isSafeInteger(epoch) || !signature) throw new Error("malformed idempotency headers");
  const t = Number(signature[1]);
  if (Math.abs(nowSeconds - t) > toleranceSeconds) throw new Error("stale idempotency signature");
  const bodySha256 = createHash("sha256").update(rawBody).digest("hex");
  const content = [t, method, pathAndQuery, scope, key, epoch, bodySha256].join("\n");
  const expected = createHmac("sha256", secret).update(content).digest();
  if (!timingSafeEqual(expected, Buffer.from(signature[2], "hex"))) throw new Error("bad idempotency signature");
  return { scope, key, epoch, bodySha256 };
}
