//! What the gateway asks of a key's Durable Object, and what the object
//! answers: plain data, sent over Durable Object RPC as JSON text with the
//! body beside it as bytes. RPC skips the HTTP request the `fetch` path
//! builds, parses and proxies twice, which cost about three no-object
//! requests per call; and since nothing travels in headers, a sender has
//! nothing internal to forge.

use serde::{Deserialize, Serialize};

use crate::canonical::Fingerprint;
use crate::engine::Delivery;
use crate::headers::HeaderList;
use crate::key::{IdempotencyKey, KeySource};
use crate::origin::OutboundRequest;
use crate::pipeline::Admitted;
use crate::problem::Problem;
use crate::receipt::HttpResponse;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectCall {
    /// Duplicates the calling isolate answered from its replay cache for
    /// this key since it last called; added to the receipt's `duplicates`.
    pub absorbed: u64,
    pub op: ObjectOp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectOp {
    /// An admitted delivery; the body travels beside the call.
    Deliver {
        scope: String,
        key: String,
        fingerprint: String,
        method: String,
        url: String,
        headers: HeaderList,
    },
    /// The operator reads the receipt.
    ReadReceipt,
    /// The operator deletes the receipt.
    Purge,
}

impl ObjectCall {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a call serializes")
    }

    /// The gateway is the only caller, so a call that does not parse means
    /// a gateway and an object of different versions.
    pub fn from_json(text: &str) -> Result<ObjectCall, Problem> {
        serde_json::from_str(text).map_err(|error| version_skew(error.to_string()))
    }
}

impl ObjectOp {
    /// The call for a delivery the gateway admitted.
    pub fn deliver(admitted: Admitted, method: String) -> ObjectOp {
        ObjectOp::Deliver {
            scope: admitted.object_name,
            key: admitted.key.as_str().to_string(),
            fingerprint: admitted.fingerprint.as_str().to_string(),
            method,
            url: admitted.origin_url,
            headers: admitted.forward_headers,
        }
    }

    /// The delivery a `Deliver` call carries, with its body.
    pub fn into_delivery(self, body: Vec<u8>) -> Result<Delivery, Problem> {
        let ObjectOp::Deliver {
            scope,
            key,
            fingerprint,
            method,
            url,
            headers,
        } = self
        else {
            return Err(version_skew("not a delivery".into()));
        };
        // The gateway validated the key against its real source already.
        let key = IdempotencyKey::parse(&key, &KeySource::BodySha256)
            .map_err(|_| version_skew("the key is not valid".into()))?;
        let fingerprint = Fingerprint::from_hex(&fingerprint)
            .ok_or_else(|| version_skew("the fingerprint is not valid".into()))?;
        Ok(Delivery {
            scope,
            key,
            fingerprint,
            request: OutboundRequest {
                method,
                url,
                headers,
                body,
            },
        })
    }
}

fn version_skew(reason: String) -> Problem {
    Problem::Misconfigured {
        variable: "DEDUP_OBJECT",
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
}

impl ObjectReply {
    /// The reply's JSON and the body to send beside it.
    pub fn encode(response: HttpResponse, replayable_until: Option<u64>) -> (String, Vec<u8>) {
        let reply = ObjectReply {
            status: response.status,
            headers: response.headers,
            replayable_until,
        };
        let json = serde_json::to_string(&reply).expect("a reply serializes");
        (json, response.body)
    }

    pub fn decode(json: &str, body: Vec<u8>) -> Result<(HttpResponse, Option<u64>), String> {
        let reply: ObjectReply = serde_json::from_str(json).map_err(|error| error.to_string())?;
        let response = HttpResponse {
            status: reply.status,
            headers: reply.headers,
            body,
        };
        Ok((response, reply.replayable_until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted() -> Admitted {
        Admitted {
            key: IdempotencyKey::parse("evt_1", &KeySource::BodySha256).unwrap(),
            fingerprint: Fingerprint::from_hex(&"a".repeat(64)).unwrap(),
            object_name: "scope-hash".into(),
            origin_url: "https://origin.test/pay?x=1".into(),
            forward_headers: vec![("content-type".into(), "application/json".into())],
        }
    }

    #[test]
    fn an_admitted_delivery_survives_the_trip() {
        let sent = admitted();
        let call = ObjectCall {
            absorbed: 3,
            op: ObjectOp::deliver(sent.clone(), "POST".into()),
        };
        let call = ObjectCall::from_json(&call.to_json()).unwrap();
        assert_eq!(call.absorbed, 3);
        let received = call.op.into_delivery(b"{}".to_vec()).unwrap();
        assert_eq!(received.scope, sent.object_name);
        assert_eq!(received.key, sent.key);
        assert_eq!(received.fingerprint, sent.fingerprint);
        assert_eq!(
            received.request,
            OutboundRequest {
                method: "POST".into(),
                url: sent.origin_url,
                headers: sent.forward_headers,
                body: b"{}".to_vec(),
            }
        );
    }

    #[test]
    fn operator_calls_round_trip() {
        for op in [ObjectOp::ReadReceipt, ObjectOp::Purge] {
            let call = ObjectCall { absorbed: 0, op };
            assert_eq!(ObjectCall::from_json(&call.to_json()), Ok(call));
        }
    }

    #[test]
    fn a_call_from_another_version_is_a_misconfiguration() {
        let problem = ObjectCall::from_json("{\"op\":{\"kind\":\"teleport\"}}").unwrap_err();
        assert_eq!(problem.status(), 500);
        let problem = ObjectOp::Purge.into_delivery(Vec::new()).err().unwrap();
        assert_eq!(problem.status(), 500);
        let mut op = ObjectOp::deliver(admitted(), "POST".into());
        if let ObjectOp::Deliver { fingerprint, .. } = &mut op {
            *fingerprint = "forged".into();
        }
        assert!(op.into_delivery(Vec::new()).is_err());
    }

    #[test]
    fn a_reply_keeps_status_headers_body_and_replay_bound() {
        let response = HttpResponse {
            status: 201,
            headers: vec![("idempotent-replayed".into(), "true".into())],
            body: vec![0, 159, 255],
        };
        let (json, body) = ObjectReply::encode(response.clone(), Some(42));
        assert_eq!(
            ObjectReply::decode(&json, body),
            Ok((response.clone(), Some(42)))
        );
        let (json, body) = ObjectReply::encode(response.clone(), None);
        assert!(!json.contains("replayable_until"));
        assert_eq!(ObjectReply::decode(&json, body), Ok((response, None)));
    }
}
