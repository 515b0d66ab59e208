//! One delivery, in one shape from admission to the origin: who it is (its
//! [`Identity`]), what it carries (its [`DeliveryRequest`]) and which
//! payload (its fingerprint). The gateway's call to the key's object, the
//! engine, the stored receipt and the index row all hold these parts
//! nested, never their fields copied one by one.

use serde::{Deserialize, Serialize};

use crate::canonical::Fingerprint;
use crate::headers::HeaderList;
use crate::key::IdempotencyKey;
use crate::origin::{Idempotency, OutboundRequest};

/// Which key a receipt is, as the operator sees it: enough to read, purge
/// or re-drive it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Empty until the key's object begins a life of its receipt.
    pub receipt_id: String,
    pub route: String,
    /// The name of the Durable Object that holds the receipt.
    pub object: String,
    /// The scope id (64 hex digits), as forwarded in `Idempotency-Scope`.
    pub scope: String,
    pub key: IdempotencyKey,
    /// The normalised path, under path scope.
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub tenant_sha256: Option<String>,
}

/// The request a delivery forwards, without idemgate's idempotency headers
/// (its epoch is known only when it is sent). An async delivery's is
/// stored beside its receipt in this form until it completes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRequest {
    pub method: String,
    pub url: String,
    /// The path and query as the origin receives them (signed).
    pub path_and_query: String,
    /// The sender's headers as the origin will see them.
    pub headers: HeaderList,
    /// Hex SHA-256 of the raw body (signed).
    pub raw_body_sha256: String,
    /// Kept out of the JSON: the body travels, and is stored, beside it.
    #[serde(skip)]
    pub body: Vec<u8>,
}

/// One admitted delivery, as the gateway hands it to the key's object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// Which key this is; the engine sets the receipt id of a new life.
    pub identity: Identity,
    pub fingerprint: Fingerprint,
    pub request: DeliveryRequest,
    /// Deliver only if the object holds a live receipt of the key: else
    /// the object answers `unknown_key` and stores nothing (the upgrade's
    /// lookup of a receipt the second version kept; SPEC §3, v3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub if_known: bool,
}

impl DeliveryRequest {
    /// The forward of this request at `epoch` under `identity`'s key and
    /// scope, with idemgate's idempotency headers, signed when there is a
    /// `forward_secret`.
    pub fn to_origin(
        self,
        identity: &Identity,
        epoch: u64,
        forward_secret: Option<&str>,
        unix_seconds: u64,
    ) -> OutboundRequest {
        let DeliveryRequest {
            method,
            url,
            path_and_query,
            headers,
            raw_body_sha256,
            body,
        } = self;
        OutboundRequest {
            method,
            url,
            headers,
            body,
        }
        .with_idempotency(&Idempotency {
            key: &identity.key,
            scope: &identity.scope,
            epoch,
            path_and_query: &path_and_query,
            body_sha256: &raw_body_sha256,
            forward_secret,
            unix_seconds,
        })
    }
}
