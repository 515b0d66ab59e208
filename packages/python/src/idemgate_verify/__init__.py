"""Verify the signed Idempotency-* headers idemgate forwards, with ASGI and
WSGI middleware and a fencing store on SQLite."""

from .asgi import IdemgateMiddleware
from .audit import (
    AUDIT_CHECKPOINT_TYPE,
    AUDIT_GENESIS,
    AuditCheckpoint,
    AuditVerdict,
    ChainBroken,
    ChainVerified,
    audit_entry_hash,
    canonical_json,
    is_audit_hash,
    parse_audit_checkpoint,
    read_audit_checkpoint,
    read_audit_export,
    verify_audit_chain,
)
from .errors import VerifyError, VerifyErrorCode
from .fence import (
    BodyMismatch,
    Completed,
    Fence,
    FenceKey,
    FenceStore,
    InProgress,
    Proceed,
    StaleEpoch,
    StoredResult,
    is_async_retryable_status,
    is_retryable_status,
)
from .parse import (
    EPOCH_HEADER,
    KEY_HEADER,
    SCOPE_HEADER,
    SIGNATURE_HEADER,
    SIGNATURE_V2_HEADER,
    SOURCE_HEADER,
    STALE_HEADER,
)
from .problem import PROBLEM_CONTENT_TYPE
from .sqlite_store import DEFAULT_LEASE_SECONDS, SqliteFenceStore
from .verify import DEFAULT_TOLERANCE_SECONDS, Forwarded, sign, signed_content, signed_content_v2, verify
from .wsgi import IdemgateWSGIMiddleware

__all__ = [
    "AUDIT_CHECKPOINT_TYPE",
    "AUDIT_GENESIS",
    "AuditCheckpoint",
    "AuditVerdict",
    "ChainBroken",
    "ChainVerified",
    "audit_entry_hash",
    "canonical_json",
    "is_audit_hash",
    "parse_audit_checkpoint",
    "read_audit_checkpoint",
    "read_audit_export",
    "verify_audit_chain",
    "BodyMismatch",
    "Completed",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_TOLERANCE_SECONDS",
    "EPOCH_HEADER",
    "Fence",
    "FenceKey",
    "FenceStore",
    "Forwarded",
    "IdemgateMiddleware",
    "IdemgateWSGIMiddleware",
    "InProgress",
    "KEY_HEADER",
    "PROBLEM_CONTENT_TYPE",
    "Proceed",
    "SCOPE_HEADER",
    "SIGNATURE_HEADER",
    "SIGNATURE_V2_HEADER",
    "SOURCE_HEADER",
    "STALE_HEADER",
    "SqliteFenceStore",
    "StaleEpoch",
    "StoredResult",
    "VerifyError",
    "VerifyErrorCode",
    "is_async_retryable_status",
    "is_retryable_status",
    "sign",
    "signed_content",
    "signed_content_v2",
    "verify",
]
