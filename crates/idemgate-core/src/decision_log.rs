//! One structured event per decision (SPEC §9). Every event is counted
//! (per-isolate stats, and Analytics Engine when bound); it becomes a log
//! line when it changes a receipt's state or rejects a delivery, and for an
//! absorbed duplicate only with `LOG_DUPLICATES=true`. Built from data
//! that is safe to print: route names, the scope hash and receipt id
//! (never the key), epochs, statuses, durations and problem names. No
//! body, header value or secret ever goes into an event.

use serde::Serialize;

use crate::answer::{Answer, Settled};

pub const EVENT: &str = "idemgate.decision";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisionLog {
    pub event: &'static str,
    /// forwarded, taken_over, failed, queued, dead, redriven, expired,
    /// purged, mismatch, rejected (state changes and rejections); replayed,
    /// waited, conflict, ack, duplicate (absorbed duplicates).
    pub decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_id: Option<String>,
    /// The key's scope id (never the key itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Request path, for rejections made before a key is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// Status answered to the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin_status: Option<u16>,
    /// The problem type name of a rejection or failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin_ms: Option<u64>,
    /// How long a delivery waited for its flow-control permit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// The batch the delivery's event came in (SPEC §4, v4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// True when the isolate answered without the Durable Object.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub edge: bool,
    pub duration_ms: u64,
    /// A sweep's run: what it found and woke.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swept: Option<crate::sweep::SweepReport>,
    /// An absorbed duplicate: counted, logged only on request.
    #[serde(skip)]
    pub absorbed: bool,
}

/// What the engine learned while answering one delivery.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    pub receipt_id: Option<String>,
    pub epoch: Option<u64>,
    pub takeover: bool,
    pub origin_ms: Option<u64>,
    pub waited_ms: Option<u64>,
}

impl DecisionLog {
    pub fn new(decision: &'static str, duration_ms: u64) -> DecisionLog {
        DecisionLog {
            event: EVENT,
            decision,
            route: None,
            receipt_id: None,
            scope: None,
            path: None,
            epoch: None,
            status: None,
            origin_status: None,
            reason: None,
            origin_ms: None,
            waited_ms: None,
            batch: None,
            edge: false,
            duration_ms,
            swept: None,
            absorbed: false,
        }
    }

    /// The event of an answer of the Durable Object.
    pub fn of_answer(answer: &Answer, trace: Trace, duration_ms: u64) -> DecisionLog {
        let decision = match answer {
            Answer::Forwarded(_) if trace.takeover => "taken_over",
            _ => answer.decision(),
        };
        let settled = match answer {
            Answer::Forwarded(settled) | Answer::Waited(settled) => Some(settled),
            _ => None,
        };
        let origin_status = match (settled, answer) {
            (Some(Settled::Response { response, .. }), _) => Some(response.status),
            (_, Answer::Replayed(stored)) => Some(stored.response.status),
            _ => None,
        };
        let reason = match (settled, answer) {
            (Some(Settled::Problem(problem)), _) | (_, Answer::Rejected(problem)) => {
                Some(problem.name())
            }
            _ => None,
        };
        DecisionLog {
            epoch: trace.epoch,
            status: Some(answer.render_status()),
            origin_status,
            reason,
            origin_ms: trace.origin_ms,
            absorbed: answer.is_absorbed(),
            ..DecisionLog::new(decision, duration_ms)
        }
    }

    /// Whether the event becomes a log line (SPEC §9).
    pub fn is_logged(&self, log_duplicates: bool) -> bool {
        !self.absorbed || log_duplicates
    }

    /// Whether its metric point may be summed with others of its route and
    /// decision (SPEC §9 asks for counts): absorbed duplicates, and the
    /// routine life of a delivery that went well (forwarded, queued,
    /// expired). A failure, a dead letter, a rejection, a takeover or an
    /// operator's act keeps a point of its own, with its reason, status and
    /// origin time, as its log line does.
    pub fn is_routine(&self) -> bool {
        self.absorbed
            || (self.reason.is_none()
                && matches!(self.decision, "forwarded" | "queued" | "expired"))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a log line always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Problem;
    use crate::receipt::{HttpResponse, StoredResponse};

    #[test]
    fn only_the_routine_life_of_a_delivery_shares_metric_points() {
        for decision in ["forwarded", "queued", "expired"] {
            assert!(DecisionLog::new(decision, 1).is_routine(), "{decision}");
            let with_reason = DecisionLog {
                reason: Some("origin-timeout"),
                ..DecisionLog::new(decision, 1)
            };
            assert!(!with_reason.is_routine(), "{decision} with a reason");
        }
        for decision in [
            "taken_over",
            "failed",
            "dead",
            "redriven",
            "purged",
            "mismatch",
            "rejected",
        ] {
            assert!(!DecisionLog::new(decision, 1).is_routine(), "{decision}");
        }
        let absorbed = DecisionLog {
            absorbed: true,
            ..DecisionLog::new("replayed", 1)
        };
        assert!(absorbed.is_routine());
    }

    #[test]
    fn a_takeover_is_logged_as_such() {
        let answer = Answer::Forwarded(Settled::Problem(Problem::OriginTimeout { after_ms: 5 }));
        let trace = Trace {
            receipt_id: None,
            epoch: Some(3),
            takeover: true,
            origin_ms: Some(5),
            waited_ms: None,
        };
        let mut line = DecisionLog::of_answer(&answer, trace, 7);
        line.scope = Some("abc".into());
        assert_eq!(line.decision, "taken_over");
        assert_eq!(line.reason, Some("origin-timeout"));
        assert_eq!(line.status, Some(504));
        assert!(line.is_logged(false));
        let json: serde_json::Value = serde_json::from_str(&line.to_json()).unwrap();
        assert_eq!(json["event"], EVENT);
        assert_eq!(json["epoch"], 3);
        assert!(json.get("path").is_none());
        assert!(json.get("absorbed").is_none());
    }

    #[test]
    fn rejections_are_logged_and_duplicates_only_on_request() {
        let mismatch = DecisionLog::of_answer(
            &Answer::Rejected(Problem::FingerprintMismatch),
            Trace::default(),
            1,
        );
        assert_eq!(mismatch.decision, "mismatch");
        assert_eq!(mismatch.reason, Some("fingerprint-mismatch"));
        assert!(mismatch.is_logged(false));
        let replay = DecisionLog::of_answer(
            &Answer::Replayed(StoredResponse::keep(
                &HttpResponse {
                    status: 201,
                    headers: vec![],
                    body: vec![],
                },
                10,
            )),
            Trace::default(),
            0,
        );
        assert_eq!(replay.origin_status, Some(201));
        assert!(!replay.is_logged(false));
        assert!(replay.is_logged(true));
    }
}
