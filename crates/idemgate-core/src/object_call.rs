//! What the gateway asks of a key's Durable Object, and what the object
//! answers: plain data, sent over Durable Object RPC as JSON text with the
//! body beside it as bytes. Nothing internal travels in headers, so a
//! sender has nothing internal to forge.

use serde::{Deserialize, Serialize};

use crate::delivery::Delivery;
use crate::headers::HeaderList;
use crate::pipeline::Admitted;
use crate::problem::Problem;
use crate::receipt::HttpResponse;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectCall {
    /// The route whose settings apply.
    pub route: String,
    /// The object's own name (it names the receipt's index row).
    pub object: String,
    /// Duplicates the calling isolate answered from its replay cache for
    /// this key since it last called; added to the receipt's `duplicates`.
    pub absorbed: u64,
    pub op: ObjectOp,
}

// One call lives only while it is serialized or read: its size is no cost.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectOp {
    /// An admitted delivery; the body travels beside the call.
    Deliver(Delivery),
    /// The operator reads the receipt.
    ReadReceipt,
    /// The operator deletes the receipt; a pending async one only with
    /// `force`; only the life `receipt_id` names, when it names one.
    Purge {
        force: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        receipt_id: Option<String>,
    },
    /// The operator queues a dead, failed or queued async receipt again;
    /// only the life `receipt_id` names, when it names one.
    Redrive {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        receipt_id: Option<String>,
    },
    /// The scheduled sweep wakes an object whose index row is overdue.
    Wake,
    /// The route's flow coordinator reserved a permit for this object.
    PermitReady,
    /// (v4) The entity's order object: this object's turn has come, or it
    /// asks how the delivery stands; answered with a
    /// [`crate::order::HolderStatus`] as the body.
    OrderReady,
    /// Reconciliation asks whether a delivery of the key arrived (SPEC
    /// §11): 200 when the object holds a receipt of one, 404 when not.
    HasReceipt,
    /// A signed transmission id's object ([`crate::single_use`]): is the
    /// transmission `claimant`'s (the key's object), until `until`?
    ClaimOnce { claimant: String, until: u64 },
}

/// What the caller is told when the call to the key's object fails.
/// Before the call left, nothing can have been forwarded:
/// `storage-unavailable`, retry freely. After it left, a delivery may have
/// been forwarded and charged: `outcome-unknown` (SPEC §6), retry with the
/// same key only. The operator's calls never forward.
pub fn call_failure(delivery: bool, call_left: bool, message: String) -> Problem {
    match (delivery, call_left) {
        (true, true) => Problem::OutcomeUnknown {
            message: format!("the call to the key's Durable Object failed: {message}"),
        },
        (false, true) => Problem::StorageUnavailable {
            message: format!("the call to the key's Durable Object failed: {message}"),
        },
        (_, false) => Problem::StorageUnavailable {
            message: format!("the key's Durable Object could not be reached: {message}"),
        },
    }
}

impl ObjectOp {
    pub fn is_delivery(&self) -> bool {
        matches!(self, ObjectOp::Deliver(_))
    }

    /// Whether the object needs the call's route to exist and be valid:
    /// a delivery does; the operator's and the sweep's calls reach a
    /// receipt whatever became of its route.
    pub fn needs_route(&self) -> bool {
        self.is_delivery()
    }
}

impl ObjectCall {
    /// The call that hands `delivery` to its key's object.
    pub fn deliver(delivery: Delivery, absorbed: u64) -> ObjectCall {
        ObjectCall {
            route: delivery.identity.route.clone(),
            object: delivery.identity.object.clone(),
            absorbed,
            op: ObjectOp::Deliver(delivery),
        }
    }

    /// The call that delivers `admitted` to the object the second version
    /// kept its receipt in, only if that object holds one; `None` when
    /// that object is this one.
    pub fn deliver_to_previous(admitted: &Admitted) -> Option<ObjectCall> {
        let delivery = Delivery {
            identity: admitted.previous.clone()?,
            if_known: true,
            if_absent: false,
            ..admitted.delivery.clone()
        };
        Some(ObjectCall::deliver(delivery, 0))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a call serializes")
    }

    /// The gateway is the only caller, so a call that does not parse means
    /// a gateway and an object of different versions.
    pub fn from_json(text: &str) -> Result<ObjectCall, Problem> {
        serde_json::from_str(text).map_err(|error| version_skew(error.to_string()))
    }

    /// The delivery a `Deliver` call carries, with its body.
    pub fn into_delivery(self, body: Vec<u8>) -> Result<Delivery, Problem> {
        let ObjectOp::Deliver(mut delivery) = self.op else {
            return Err(version_skew("not a delivery".into()));
        };
        delivery.request.body = body;
        Ok(delivery)
    }
}

fn version_skew(reason: String) -> Problem {
    Problem::Misconfigured {
        variable: "DEDUP_OBJECT".into(),
        reason: format!("the object cannot read the gateway's call: {reason}"),
    }
}

/// The object's answer without its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectReply {
    pub status: u16,
    pub headers: HeaderList,
    /// Set on a stored, complete replay: the receipt's `expires_at`, so the
    /// gateway may keep the replay in its isolate until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayable_until: Option<u64>,
    /// An `if_known` delivery found no receipt: nothing was done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unknown_key: bool,
    /// An `if_absent` delivery found a receipt: nothing was done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already_received: bool,
}

/// What the gateway gets back from a key's object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub response: HttpResponse,
    pub replayable_until: Option<u64>,
    pub unknown_key: bool,
    pub already_received: bool,
}

impl Reply {
    /// `response` as a reply with nothing else to say.
    pub fn of(response: HttpResponse) -> Reply {
        Reply {
            response,
            replayable_until: None,
            unknown_key: false,
            already_received: false,
        }
    }
}

impl ObjectReply {
    /// The reply's JSON and the body to send beside it.
    pub fn encode(reply: Reply) -> (String, Vec<u8>) {
        let encoded = ObjectReply {
            status: reply.response.status,
            headers: reply.response.headers,
            replayable_until: reply.replayable_until,
            unknown_key: reply.unknown_key,
            already_received: reply.already_received,
        };
        let json = serde_json::to_string(&encoded).expect("a reply serializes");
        (json, reply.response.body)
    }

    pub fn decode(json: &str, body: Vec<u8>) -> Result<Reply, String> {
        let reply: ObjectReply = serde_json::from_str(json).map_err(|error| error.to_string())?;
        Ok(Reply {
            response: HttpResponse {
                status: reply.status,
                headers: reply.headers,
                body,
            },
            replayable_until: reply.replayable_until,
            unknown_key: reply.unknown_key,
            already_received: reply.already_received,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Fingerprint;
    use crate::delivery::{DeliveryRequest, Identity};
    use crate::key::IdempotencyKey;

    #[test]
    fn a_delivery_lost_after_its_call_left_is_outcome_unknown() {
        let deliver = ObjectCall::deliver(admitted().delivery, 0).op;
        assert!(deliver.is_delivery());
        let unknown = call_failure(deliver.is_delivery(), true, "reset".into());
        assert_eq!(unknown.name(), "outcome-unknown");
        assert_eq!(unknown.status(), 503);
        let unsent = call_failure(true, false, "no stub".into());
        assert_eq!(unsent.name(), "storage-unavailable");
        for op in [
            ObjectOp::ReadReceipt,
            ObjectOp::Purge {
                force: false,
                receipt_id: None,
            },
            ObjectOp::Redrive { receipt_id: None },
            ObjectOp::Redrive {
                receipt_id: Some("0190b4c2-7e00-7000-8000-000000000000".into()),
            },
            ObjectOp::Wake,
        ] {
            let failure = call_failure(op.is_delivery(), true, "reset".into());
            assert_eq!(failure.name(), "storage-unavailable");
        }
    }

    fn admitted() -> Admitted {
        Admitted {
            delivery: Delivery {
                identity: Identity {
                    receipt_id: String::new(),
                    route: "stripe".into(),
                    object: "c".repeat(64),
                    scope: "b".repeat(64),
                    key: IdempotencyKey::parse("evt_1", "test").unwrap(),
                    path: Some("/pay".into()),
                    tenant_sha256: None,
                },
                fingerprint: Fingerprint::from_hex(&"a".repeat(64)).unwrap(),
                request: DeliveryRequest {
                    method: "POST".into(),
                    url: "https://origin.test/pay?x=1".into(),
                    path_and_query: "/pay?x=1".into(),
                    headers: vec![("content-type".into(), "application/json".into())],
                    raw_body_sha256: "d".repeat(64),
                    body: Vec::new(),
                    source: None,
                    stale: false,
                    batch: None,
                    order: None,
                    via: None,
                },
                if_known: false,
                if_absent: false,
            },
            previous: None,
        }
    }

    #[test]
    fn an_admitted_delivery_survives_the_trip() {
        let sent = admitted().delivery;
        let call = ObjectCall::from_json(&ObjectCall::deliver(sent.clone(), 3).to_json()).unwrap();
        assert_eq!((call.absorbed, call.route.as_str()), (3, "stripe"));
        assert_eq!(call.object, sent.identity.object);
        let received = call.into_delivery(b"{}".to_vec()).unwrap();
        assert_eq!(received.identity.scope, sent.identity.scope);
        assert_eq!(received.identity.object, sent.identity.object);
        assert_eq!(received.identity.key, "evt_1");
        assert_eq!(received.identity.path.as_deref(), Some("/pay"));
        assert_eq!(received.fingerprint, sent.fingerprint);
        assert_eq!(received.request.path_and_query, "/pay?x=1");
        assert_eq!(
            received.request,
            DeliveryRequest {
                body: b"{}".to_vec(),
                ..sent.request
            }
        );
    }

    #[test]
    fn operator_calls_round_trip() {
        for op in [
            ObjectOp::ReadReceipt,
            ObjectOp::Purge {
                force: false,
                receipt_id: None,
            },
            ObjectOp::Redrive { receipt_id: None },
            ObjectOp::Redrive {
                receipt_id: Some("0190b4c2-7e00-7000-8000-000000000000".into()),
            },
            ObjectOp::Wake,
        ] {
            let call = ObjectCall {
                route: "default".into(),
                object: "o".into(),
                absorbed: 0,
                op,
            };
            assert_eq!(ObjectCall::from_json(&call.to_json()), Ok(call));
        }
    }

    #[test]
    fn a_call_from_another_version_is_a_misconfiguration() {
        let problem = ObjectCall::from_json("{\"op\":{\"kind\":\"teleport\"}}").unwrap_err();
        assert_eq!(problem.status(), 500);
        let purge = ObjectCall {
            route: "r".into(),
            object: "o".into(),
            absorbed: 0,
            op: ObjectOp::Purge {
                force: true,
                receipt_id: None,
            },
        };
        assert_eq!(purge.into_delivery(Vec::new()).unwrap_err().status(), 500);
        let forged = ObjectCall::deliver(admitted().delivery, 0)
            .to_json()
            .replace(&"a".repeat(64), "forged");
        assert!(ObjectCall::from_json(&forged).is_err());
        let bad_key = ObjectCall::deliver(admitted().delivery, 0)
            .to_json()
            .replace("evt_1", "evt 1");
        assert!(ObjectCall::from_json(&bad_key).is_err());
    }

    #[test]
    fn a_reply_keeps_status_headers_body_and_replay_bound() {
        let response = HttpResponse {
            status: 201,
            headers: vec![("idempotent-replayed".into(), "true".into())],
            body: vec![0, 159, 255],
        };
        let reply = |replayable_until, unknown_key| Reply {
            response: response.clone(),
            replayable_until,
            unknown_key,
            already_received: false,
        };
        let (json, body) = ObjectReply::encode(reply(Some(42), false));
        assert_eq!(ObjectReply::decode(&json, body), Ok(reply(Some(42), false)));
        let (json, body) = ObjectReply::encode(reply(None, false));
        assert!(!json.contains("replayable_until") && !json.contains("unknown_key"));
        assert_eq!(ObjectReply::decode(&json, body), Ok(reply(None, false)));
        let (json, body) = ObjectReply::encode(reply(None, true));
        assert_eq!(ObjectReply::decode(&json, body), Ok(reply(None, true)));
    }

    #[test]
    fn a_delivery_goes_to_its_previous_object_only_if_known_there() {
        let mut admitted = admitted();
        assert_eq!(ObjectCall::deliver_to_previous(&admitted), None);
        admitted.previous = Some(Identity {
            key: IdempotencyKey::parse("evt:1", "test").unwrap(),
            scope: "e".repeat(64),
            object: "f".repeat(64),
            tenant_sha256: None,
            ..admitted.delivery.identity.clone()
        });
        let call = ObjectCall::deliver_to_previous(&admitted).unwrap();
        assert_eq!(call.object, "f".repeat(64));
        let delivery = call.into_delivery(Vec::new()).unwrap();
        assert!(delivery.if_known);
        assert_eq!(delivery.identity.key.as_str(), "evt:1");
        assert_eq!(delivery.identity.scope, "e".repeat(64));
        assert_eq!(
            delivery.fingerprint, admitted.delivery.fingerprint,
            "the same payload"
        );
        assert!(
            !ObjectCall::deliver(admitted.delivery, 0)
                .into_delivery(Vec::new())
                .unwrap()
                .if_known
        );
    }
}
