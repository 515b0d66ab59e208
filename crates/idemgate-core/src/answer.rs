//! What a delivery is answered with, and how each answer renders to HTTP.
//! Rendering is pure, so every status and header a caller can see is
//! decided (and tested) here.

use std::rc::Rc;

use crate::headers::{DECISION, REPLAYED};
use crate::problem::{Problem, PROBLEM_CONTENT_TYPE};
use crate::receipt::{completes, HttpResponse, StoredResponse};

/// How the first delivery of a key ended, as its duplicates will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The origin answered (any status).
    Response(Rc<HttpResponse>),
    /// The origin timed out or could not be reached.
    Problem(Problem),
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
}

/// Header naming a stored body that was too large to keep.
pub const BODY_OMITTED: &str = "Idemgate-Body-Omitted";

impl Answer {
    /// The value of the `Idemgate-Decision` header.
    pub fn decision(&self) -> &'static str {
        match self {
            Answer::Forwarded(Settled::Response(response)) if completes(response.status) => {
                "forwarded"
            }
            Answer::Forwarded(_) => "failed",
            Answer::Replayed(_) => "replayed",
            Answer::Waited(_) => "waited",
            Answer::Rejected(Problem::FingerprintMismatch) => "mismatch",
            Answer::Rejected(Problem::InFlight { .. }) => "conflict",
            Answer::Rejected(_) => "rejected",
            Answer::Acknowledged => "ack",
        }
    }

    /// The status [`Answer::render`] gives, without building the body.
    pub fn render_status(&self) -> u16 {
        match self {
            Answer::Forwarded(Settled::Response(response))
            | Answer::Waited(Settled::Response(response)) => response.status,
            Answer::Forwarded(Settled::Problem(problem))
            | Answer::Waited(Settled::Problem(problem))
            | Answer::Rejected(problem) => problem.status(),
            Answer::Replayed(stored) => stored.response.status,
            Answer::Acknowledged => 202,
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
        };
        response.headers.push(decision);
        response
    }
}

/// A duplicate that waited for a completed outcome gets it as a replay; a
/// failure is passed on as it was, for the caller to retry.
fn render_settled(settled: &Settled, waited: bool) -> HttpResponse {
    match settled {
        Settled::Response(response) => {
            let mut response = HttpResponse::clone(response);
            if waited && completes(response.status) {
                response.headers.push((REPLAYED.into(), "true".into()));
            }
            response
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

    fn origin(status: u16) -> Rc<HttpResponse> {
        Rc::new(HttpResponse {
            status,
            headers: vec![("x-origin".into(), "1".into())],
            body: b"paid".to_vec(),
        })
    }

    #[test]
    fn forwarded_is_the_origin_answer_unmarked() {
        let response = Answer::Forwarded(Settled::Response(origin(201))).render();
        assert_eq!(response.status, 201);
        assert_eq!(response.body, b"paid");
        assert_eq!(get(&response.headers, REPLAYED), None);
        assert_eq!(get(&response.headers, DECISION), Some("forwarded"));
    }

    #[test]
    fn waiters_of_a_completed_outcome_get_a_replay_and_of_a_failure_the_failure() {
        let replay = Answer::Waited(Settled::Response(origin(200))).render();
        assert_eq!(get(&replay.headers, REPLAYED), Some("true"));
        assert_eq!(replay.body, b"paid");
        let failure = Answer::Waited(Settled::Response(origin(503))).render();
        assert_eq!(failure.status, 503);
        assert_eq!(get(&failure.headers, REPLAYED), None);
        let timeout =
            Answer::Waited(Settled::Problem(Problem::OriginTimeout { after_ms: 5 })).render();
        assert_eq!(timeout.status, 504);
    }

    #[test]
    fn replays_are_marked_and_say_when_the_body_was_omitted() {
        let stored = StoredResponse::keep(&origin(200), 1);
        let response = Answer::Replayed(stored).render();
        assert_eq!(get(&response.headers, REPLAYED), Some("true"));
        assert_eq!(get(&response.headers, BODY_OMITTED), Some("4"));
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
    fn ack_is_202() {
        let response = Answer::Acknowledged.render();
        assert_eq!(response.status, 202);
        assert_eq!(get(&response.headers, DECISION), Some("ack"));
    }
}
