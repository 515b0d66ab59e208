//! A receipt as the operator API shows it (SPEC §7, v3): its own shape,
//! not the stored record's, so a change of storage never changes the API
//! unnoticed; and what it shows of a request is masked where it carries a
//! credential or a signature.

use serde::Serialize;

use crate::delivery::DeliveryRequest;
use crate::headers::HeaderList;
use crate::receipt::{Attempt, DeliveryKind, Receipt, ReceiptState, StoredResponse};

/// Storage operations, as counted by a backend: the cost of a delivery,
/// which the operator's view of a receipt shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StorageOps {
    pub reads: u64,
    pub writes: u64,
    pub alarm_writes: u64,
    pub index_writes: u64,
}

impl StorageOps {
    pub fn bump(counter: &std::cell::Cell<StorageOps>, bump: impl FnOnce(&mut StorageOps)) {
        let mut ops = counter.get();
        bump(&mut ops);
        counter.set(ops);
    }
}

/// The version of this view's shape, sent as `view_version`.
pub const VIEW_VERSION: u32 = 1;

/// What replaces a masked header's value.
pub const MASKED: &str = "[masked]";

#[derive(Debug, Serialize)]
pub struct ReceiptView<'a> {
    pub view_version: u32,
    pub receipt_id: &'a str,
    pub route: &'a str,
    pub key: &'a str,
    pub scope: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_sha256: Option<&'a str>,
    pub object: &'a str,
    pub delivery: DeliveryKind,
    pub state: &'static str,
    pub fingerprint: &'a str,
    pub epoch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponseView<'a>>,
    pub first_seen_at: u64,
    pub updated_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<u64>,
    pub expires_at: u64,
    pub duplicates: u64,
    /// The batch whose event began this receipt's life (SPEC §4, v4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<&'a str>,
    pub attempts: &'a [Attempt],
    /// An async delivery's stored request, while it is kept (until it
    /// completes), with credentials and signatures masked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestView>,
    /// Storage operations of the object's current lifetime.
    pub object_storage_ops: StorageOps,
}

#[derive(Debug, Serialize)]
pub struct ResponseView<'a> {
    pub status: u16,
    pub headers: &'a HeaderList,
    /// The stored body as text, when it is UTF-8 ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<&'a str>,
    /// ... else as base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    pub body_bytes: usize,
    pub body_stored: bool,
}

#[derive(Debug, Serialize)]
pub struct RequestView {
    pub method: String,
    pub url: String,
    pub headers: HeaderList,
    pub body_bytes: usize,
}

impl<'a> ReceiptView<'a> {
    /// `also_masked`: the route's own header names whose values are
    /// masked besides the well-known ones (its `SIGNATURE_HEADER`, its
    /// `TENANT_HEADER`); `None` when the route can no longer be read
    /// (removed, renamed, broken): then every header but a few plain ones
    /// is masked, since which of them carried a secret is unknown.
    pub fn of(
        receipt: &'a Receipt,
        request: Option<&DeliveryRequest>,
        ops: StorageOps,
        also_masked: Option<&[&str]>,
    ) -> ReceiptView<'a> {
        let identity = &receipt.identity;
        let (mut lease_expires_at, mut completed_at, mut failed_at, mut dead_at) =
            (None, None, None, None);
        let mut response = None;
        match &receipt.state {
            ReceiptState::InFlight {
                lease_expires_at: at,
            } => lease_expires_at = Some(*at),
            ReceiptState::Completed {
                completed_at: at,
                response: stored,
            } => {
                completed_at = Some(*at);
                response = Some(ResponseView::of(stored));
            }
            ReceiptState::Failed { failed_at: at, .. } => failed_at = Some(*at),
            ReceiptState::Dead { dead_at: at, .. } => dead_at = Some(*at),
            ReceiptState::Queued { .. } => {}
        }
        ReceiptView {
            view_version: VIEW_VERSION,
            receipt_id: &identity.receipt_id,
            route: &identity.route,
            key: identity.key.as_str(),
            scope: &identity.scope,
            path: identity.path.as_deref(),
            tenant_sha256: identity.tenant_sha256.as_deref(),
            object: &identity.object,
            delivery: receipt.delivery,
            state: receipt.state_name(),
            fingerprint: receipt.fingerprint.as_str(),
            epoch: receipt.epoch,
            lease_expires_at,
            next_attempt_at: match receipt.state {
                ReceiptState::InFlight { .. } => None,
                _ => receipt.next_attempt_at(),
            },
            response,
            first_seen_at: receipt.first_seen_at,
            updated_at: receipt.updated_at,
            completed_at,
            failed_at,
            dead_at,
            expires_at: receipt.expires_at,
            duplicates: receipt.duplicates,
            batch: receipt.batch.as_deref(),
            attempts: &receipt.attempts,
            request: request.map(|request| RequestView::of(request, also_masked)),
            object_storage_ops: ops,
        }
    }
}

impl<'a> ResponseView<'a> {
    fn of(stored: &'a StoredResponse) -> ResponseView<'a> {
        let body = &stored.response.body;
        let text = std::str::from_utf8(body).ok();
        ResponseView {
            status: stored.response.status,
            headers: &stored.response.headers,
            body: text,
            body_base64: match text {
                Some(_) => None,
                None => Some(base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    body,
                )),
            },
            body_bytes: stored.body_bytes,
            body_stored: stored.body_stored,
        }
    }
}

impl RequestView {
    fn of(request: &DeliveryRequest, also_masked: Option<&[&str]>) -> RequestView {
        RequestView {
            method: request.method.clone(),
            url: request.url.clone(),
            headers: mask(&request.headers, also_masked),
            body_bytes: request.body.len(),
        }
    }
}

/// Whether a header's value is a credential or a signature: shown to no
/// one, not even the operator (it could be replayed or cracked).
pub fn is_masked(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "authorization",
        "cookie",
        "set-cookie",
        "proxy-authorization",
    ]
    .contains(&name.as_str())
        || [
            "signature",
            "hmac",
            "token",
            "secret",
            "api-key",
            "apikey",
            "password",
        ]
        .iter()
        .any(|part| name.contains(part))
        || name == "paypal-transmission-sig"
        || name == "paypal-cert-url"
        || name == "plaid-verification"
}

/// Headers shown even when the route that took a request is unknown:
/// none of them carries a credential.
const PLAIN: [&str; 7] = [
    "content-type",
    "content-length",
    "content-encoding",
    "user-agent",
    "accept",
    "accept-encoding",
    "date",
];

pub fn mask(headers: &[(String, String)], also_masked: Option<&[&str]>) -> HeaderList {
    headers
        .iter()
        .map(|(name, value)| {
            let route_masks = match also_masked {
                Some(names) => names.iter().any(|masked| masked.eq_ignore_ascii_case(name)),
                None => !PLAIN.iter().any(|plain| plain.eq_ignore_ascii_case(name)),
            };
            let shown = if route_masks || is_masked(name) {
                MASKED.to_string()
            } else {
                value.clone()
            };
            (name.clone(), shown)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Fingerprint;
    use crate::receipt::{HttpResponse, Identity};

    fn headers(pairs: &[(&str, &str)]) -> HeaderList {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn credentials_and_signatures_are_masked_and_the_rest_shown() {
        let shown = mask(
            &headers(&[
                ("Authorization", "Bearer secret"),
                ("cookie", "session=1"),
                ("Stripe-Signature", "t=1,v1=ab"),
                ("webhook-signature", "v1,xyz"),
                ("X-Hub-Signature-256", "sha256=ab"),
                ("X-Shopify-Hmac-Sha256", "ab=="),
                ("HmacSignature", "ab=="),
                ("X-Api-Key", "k"),
                ("PAYPAL-TRANSMISSION-SIG", "sig"),
                ("content-type", "application/json"),
                ("webhook-id", "msg_1"),
            ]),
            Some(&[]),
        );
        let values: Vec<&str> = shown.iter().map(|(_, value)| value.as_str()).collect();
        assert_eq!(&values[..9], [MASKED; 9]);
        assert_eq!(&values[9..], ["application/json", "msg_1"]);
    }

    /// The review's case (round 4, item 14): a generic route's signature
    /// header and its tenant header carry no well-known name, and are
    /// masked all the same.
    #[test]
    fn a_routes_own_signature_and_tenant_headers_are_masked() {
        let list = headers(&[
            ("X-Acme-Mac", "deadbeef"),
            ("X-Customer", "acme-42"),
            ("x-trace", "1"),
        ]);
        let shown = mask(&list, Some(&["x-acme-mac", "X-CUSTOMER"]));
        let values: Vec<&str> = shown.iter().map(|(_, value)| value.as_str()).collect();
        assert_eq!(values, [MASKED, MASKED, "1"]);
        assert_eq!(
            mask(&list, Some(&[]))[0].1,
            "deadbeef",
            "not a well-known name"
        );
        // The route can no longer be read: all but the plain ones.
        let mut unknown = list.clone();
        unknown.push(("Content-Type".into(), "application/json".into()));
        let values: Vec<String> = mask(&unknown, None)
            .into_iter()
            .map(|(_, value)| value)
            .collect();
        assert_eq!(values, [MASKED, MASKED, MASKED, "application/json"]);
    }

    #[test]
    fn the_view_is_its_own_shape() {
        let mut receipt = Receipt::new(
            Identity {
                receipt_id: "r1".into(),
                route: "stripe".into(),
                object: "o".into(),
                scope: "s".into(),
                key: "evt_1".into(),
                path: None,
                tenant_sha256: None,
            },
            Fingerprint::of_bytes(b"a"),
            DeliveryKind::Sync,
            ReceiptState::Completed {
                completed_at: 5,
                response: StoredResponse::keep(
                    &HttpResponse {
                        status: 201,
                        headers: headers(&[("content-type", "text/plain")]),
                        body: b"paid".to_vec(),
                    },
                    1024,
                ),
            },
            1,
            100,
        );
        receipt.epoch = 7;
        let request = DeliveryRequest {
            method: "POST".into(),
            url: "https://o/pay".into(),
            path_and_query: "/pay".into(),
            headers: headers(&[("stripe-signature", "t=1,v1=ab"), ("x-trace", "1")]),
            raw_body_sha256: "x".into(),
            body: b"{}".to_vec(),
            source: None,
            stale: false,
            batch: None,
            order: None,
            via: None,
        };
        let view = serde_json::to_value(ReceiptView::of(
            &receipt,
            Some(&request),
            StorageOps::default(),
            Some(&[]),
        ))
        .unwrap();
        assert_eq!(view["view_version"], VIEW_VERSION);
        assert_eq!(view["state"], "completed");
        assert_eq!(view["completed_at"], 5);
        assert_eq!(view["response"]["status"], 201);
        assert_eq!(view["response"]["body"], "paid");
        assert_eq!(view["request"]["headers"][0][1], MASKED);
        assert_eq!(view["request"]["headers"][1][1], "1");
        assert_eq!(view["request"]["body_bytes"], 2);
        for stored_only in ["indexed", "record_version", "terms", "schedule_step"] {
            assert!(view.get(stored_only).is_none(), "{stored_only}");
        }
        let binary = StoredResponse::keep(
            &HttpResponse {
                status: 200,
                headers: vec![],
                body: vec![0xff, 0x00],
            },
            1024,
        );
        let shown = serde_json::to_value(ResponseView::of(&binary)).unwrap();
        assert_eq!(shown["body_base64"], "/wA=");
        assert!(shown.get("body").is_none());
    }
}
