//! The chain's anchor outside the object that keeps it (SPEC §13, v5):
//! the head (`seq`, `hash`, time) goes as a signed `idemgate.audit_head`
//! checkpoint to every `json` alert sink, after an act (at most once a
//! minute) and daily. Someone who can write the audit object's storage can
//! rewrite an entry and every hash after it, and the chain still verifies;
//! it no longer agrees with what the sinks received, which the verifiers
//! check (`verify-audit --head <checkpoint>`).

use serde::{Deserialize, Serialize};

use super::Head;
use crate::alerts::message::sign_v1;
use crate::alerts::{Format, Sink};
use crate::headers::HeaderList;
use crate::origin::OutboundRequest;

/// After an act, at most one checkpoint a minute.
pub const CHECKPOINT_EVERY_MS: u64 = 60_000;
/// Even with no act, one a day: a sink that hears nothing knows the
/// deployment (or the sending) stopped.
pub const CHECKPOINT_DAILY_MS: u64 = 86_400_000;

/// One checkpoint: the head at `at_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub seq: u64,
    pub hash: String,
    pub at_ms: u64,
}

impl Checkpoint {
    pub fn of(head: &Head, at_ms: u64) -> Checkpoint {
        Checkpoint {
            seq: head.seq,
            hash: head.hash.clone(),
            at_ms,
        }
    }

    /// The body a `json` sink receives.
    pub fn body(&self) -> String {
        serde_json::json!({
            "type": "idemgate.audit_head",
            "seq": self.seq,
            "hash": self.hash,
            "at": crate::time::rfc3339(self.at_ms / 1_000),
        })
        .to_string()
    }

    /// The request to `sink`, signed as Standard Webhooks with its secret
    /// (`whsec_...`), as its alerts are; `None` for a Slack sink, which
    /// gets no checkpoint (a person reads it; a hash is for machines).
    pub fn request(
        &self,
        sink: &Sink,
        secret: Option<&str>,
        now_seconds: u64,
    ) -> Option<Result<OutboundRequest, String>> {
        if sink.format != Format::Json {
            return None;
        }
        let id = format!("audit_head_{}_{}", self.seq, self.at_ms);
        let body = self.body();
        let timestamp = now_seconds.to_string();
        let signed = secret
            .ok_or_else(|| "the sink's secret is not set".to_string())
            .and_then(|secret| sign_v1(secret, &id, &timestamp, body.as_bytes()));
        Some(signed.map(|signature| {
            let headers: HeaderList = vec![
                ("content-type".into(), "application/json".into()),
                ("user-agent".into(), "idemgate-alerts".into()),
                ("webhook-id".into(), id),
                ("webhook-timestamp".into(), timestamp),
                ("webhook-signature".into(), signature),
            ];
            OutboundRequest {
                method: "POST".into(),
                url: sink.url.clone(),
                headers,
                body: body.into_bytes(),
                via: None,
            }
        }))
    }
}

/// When the audit object last sent a checkpoint, and of which head.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointSchedule {
    pub sent_at: u64,
    pub sent_seq: u64,
}

impl CheckpointSchedule {
    /// When the next checkpoint of a chain whose head is `head_seq` is
    /// due: a minute after the last when the chain grew since, a day after
    /// it otherwise; never for an empty chain.
    pub fn next_at(&self, head_seq: u64) -> Option<u64> {
        match head_seq {
            0 => None,
            seq if seq != self.sent_seq => Some(self.sent_at.saturating_add(CHECKPOINT_EVERY_MS)),
            _ => Some(self.sent_at.saturating_add(CHECKPOINT_DAILY_MS)),
        }
    }

    pub fn due(&self, head_seq: u64, now: u64) -> bool {
        self.next_at(head_seq).is_some_and(|at| at <= now)
    }

    pub fn sent(&mut self, head_seq: u64, now: u64) {
        *self = CheckpointSchedule {
            sent_at: now,
            sent_seq: head_seq,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_follows_an_act_within_a_minute_and_comes_daily() {
        let t = 1_764_950_400_000;
        let mut schedule = CheckpointSchedule::default();
        assert_eq!(schedule.next_at(0), None, "nothing to anchor");
        assert!(schedule.due(1, t), "the first act's head at once");
        schedule.sent(1, t);
        assert!(!schedule.due(1, t + CHECKPOINT_EVERY_MS), "no act since");
        assert!(
            !schedule.due(2, t + CHECKPOINT_EVERY_MS - 1),
            "at most once a minute"
        );
        assert!(schedule.due(2, t + CHECKPOINT_EVERY_MS));
        assert_eq!(schedule.next_at(1), Some(t + CHECKPOINT_DAILY_MS));
        assert!(schedule.due(1, t + CHECKPOINT_DAILY_MS), "daily");
    }

    #[test]
    fn a_json_sink_gets_the_head_signed_and_slack_gets_none() {
        let checkpoint = Checkpoint {
            seq: 42,
            hash: "ab".repeat(32),
            at_ms: 1_764_950_400_000,
        };
        assert_eq!(
            checkpoint.body(),
            format!(
                r#"{{"at":"2025-12-05T16:00:00Z","hash":"{}","seq":42,"type":"idemgate.audit_head"}}"#,
                "ab".repeat(32)
            )
        );
        let json = Sink {
            url: "https://ops.example/idemgate".into(),
            format: Format::Json,
            secret: Some("ALERT_SECRET".into()),
        };
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let request = checkpoint
            .request(&json, Some(secret), 1_764_950_401)
            .unwrap()
            .unwrap();
        let header = |name: &str| {
            request
                .headers
                .iter()
                .find(|(found, _)| found == name)
                .map(|(_, value)| value.clone())
                .unwrap()
        };
        assert_eq!(header("webhook-id"), "audit_head_42_1764950400000");
        let expected = sign_v1(
            secret,
            "audit_head_42_1764950400000",
            "1764950401",
            &request.body,
        )
        .unwrap();
        assert_eq!(header("webhook-signature"), expected);
        assert!(checkpoint.request(&json, None, 0).unwrap().is_err());
        let slack = Sink {
            format: Format::Slack,
            secret: None,
            ..json
        };
        assert!(checkpoint.request(&slack, None, 0).is_none());
    }
}
