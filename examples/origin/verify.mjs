import { createHash, createHmac, timingSafeEqual } from "node:crypto";

// Verifies idemgate's forwarded headers; `headers` has lowercase names,
// `rawBody` is the exact bytes received. Returns { key, epoch } or throws.
export function verifyIdemgate(headers, rawBody, secret, nowSeconds, toleranceSeconds = 300) {
  const key = /^"([!#-[\]-~]{1,255})"$/.exec(headers["idempotency-key"] ?? "")?.[1];
  const epoch = /^[1-9][0-9]*$/.test(headers["idempotency-epoch"] ?? "")
    ? Number(headers["idempotency-epoch"]) : NaN;
  const signature = /^t=([0-9]+),v1=([0-9a-f]{64})$/.exec(headers["idempotency-signature"] ?? "");
  if (!key || !Number.isSafeInteger(epoch) || !signature) throw new Error("malformed idempotency headers");
  const t = Number(signature[1]);
  if (Math.abs(nowSeconds - t) > toleranceSeconds) throw new Error("stale idempotency signature");
  const bodyHash = createHash("sha256").update(rawBody).digest("hex");
  const expected = createHmac("sha256", secret).update(`${t}.${key}.${epoch}.${bodyHash}`).digest();
  if (!timingSafeEqual(expected, Buffer.from(signature[2], "hex"))) throw new Error("bad idempotency signature");
  return { key, epoch };
}
