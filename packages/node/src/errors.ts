/** Why a forward was refused: the categories of tests/vectors/forwards.json. */
export type VerifyErrorCode = "missing-header" | "malformed-header" | "stale" | "bad-signature";

/** A request that idemgate did not sign, or not as received. */
export class IdemgateVerifyError extends Error {
  readonly code: VerifyErrorCode;
  /** The header at fault, for missing-header and malformed-header. */
  readonly header: string | undefined;

  constructor(code: VerifyErrorCode, message: string, header?: string) {
    super(message);
    this.name = "IdemgateVerifyError";
    this.code = code;
    this.header = header;
  }
}
