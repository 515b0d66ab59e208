//! What a delivery is answered with, and how each answer renders to HTTP.
//! Rendering is pure, so every status and header a caller can see is
//! decided (and tested) here.

use std::rc::Rc;

use crate::headers::{without_set_cookie, DECISION, RECEIPT_ID, REPLAYED};
use crate::problem::{Problem, PROBLEM_CONTENT_TYPE};
use crate::receipt::{HttpResponse, StoredResponse};

/// How the first delivery of a key ended, as its duplicates will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The origin answered; `completed` unless its status is retryable.
    Response {
        response: Rc<HttpResponse>,
        completed: bool,
    },
    /// The origin timed out or could not be reached.
    Problem(Problem),
}

/// An async acknowledgement (SPEC §2b).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub receipt_id: String,
    /// The receipt's state when acknowledged.
    pub state: &'static str,
    pub status: u16,
    /// `ACK_BODY` verbatim, or `None` for the JSON body.
    pub body: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This delivery was forwarded; the origin's outcome.
    Forwarded(Settled),
    /// Answered from the receipt's stored response.
    Replayed(StoredResponse),
    /// Held under `IN_FLIGHT=wait` until the first delivery settled.
    Waited(Settled),
    /// Refused by the edge.
    Rejected(Problem),
    /// `IN_FLIGHT=ack`: acknowledged at once, not forwarded.
    Acknowledged,
    /// Async: a first delivery, durable and queued.
    Queued(Ack),
    /// Async: a duplicate of a delivery already accepted.
    Duplicate(Ack),
}

/// Header naming a stored body that was too large to keep.
pub const BODY_OMITTED: &str = "Idemgate-Body-Omitted";

impl Answer {
    /// The value of the `Idemgate-Decision` header.
    pub fn decision(&self) -> &'static str {
        match self {
            Answer::Forwarded(Settled::Response {
                completed: true, ..
            }) => "forwarded",
            Answer::Forwarded(_) => "failed",
            Answer::Replayed(_) => "replayed",
            Answer::Waited(_) => "waited",
            Answer::Rejected(Problem::FingerprintMismatch) => "mismatch",
            Answer::Rejected(Problem::InFlight { .. }) => "conflict",
            Answer::Rejected(_) => "rejected",
            Answer::Acknowledged => "ack",
            Answer::Queued(_) => "queued",
            Answer::Duplicate(_) => "duplicate",
        }
    }

    /// Whether this answer only absorbed a duplicate (SPEC §9: counted,
    /// logged only with `LOG_DUPLICATES`), rather than changing a receipt
    /// or rejecting a delivery.
    pub fn is_absorbed(&self) -> bool {
        matches!(
            self,
            Answer::Replayed(_)
                | Answer::Waited(_)
                | Answer::Acknowledged
                | Answer::Duplicate(_)
                | Answer::Rejected(Problem::InFlight { .. })
        )
    }

    /// The status [`Answer::render`] gives, without building the body.
    pub fn render_status(&self) -> u16 {
        match self {
            Answer::Forwarded(Settled::Response { response, .. })
            | Answer::Waited(Settled::Response { response, .. }) => response.status,
            Answer::Forwarded(Settled::Problem(problem))
            | Answer::Waited(Settled::Problem(problem))
            | Answer::Rejected(problem) => problem.status(),
            Answer::Replayed(stored) => stored.response.status,
            Answer::Acknowledged => 202,
            Answer::Queued(ack) | Answer::Duplicate(ack) => ack.status,
        }
    }

    pub fn render(&self) -> HttpResponse {
        let decision = (DECISION.to_string(), self.decision().to_string());
        let mut response = match self {
            Answer::Forwarded(settled) => render_settled(settled, false),
            Answer::Waited(settled) => render_settled(settled, true),
            Answer::Replayed(stored) => {
                let mut response = stored.response.clone();
                response.headers.push((REPLAYED.into(), "true".into()));
                if !stored.body_stored {
                    response
                        .headers
                        .push((BODY_OMITTED.into(), stored.body_bytes.to_string()));
                }
                response
            }
            Answer::Rejected(problem) => render_problem(problem),
            Answer::Acknowledged => HttpResponse {
                status: 202,
                headers: vec![("content-type".into(), "application/json".into())],
                body: br#"{"status":"accepted","detail":"a delivery with this key is in flight; this duplicate was acknowledged and not forwarded"}"#.to_vec(),
            },
            Answer::Queued(ack) | Answer::Duplicate(ack) => render_ack(ack),
        };
        response.headers.push(decision);
        response
    }
}

fn render_ack(ack: &Ack) -> HttpResponse {
    let (content_type, body) = match &ack.body {
        Some(body) => ("text/plain; charset=utf-8", body.clone().into_bytes()),
        None => (
            "application/json",
            serde_json::json!({ "receipt_id": ack.receipt_id, "state": ack.state })
                .to_string()
                .into_bytes(),
        ),
    };
    HttpResponse {
        status: ack.status,
        headers: vec![
            ("content-type".into(), content_type.into()),
            (RECEIPT_ID.into(), ack.receipt_id.clone()),
        ],
        body,
    }
}

/// The forwarded caller gets the origin's answer whole. A duplicate that
/// waited gets a completed outcome as a replay, without `Set-Cookie` (it
/// belongs to the caller whose delivery was forwarded), and a failure as
/// it was, for the caller to retry.
fn render_settled(settled: &Settled, waited: bool) -> HttpResponse {
    match settled {
        Settled::Response {
            response,
            completed,
        } => {
            let mut rendered = HttpResponse::clone(response);
            if waited {
                rendered.headers = without_set_cookie(&rendered.headers);
                if *completed {
                    rendered.headers.push((REPLAYED.into(), "true".into()));
                }
            }
            rendered
        }
        Settled::Problem(problem) => render_problem(problem),
    }
}

pub fn render_problem(problem: &Problem) -> HttpResponse {
    let mut headers = vec![("content-type".to_string(), PROBLEM_CONTENT_TYPE.to_string())];
    if let Some(seconds) = problem.retry_after_secs() {
        headers.push(("retry-after".into(), seconds.to_string()));
    }
    HttpResponse {
        status: problem.status(),
        headers,
        body: problem.to_json().into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::get;

    fn origin(status: u16) -> Settled {
        Settled::Response {
            response: Rc::new(HttpResponse {
                status,
                headers: vec![
                    ("x-origin".into(), "1".into()),
                    ("set-cookie".into(), "session=first-caller".into()),
                ],
                body: b"paid".to_vec(),
            }),
            completed: status < 500,
        }
    }

    #[test]
    fn forwarded_is_the_origin_answer_whole_and_unmarked() {
        let response = Answer::Forwarded(origin(201)).render();
        assert_eq!(response.status, 201);
        assert_eq!(response.body, b"paid");
        assert_eq!(get(&response.headers, REPLAYED), None);
        assert_eq!(
            get(&response.headers, "set-cookie"),
            Some("session=first-caller")
        );
        assert_eq!(get(&response.headers, DECISION), Some("forwarded"));
        assert_eq!(Answer::Forwarded(origin(503)).decision(), "failed");
    }

    #[test]
    fn waiters_get_a_replay_or_the_failure_and_never_the_cookie() {
        let replay = Answer::Waited(origin(200)).render();
        assert_eq!(get(&replay.headers, REPLAYED), Some("true"));
        assert_eq!(get(&replay.headers, "set-cookie"), None);
        assert_eq!(get(&replay.headers, "x-origin"), Some("1"));
        assert_eq!(replay.body, b"paid");
        let failure = Answer::Waited(origin(503)).render();
        assert_eq!(failure.status, 503);
        assert_eq!(get(&failure.headers, REPLAYED), None);
        assert_eq!(get(&failure.headers, "set-cookie"), None);
        let timeout =
            Answer::Waited(Settled::Problem(Problem::OriginTimeout { after_ms: 5 })).render();
        assert_eq!(timeout.status, 504);
    }

    #[test]
    fn replays_are_marked_and_say_when_the_body_was_omitted() {
        let Settled::Response { response, .. } = origin(200) else {
            panic!()
        };
        let stored = StoredResponse::keep(&response, 1);
        let response = Answer::Replayed(stored).render();
        assert_eq!(get(&response.headers, REPLAYED), Some("true"));
        assert_eq!(get(&response.headers, BODY_OMITTED), Some("4"));
        assert_eq!(get(&response.headers, "set-cookie"), None);
        assert!(response.body.is_empty());
        assert_eq!(get(&response.headers, "x-origin"), Some("1"));
    }

    #[test]
    fn conflict_is_problem_json_with_retry_after() {
        let response = Answer::Rejected(Problem::InFlight {
            retry_after_secs: 4,
        })
        .render();
        assert_eq!(response.status, 409);
        assert_eq!(get(&response.headers, "retry-after"), Some("4"));
        assert_eq!(
            get(&response.headers, "content-type"),
            Some(PROBLEM_CONTENT_TYPE)
        );
        assert_eq!(get(&response.headers, DECISION), Some("conflict"));
    }

    #[test]
    fn acknowledgements_name_their_receipt() {
        let ack = Ack {
            receipt_id: "0190b3c4-0000-7000-8000-000000000000".into(),
            state: "queued",
            status: 202,
            body: None,
        };
        let queued = Answer::Queued(ack.clone()).render();
        assert_eq!(queued.status, 202);
        assert_eq!(get(&queued.headers, DECISION), Some("queued"));
        assert_eq!(
            get(&queued.headers, "idemgate-receipt-id"),
            Some(ack.receipt_id.as_str())
        );
        let body: serde_json::Value = serde_json::from_slice(&queued.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"receipt_id": ack.receipt_id, "state": "queued"})
        );
        let verbatim = Answer::Duplicate(Ack {
            body: Some("[accepted]".into()),
            status: 200,
            ..ack
        })
        .render();
        assert_eq!(
            (verbatim.status, verbatim.body.as_slice()),
            (200, &b"[accepted]"[..])
        );
        assert_eq!(get(&verbatim.headers, DECISION), Some("duplicate"));
        assert_eq!(Answer::Acknowledged.render().status, 202);
    }

    #[test]
    fn only_duplicates_are_absorbed() {
        assert!(Answer::Acknowledged.is_absorbed());
        assert!(Answer::Waited(origin(200)).is_absorbed());
        assert!(Answer::Rejected(Problem::InFlight {
            retry_after_secs: 1
        })
        .is_absorbed());
        assert!(!Answer::Forwarded(origin(200)).is_absorbed());
        assert!(!Answer::Rejected(Problem::FingerprintMismatch).is_absorbed());
    }
}
