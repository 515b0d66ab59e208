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
    /// Forwarded as `Idempotency-Source` (`reconciliation` on a forward
    /// that idemgate's reconciliation made); `None` on a live delivery.
    /// Absent from the JSON when `None`, so that an async request stored
    /// before the field existed reads as a live one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Forwarded as `Idempotency-Stale: true`: the forward is older than
    /// one already delivered for its entity. Absent from the JSON when
    /// false, as in a request stored before the field existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// The batch this delivery's event came in (SPEC §4, v4): the first 32
    /// hex digits of the batch body's SHA-256, for the log and the
    /// receipt; `None` for a request of one event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// The binding the forward goes through (SPEC §5, v5: a service or
    /// mTLS certificate binding the route's `ORIGIN` names); `None`: the
    /// network, as before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// On an ordered route (SPEC §12, v4), its entity's order object and
    /// its event's time; `None` when unordered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<crate::order::OrderTicket>,
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
    /// Deliver only if the object holds no receipt of a delivery that
    /// arrived: else it answers `already_received` and does nothing
    /// (reconciliation's delivery of an event; SPEC §11, v4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub if_absent: bool,
}

impl DeliveryRequest {
    /// The forward of this request at `epoch` under `identity`'s key and
    /// scope, with idemgate's idempotency headers (its source and staleness
    /// among them), signed when there is a `forward_secret`.
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
            source,
            stale,
            batch: _,
            order: _,
            via,
        } = self;
        OutboundRequest {
            method,
            url,
            headers,
            body,
            via,
        }
        .with_idempotency(&Idempotency {
            key: &identity.key,
            scope: &identity.scope,
            epoch,
            path_and_query: &path_and_query,
            body_sha256: &raw_body_sha256,
            forward_secret,
            unix_seconds,
            source: source.as_deref(),
            stale,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> DeliveryRequest {
        DeliveryRequest {
            method: "POST".into(),
            url: "https://origin.test/pay".into(),
            path_and_query: "/pay".into(),
            headers: vec![],
            raw_body_sha256: "d".repeat(64),
            body: b"{}".to_vec(),
            source: None,
            stale: false,
            batch: None,
            order: None,
            via: None,
        }
    }

    fn identity() -> Identity {
        Identity {
            receipt_id: "r".into(),
            route: "stripe".into(),
            object: "c".repeat(64),
            scope: "b".repeat(64),
            key: IdempotencyKey::parse("evt_1", "test").unwrap(),
            path: None,
            tenant_sha256: None,
        }
    }

    /// An async request stored before `source` and `stale` existed reads
    /// as a live delivery, and a live one is stored as it was then.
    #[test]
    fn source_and_stale_are_absent_from_json_unless_set() {
        let stored = r#"{"method":"POST","url":"https://origin.test/pay","path_and_query":"/pay","headers":[],"raw_body_sha256":"dd"}"#;
        let read: DeliveryRequest = serde_json::from_str(stored).unwrap();
        assert_eq!((read.source, read.stale), (None, false));
        let live = serde_json::to_value(request()).unwrap();
        assert!(live.get("source").is_none() && live.get("stale").is_none());
        let reconciled = DeliveryRequest {
            source: Some("reconciliation".into()),
            stale: true,
            ..request()
        };
        let json = serde_json::to_string(&reconciled).unwrap();
        assert!(json.contains(r#""source":"reconciliation","stale":true"#));
        let back: DeliveryRequest = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back,
            DeliveryRequest {
                body: vec![],
                ..reconciled
            }
        );
    }

    #[test]
    fn the_forward_carries_source_and_stale() {
        let header = |request: &OutboundRequest, name: &str| {
            request
                .headers
                .iter()
                .find(|(header, _)| header == name)
                .map(|(_, value)| value.clone())
        };
        let live = request().to_origin(&identity(), 7, Some("k"), 1);
        assert_eq!(header(&live, "idempotency-source"), None);
        assert_eq!(header(&live, "idempotency-stale"), None);
        let reconciled = DeliveryRequest {
            source: Some("reconciliation".into()),
            stale: true,
            ..request()
        }
        .to_origin(&identity(), 7, Some("k"), 1);
        assert_eq!(
            header(&reconciled, "idempotency-source").as_deref(),
            Some("reconciliation")
        );
        assert_eq!(
            header(&reconciled, "idempotency-stale").as_deref(),
            Some("true")
        );
        assert_eq!(
            header(&reconciled, "idempotency-signature"),
            header(&live, "idempotency-signature")
        );
        assert_ne!(
            header(&reconciled, "idempotency-signature-v2"),
            header(&live, "idempotency-signature-v2")
        );
    }
}
