/**
 * WebCrypto, so the package runs unchanged on Node.js, Workers, Deno and
 * Bun. Node.js 18 has it as `node:crypto`'s `webcrypto` rather than as a
 * global; the specifier is a variable so that bundlers for other runtimes
 * leave the import alone.
 */
async function subtle(): Promise<Subtle> {
  const global = (globalThis as { crypto?: { subtle?: Subtle } }).crypto;
  if (global?.subtle) return global.subtle;
  const nodeCrypto = "node:crypto";
  const { webcrypto } = (await import(nodeCrypto)) as { webcrypto: { subtle: Subtle } };
  return webcrypto.subtle;
}

/** The WebCrypto calls used here, typed without any runtime's own types. */
interface Subtle {
  digest(algorithm: "SHA-256", data: Uint8Array): Promise<ArrayBuffer>;
  importKey(
    format: "raw",
    key: Uint8Array,
    algorithm: { name: "HMAC"; hash: "SHA-256" },
    extractable: false,
    usages: ("sign" | "verify")[],
  ): Promise<unknown>;
  sign(algorithm: "HMAC", key: unknown, data: Uint8Array): Promise<ArrayBuffer>;
  verify(algorithm: "HMAC", key: unknown, signature: Uint8Array, data: Uint8Array): Promise<boolean>;
}

const encoder = new TextEncoder();

export function bytesOf(body: Uint8Array | ArrayBuffer | string): Uint8Array {
  if (typeof body === "string") return encoder.encode(body);
  if (body instanceof Uint8Array) return body;
  return new Uint8Array(body);
}

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  return hex(await (await subtle()).digest("SHA-256", bytes));
}

/** HMAC-SHA256 check; WebCrypto compares the MACs in constant time. */
export async function hmacSha256Matches(secret: string | Uint8Array, content: string, mac: Uint8Array): Promise<boolean> {
  const crypto = await subtle();
  const key = await crypto.importKey("raw", bytesOf(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "verify",
  ]);
  return crypto.verify("HMAC", key, mac, encoder.encode(content));
}

/** For tests of origin code: `v1` as idemgate computes it. */
export async function hmacSha256Hex(secret: string | Uint8Array, content: string): Promise<string> {
  const crypto = await subtle();
  const key = await crypto.importKey("raw", bytesOf(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  return hex(await crypto.sign("HMAC", key, encoder.encode(content)));
}
