//! Every error the edge itself produces (SPEC §6), as data.
//!
//! Each variant knows its status, its `urn:idemgate:problem:<name>` type and
//! its detail; [`Problem::to_json`] renders RFC 9457 problem+json in this one
//! place, so no handler formats an error body by hand.

use serde::Serialize;

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A configuration variable is missing or has a value that means nothing.
    /// Names the variable (and route), never a secret's value.
    Misconfigured {
        variable: String,
        reason: String,
    },
    /// `ROUTES` is set and no route's path covers the request's.
    NoRoute,
    /// A path that cannot be normalised safely (`%2F`, `%5C`, a bad escape).
    InvalidPath {
        reason: String,
    },
    /// A method that is neither deduplicated nor proxied (TRACE, CONNECT, ...).
    MethodNotAllowed {
        method: String,
    },
    PayloadTooLarge {
        limit: u64,
    },
    BadSignature {
        reason: String,
    },
    /// A public-key signature names a certificate on an allowed host that
    /// could not be fetched: nobody can tell yet whether it is genuine.
    SigningKeyUnavailable,
    MissingKey {
        tried: String,
    },
    InvalidKey {
        source: String,
        reason: String,
    },
    InvalidJson {
        message: String,
    },
    /// A signed batch that cannot be taken as it is (an event repeated).
    InvalidBatch {
        reason: String,
    },
    /// A `json:` key source was reached but the body is not declared as JSON.
    UnsupportedMediaType {
        source: String,
        content_type: String,
    },
    MissingTenant {
        header: String,
    },
    FingerprintMismatch,
    InFlight {
        retry_after_secs: u64,
    },
    /// A sync first delivery over its route's flow-control limit (or the
    /// limit could not be checked): nothing was forwarded or stored.
    OriginBusy {
        retry_after_secs: u64,
    },
    /// A redrive of a receipt that is not a dead or failed async one.
    /// An operator act named a life of the key (`receipt_id=`) that is
    /// no longer its receipt: nothing was done (SPEC §7, v4).
    ReceiptChanged,
    NotRedrivable {
        state: String,
    },
    OriginUnreachable {
        message: String,
    },
    OriginTimeout {
        after_ms: u64,
    },
    /// Durable Object storage refused a write, or the object could not be
    /// reached before it was asked anything: nothing was forwarded.
    StorageUnavailable {
        message: String,
    },
    /// The call to the key's object failed after it may have forwarded.
    OutcomeUnknown {
        message: String,
    },
    /// An async delivery is stored, but its acknowledgement could not be
    /// completed (its index row or its alarm could not be written): it is
    /// not acknowledged, so its sender retries (SPEC §2b, v3). Its first
    /// attempt may already be on its way: `outcome-unknown`, never
    /// `storage-unavailable`'s "nothing was forwarded" (SPEC §6, v4).
    NotAcknowledged {
        message: String,
    },
    /// The receipt index (a route's index shards, or an earlier version's
    /// D1 index while it is bound) could not be read or written for the
    /// operator API or the sweep; no delivery was at stake.
    IndexUnavailable {
        message: String,
    },
    /// A purge of a pending async delivery without `force=true`.
    PendingDelivery {
        state: String,
    },
    NotFound,
    Unauthorized,
}

/// The variable (or route field) a misconfiguration names, if it is one:
/// what health may say of it without its reason.
pub fn misconfigured_variable(problem: &Problem) -> Option<&str> {
    match problem {
        Problem::Misconfigured { variable, .. } => Some(variable),
        _ => None,
    }
}

#[derive(Serialize)]
struct ProblemDocument<'a> {
    #[serde(rename = "type")]
    type_uri: String,
    title: &'a str,
    status: u16,
    detail: String,
}

impl Problem {
    pub fn status(&self) -> u16 {
        match self {
            Problem::Misconfigured { .. } => 500,
            Problem::NoRoute => 404,
            Problem::InvalidPath { .. } => 400,
            Problem::NotRedrivable { .. } => 409,
            Problem::ReceiptChanged => 409,
            Problem::OutcomeUnknown { .. } => 503,
            Problem::NotAcknowledged { .. } | Problem::IndexUnavailable { .. } => 503,
            Problem::PendingDelivery { .. } => 409,
            Problem::MethodNotAllowed { .. } => 405,
            Problem::PayloadTooLarge { .. } => 413,
            Problem::BadSignature { .. } => 401,
            Problem::SigningKeyUnavailable => 503,
            Problem::MissingKey { .. }
            | Problem::InvalidKey { .. }
            | Problem::InvalidJson { .. }
            | Problem::InvalidBatch { .. }
            | Problem::MissingTenant { .. } => 400,
            Problem::UnsupportedMediaType { .. } => 415,
            Problem::FingerprintMismatch => 422,
            Problem::InFlight { .. } => 409,
            Problem::OriginBusy { .. } => 429,
            Problem::OriginUnreachable { .. } => 502,
            Problem::OriginTimeout { .. } => 504,
            Problem::StorageUnavailable { .. } => 503,
            Problem::NotFound => 404,
            Problem::Unauthorized => 401,
        }
    }

    /// The `<name>` in `urn:idemgate:problem:<name>`.
    pub fn name(&self) -> &'static str {
        match self {
            Problem::Misconfigured { .. } => "misconfigured",
            Problem::NoRoute => "no-route",
            Problem::InvalidPath { .. } => "invalid-path",
            Problem::NotRedrivable { .. } => "not-redrivable",
            Problem::ReceiptChanged => "receipt-changed",
            Problem::OutcomeUnknown { .. } | Problem::NotAcknowledged { .. } => "outcome-unknown",
            Problem::IndexUnavailable { .. } => "storage-unavailable",
            Problem::PendingDelivery { .. } => "pending-delivery",
            Problem::MethodNotAllowed { .. } => "method-not-allowed",
            Problem::PayloadTooLarge { .. } => "payload-too-large",
            Problem::BadSignature { .. } => "bad-signature",
            Problem::SigningKeyUnavailable => "signing-key-unavailable",
            Problem::MissingKey { .. } => "missing-key",
            Problem::InvalidKey { .. } => "invalid-key",
            Problem::InvalidJson { .. } => "invalid-json",
            Problem::InvalidBatch { .. } => "invalid-batch",
            Problem::UnsupportedMediaType { .. } => "unsupported-media-type",
            Problem::MissingTenant { .. } => "missing-tenant",
            Problem::FingerprintMismatch => "fingerprint-mismatch",
            Problem::InFlight { .. } => "in-flight",
            Problem::OriginBusy { .. } => "origin-busy",
            Problem::OriginUnreachable { .. } => "origin-unreachable",
            Problem::OriginTimeout { .. } => "origin-timeout",
            Problem::StorageUnavailable { .. } => "storage-unavailable",
            Problem::NotFound => "not-found",
            Problem::Unauthorized => "unauthorized",
        }
    }

    pub fn title(&self) -> &'static str {
        match self {
            Problem::Misconfigured { .. } => "idemgate is misconfigured",
            Problem::NoRoute => "No route for this path",
            Problem::InvalidPath { .. } => "Invalid request path",
            Problem::NotRedrivable { .. } => "Receipt cannot be re-driven",
            Problem::ReceiptChanged => "Receipt changed",
            Problem::OutcomeUnknown { .. } => "Outcome unknown",
            Problem::NotAcknowledged { .. } => "Delivery not acknowledged",
            Problem::IndexUnavailable { .. } => "Receipt index unavailable",
            Problem::PendingDelivery { .. } => "Delivery pending",
            Problem::MethodNotAllowed { .. } => "Method not allowed",
            Problem::PayloadTooLarge { .. } => "Payload too large",
            Problem::BadSignature { .. } => "Sender signature rejected",
            Problem::SigningKeyUnavailable => "Sender's signing key unavailable",
            Problem::MissingKey { .. } => "No idempotency key",
            Problem::InvalidKey { .. } => "Invalid idempotency key",
            Problem::InvalidJson { .. } => "Body is not valid JSON",
            Problem::InvalidBatch { .. } => "Batch cannot be taken",
            Problem::UnsupportedMediaType { .. } => "Body is not JSON",
            Problem::MissingTenant { .. } => "No tenant",
            Problem::FingerprintMismatch => "Idempotency key reused with a different payload",
            Problem::InFlight { .. } => "A delivery with this key is in flight",
            Problem::OriginBusy { .. } => "The origin is at its flow-control limit",
            Problem::OriginUnreachable { .. } => "Origin unreachable",
            Problem::OriginTimeout { .. } => "Origin timed out",
            Problem::StorageUnavailable { .. } => "Receipt storage unavailable",
            Problem::NotFound => "Not found",
            Problem::Unauthorized => "Unauthorized",
        }
    }

    pub fn detail(&self) -> String {
        match self {
            Problem::Misconfigured { variable, reason } => format!("{variable}: {reason}"),
            Problem::NoRoute => "no route of ROUTES covers this path; nothing was forwarded".to_string(),
            Problem::InvalidPath { reason } => reason.clone(),
            Problem::ReceiptChanged => "the key's receipt is no longer the one named by receipt_id= \
                 (it expired or was purged, and a new delivery began a new life): nothing was done; \
                 read the receipt again"
                .to_string(),
            Problem::NotRedrivable { state } => format!(
                "only a dead, failed or queued receipt of an async route can be re-driven; this one is {state}"
            ),
            Problem::OutcomeUnknown { message } => format!(
                "the call to this key's Durable Object failed after it may have forwarded the delivery: \
                 retry with the same idempotency key, never a new one ({message})"
            ),
            Problem::NotAcknowledged { message } => format!(
                "the delivery is stored and will be delivered (it may already have been), but its \
                 acknowledgement could not be completed: retry with the same idempotency key, \
                 never a new one ({message})"
            ),
            Problem::IndexUnavailable { message } => {
                format!("the receipt index could not be read or written: {message}")
            }
            Problem::PendingDelivery { state } => format!(
                "this async delivery was acknowledged to its sender and is {state}: purging it \
                 discards it; re-drive it, or purge it with force=true"
            ),
            Problem::MethodNotAllowed { method } => format!(
                "{method} is neither deduplicated (POST, PUT, PATCH, DELETE) nor proxied (GET, HEAD, OPTIONS)"
            ),
            Problem::PayloadTooLarge { limit } => {
                format!("the body is larger than MAX_BODY_BYTES ({limit} bytes)")
            }
            Problem::BadSignature { reason } => reason.clone(),
            Problem::SigningKeyUnavailable => "its signing key (a certificate, or Plaid's key) could not be fetched; nothing was forwarded or stored, and retrying is safe"
                .to_string(),
            Problem::MissingKey { tried } => {
                format!("no idempotency key found; KEY_SOURCES tried: {tried}")
            }
            Problem::InvalidKey { source, reason } => format!("{source}: {reason}"),
            Problem::InvalidJson { message } => message.clone(),
            Problem::InvalidBatch { reason } => format!("{reason}; nothing of it is stored"),
            Problem::UnsupportedMediaType {
                source,
                content_type,
            } => format!(
                "{source} needs a JSON body (Content-Type application/json or */*+json), got {content_type:?}"
            ),
            Problem::MissingTenant { header } => {
                format!("TENANT_HEADER is {header}, and the request has no such header")
            }
            Problem::FingerprintMismatch => "this idempotency key was first used with a different body; it is not forwarded".to_string(),
            Problem::InFlight { retry_after_secs } => format!(
                "the first delivery of this key has not finished; retry in {retry_after_secs} s"
            ),
            Problem::OriginBusy { retry_after_secs } => format!(
                "the route's MAX_IN_FLIGHT or RATE_PER_SECOND allows no forward now; nothing was forwarded or stored; retry in {retry_after_secs} s"
            ),
            Problem::OriginUnreachable { message } => {
                format!("the origin could not be reached: {message}")
            }
            Problem::OriginTimeout { after_ms } => {
                format!("the origin did not answer within ORIGIN_TIMEOUT_MS ({after_ms} ms)")
            }
            Problem::StorageUnavailable { message } => {
                format!("the key's receipt could not be read or written, so nothing was forwarded and retrying is safe: {message}")
            }
            Problem::NotFound => "no such resource".to_string(),
            Problem::Unauthorized => "a valid Authorization: Bearer token is required".to_string(),
        }
    }

    /// Seconds for a `Retry-After` header, where the problem is worth retrying.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Problem::InFlight { retry_after_secs } | Problem::OriginBusy { retry_after_secs } => {
                Some(*retry_after_secs)
            }
            // Retrying is safe (nothing was forwarded) or required (with the same key).
            Problem::StorageUnavailable { .. }
            | Problem::SigningKeyUnavailable
            | Problem::OutcomeUnknown { .. }
            | Problem::NotAcknowledged { .. }
            | Problem::IndexUnavailable { .. } => Some(1),
            _ => None,
        }
    }

    pub fn to_json(&self) -> String {
        let document = ProblemDocument {
            type_uri: format!("urn:idemgate:problem:{}", self.name()),
            title: self.title(),
            status: self.status(),
            detail: self.detail(),
        };
        serde_json::to_string(&document).expect("a problem document always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_rfc9457_members() {
        let json: serde_json::Value =
            serde_json::from_str(&Problem::FingerprintMismatch.to_json()).unwrap();
        assert_eq!(json["type"], "urn:idemgate:problem:fingerprint-mismatch");
        assert_eq!(json["status"], 422);
        assert!(json["title"]
            .as_str()
            .unwrap()
            .contains("different payload"));
        assert!(json["detail"].as_str().is_some());
    }

    #[test]
    fn misconfigured_names_the_variable() {
        let problem = Problem::Misconfigured {
            variable: "ORIGIN_URL".into(),
            reason: "is not set".into(),
        };
        assert_eq!(problem.status(), 500);
        assert!(problem.detail().starts_with("ORIGIN_URL"));
    }

    #[test]
    fn only_in_flight_carries_retry_after() {
        assert_eq!(
            Problem::InFlight {
                retry_after_secs: 3
            }
            .retry_after_secs(),
            Some(3)
        );
        assert_eq!(Problem::NotFound.retry_after_secs(), None);
    }

    #[test]
    fn an_unknown_outcome_tells_the_caller_to_keep_its_key() {
        let problem = Problem::OutcomeUnknown {
            message: "connection reset".into(),
        };
        assert_eq!(problem.status(), 503);
        assert_eq!(problem.name(), "outcome-unknown");
        assert!(problem.detail().contains("same idempotency key"));
        let nothing_sent = Problem::StorageUnavailable {
            message: "x".into(),
        };
        assert_eq!(nothing_sent.name(), "storage-unavailable");
        assert!(nothing_sent.detail().contains("nothing was forwarded"));
    }
}
