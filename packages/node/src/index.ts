export { IdemgateVerifyError, type VerifyErrorCode } from "./errors.js";
export type { HeadersInput } from "./headers.js";
export {
  EPOCH_HEADER,
  KEY_HEADER,
  SCOPE_HEADER,
  SIGNATURE_HEADER,
  SIGNATURE_V2_HEADER,
  SOURCE_HEADER,
  STALE_HEADER,
} from "./parse.js";
export {
  DEFAULT_TOLERANCE_SECONDS,
  sign,
  signedContent,
  signedContentV2,
  verify,
  type Forwarded,
  type SignInput,
  type VerifyInput,
} from "./verify.js";
export {
  isAsyncRetryableStatus,
  isRetryableStatus,
  type Fence,
  type FenceKey,
  type FenceStore,
  type StoredResult,
} from "./fence.js";
export { DEFAULT_LEASE_SECONDS, SqliteFenceStore, type SqliteDatabase, type SqliteFenceStoreOptions } from "./sqlite-store.js";
export { PROBLEM_CONTENT_TYPE, type Problem } from "./problem.js";
export { runFenced, type FencedAnswer, type RunFencedOptions } from "./run-fenced.js";
export { withIdemgate, type FetchOptions, type IdemgateOptions } from "./fetch.js";
export { idemgateHono, type HonoContextLike } from "./hono.js";
export { idemgateExpress, type ExpressOptions, type ExpressRequestLike, type ExpressResponseLike } from "./express.js";
export {
  AUDIT_CHECKPOINT_TYPE,
  AUDIT_GENESIS,
  auditEntryHash,
  canonicalJson,
  isAuditHash,
  parseAuditCheckpoint,
  readAuditCheckpoint,
  readAuditExport,
  verifyAuditChain,
  type AuditCheckpoint,
  type AuditFault,
  type AuditVerdict,
  type VerifyAuditChainOptions,
} from "./audit.js";
