//! One structured log line per decision (for `wrangler tail` and Workers
//! Logs). Built from data that is safe to print: the scope hash (never the
//! key itself), epochs, statuses, durations and problem names. No body,
//! header value or secret ever goes into a line.

use serde::Serialize;

use crate::answer::{Answer, Settled};

pub const EVENT: &str = "idemgate.decision";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisionLog {
    pub event: &'static str,
    /// forwarded, taken_over, failed, replayed, waited, conflict, mismatch,
    /// ack, rejected, expired, purged.
    pub decision: &'static str,
    /// Hash of path scope, tenant and key: the Durable Object's name.
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
    /// True when the isolate answered without the Durable Object.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub edge: bool,
    pub duration_ms: u64,
}

/// What the engine learned while answering one delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trace {
    pub epoch: Option<u64>,
    pub takeover: bool,
    pub origin_ms: Option<u64>,
}

impl DecisionLog {
    pub fn new(decision: &'static str, duration_ms: u64) -> DecisionLog {
        DecisionLog {
            event: EVENT,
            decision,
            scope: None,
            path: None,
            epoch: None,
            status: None,
            origin_status: None,
            reason: None,
            origin_ms: None,
            edge: false,
            duration_ms,
        }
    }

    /// The line for an answer of the Durable Object.
    pub fn of_answer(answer: &Answer, scope: &str, trace: Trace, duration_ms: u64) -> DecisionLog {
        let decision = match answer {
            Answer::Forwarded(_) if trace.takeover => "taken_over",
            _ => answer.decision(),
        };
        let settled = match answer {
            Answer::Forwarded(settled) | Answer::Waited(settled) => Some(settled),
            _ => None,
        };
        let origin_status = match (settled, answer) {
            (Some(Settled::Response(response)), _) => Some(response.status),
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
            scope: Some(scope.to_string()),
            epoch: trace.epoch,
            status: Some(answer.render_status()),
            origin_status,
            reason,
            origin_ms: trace.origin_ms,
            ..DecisionLog::new(decision, duration_ms)
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a log line always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Problem;

    #[test]
    fn a_takeover_is_logged_as_such() {
        let answer = Answer::Forwarded(Settled::Problem(Problem::OriginTimeout { after_ms: 5 }));
        let trace = Trace {
            epoch: Some(3),
            takeover: true,
            origin_ms: Some(5),
        };
        let line = DecisionLog::of_answer(&answer, "abc", trace, 7);
        assert_eq!(line.decision, "taken_over");
        assert_eq!(line.reason, Some("origin-timeout"));
        assert_eq!(line.status, Some(504));
        let json: serde_json::Value = serde_json::from_str(&line.to_json()).unwrap();
        assert_eq!(json["event"], EVENT);
        assert_eq!(json["epoch"], 3);
        assert!(json.get("path").is_none());
    }

    #[test]
    fn rejections_carry_their_problem_name() {
        let line = DecisionLog::of_answer(
            &Answer::Rejected(Problem::FingerprintMismatch),
            "abc",
            Trace::default(),
            1,
        );
        assert_eq!(line.decision, "mismatch");
        assert_eq!(line.reason, Some("fingerprint-mismatch"));
        assert_eq!(line.status, Some(422));
    }
}
