//! Batches (SPEC §4, v4): a sender that puts several events in one request
//! (GoCardless's `events`, Adyen's `notificationItems`) gets one receipt
//! per event. The batch is cut here into one request per event, each in the
//! sender's envelope holding that event alone: every other member's value
//! as sent (its name written again), and the event's bytes as sent (an
//! Adyen item keeps its own `hmacSignature`, which the origin can check).
//!
//! Each part's payload, whose hash is its fingerprint, is its envelope
//! without the members that describe the transmission rather than the
//! event (GoCardless's `meta`, whose `webhook_id` is new when an event is
//! sent again in another batch): an event re-sent in another batch is the
//! same payload, a replay and not a mismatch.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::canonical::{body_sha256, read_json};
use crate::problem::Problem;

/// How a sender lays out a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchFormat {
    /// The top-level member that lists the events.
    pub events: &'static str,
    /// Top-level members about the transmission, left out of each event's
    /// payload.
    pub transmission: &'static [&'static str],
    /// The sender's signature headers: they covered the whole batch, so a
    /// part does not carry them (idemgate signs each forward).
    pub signature_headers: &'static [&'static str],
    /// Whether the third version keyed a request by its events joined
    /// (Adyen's `scheme-key`): such a receipt is looked up before a batch
    /// of several events is cut (SPEC §3's upgrade rule).
    pub joined_before: bool,
    /// The body the sender expects on a 2xx, if it expects one (Adyen's
    /// `[accepted]`).
    pub accepted: Option<&'static str>,
    /// The envelope's members a part keeps besides its event, where the
    /// sender's signature does not cover the envelope (Adyen signs each
    /// item alone: `live` is all its format needs); `None` where the
    /// signature covers the whole body, so every member is the sender's.
    pub envelope: Option<&'static [&'static str]>,
}

/// The most an envelope may add to each event's part (the members copied
/// into every part): a batch's parts then hold at most its events' bytes
/// plus this much each, however its sender padded the envelope.
pub const MAX_ENVELOPE_BYTES: usize = 1_024;

/// One event of a batch, as its own request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchPart {
    /// The envelope holding this event alone: what the origin gets.
    pub body: Vec<u8>,
    /// Hex SHA-256 of the canonical payload (the envelope without the
    /// transmission's members): the part's fingerprint hashes it.
    pub payload_sha256: String,
}

/// The default of `MAX_BATCH_EVENTS`: GoCardless's own limit.
pub const DEFAULT_MAX_EVENTS: usize = 250;

/// Cuts `body` (already verified) into its events. A body that is not an
/// object holding a non-empty list under `format.events`, or one of more
/// than `max_events` events, is refused whole: nothing of it may be stored.
pub fn split(
    format: &BatchFormat,
    body: &[u8],
    max_events: usize,
) -> Result<Vec<BatchPart>, Problem> {
    // The strict reader first: a member named twice, or a number it cannot
    // hold exactly, is refused as any JSON body is.
    read_json(body, &[])?;
    let invalid = |reason: String| Problem::InvalidBatch { reason };
    let Members(members) = serde_json::from_slice(body).map_err(|_| {
        invalid(format!(
            "the body is not an object with {:?}",
            format.events
        ))
    })?;
    let listed = members
        .iter()
        .find(|(name, _)| name == format.events)
        .ok_or_else(|| invalid(format!("the body has no {:?} list", format.events)))?;
    let events: Vec<&RawValue> = serde_json::from_str(listed.1.get())
        .map_err(|_| invalid(format!("{:?} is not a list", format.events)))?;
    if events.is_empty() {
        return Err(invalid(format!("{:?} lists no event", format.events)));
    }
    if events.len() > max_events {
        return Err(invalid(format!(
            "the batch holds {} events, over MAX_BATCH_EVENTS ({max_events})",
            events.len()
        )));
    }
    // What the sender's format does not need is not copied, and what is
    // copied into every part is bounded: a body padded in what no
    // signature covers cannot multiply into the parts.
    let members: Vec<(String, &RawValue)> = members
        .into_iter()
        .filter(|(name, _)| {
            name == format.events
                || format
                    .envelope
                    .is_none_or(|kept| kept.contains(&name.as_str()))
        })
        .collect();
    let copied: usize = members
        .iter()
        .filter(|(name, _)| name != format.events)
        .map(|(name, value)| name.len() + value.get().len() + 4)
        .sum();
    if copied > MAX_ENVELOPE_BYTES {
        return Err(invalid(format!(
            "the envelope around {:?} holds {copied} bytes copied into every event's part, over {MAX_ENVELOPE_BYTES}",
            format.events
        )));
    }
    events
        .iter()
        .map(|event| {
            let body = envelope(&members, format, event, &[]);
            let payload = envelope(&members, format, event, format.transmission);
            let canonical = read_json(&payload, &[])?;
            Ok(BatchPart {
                body,
                payload_sha256: body_sha256(Some(canonical.canonical()), &payload),
            })
        })
        .collect()
}

/// The envelope's members in their order, the list holding `event` alone,
/// and none of `left_out`.
fn envelope(
    members: &[(String, &RawValue)],
    format: &BatchFormat,
    event: &RawValue,
    left_out: &[&str],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.get().len() + 64);
    out.push(b'{');
    let kept = members
        .iter()
        .filter(|(name, _)| !left_out.contains(&name.as_str()));
    for (index, (name, value)) in kept.enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend(
            serde_json::to_string(name)
                .expect("a string serializes")
                .bytes(),
        );
        out.push(b':');
        match name == format.events {
            true => {
                out.push(b'[');
                out.extend(event.get().bytes());
                out.push(b']');
            }
            false => out.extend(value.get().bytes()),
        }
    }
    out.push(b'}');
    out
}

/// A JSON object's members in the order sent, each value's bytes as sent.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Members<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOCARDLESS: BatchFormat = BatchFormat {
        events: "events",
        transmission: &["meta"],
        signature_headers: &["webhook-signature"],
        joined_before: false,
        accepted: None,
        envelope: None,
    };

    const ADYEN_LIKE: BatchFormat = BatchFormat {
        events: "notificationItems",
        transmission: &[],
        signature_headers: &[],
        joined_before: false,
        accepted: None,
        envelope: Some(&["live"]),
    };

    /// The review's item 13 (round 5): a 280 KB Adyen body of 250 items
    /// with an unsigned 1 MB member became about 50 MB of parts, and the
    /// member reached the origin in every part. Only `live` and the item
    /// are forwarded now, and what is copied is bounded.
    #[test]
    fn an_unsigned_envelope_member_is_not_copied_and_the_copies_are_bounded() {
        let padding = "x".repeat(1_000_000);
        let body = format!(
            r#"{{"live":"false","padding":"{padding}","notificationItems":[{{"NotificationRequestItem":{{"pspReference":"A"}}}},{{"NotificationRequestItem":{{"pspReference":"B"}}}}]}}"#
        );
        let parts = split(&ADYEN_LIKE, body.as_bytes(), 250).unwrap();
        assert_eq!(
            String::from_utf8(parts[0].body.clone()).unwrap(),
            r#"{"live":"false","notificationItems":[{"NotificationRequestItem":{"pspReference":"A"}}]}"#
        );
        let total: usize = parts.iter().map(|part| part.body.len()).sum();
        assert!(total < 200, "{total}");
        // A member the format keeps, padded: refused whole.
        let padded_live = format!(
            r#"{{"live":"{}","notificationItems":[{{"NotificationRequestItem":{{}}}}]}}"#,
            "x".repeat(2_000)
        );
        match split(&ADYEN_LIKE, padded_live.as_bytes(), 250) {
            Err(Problem::InvalidBatch { reason }) => {
                assert!(reason.contains("over 1024"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // Where the signature covers the whole body, an envelope over the
        // bound is refused too.
        let big_meta = format!(
            r#"{{"events":[{{"id":"EV1"}}],"meta":{{"x":"{}"}}}}"#,
            "y".repeat(2_000)
        );
        assert!(matches!(
            split(&GOCARDLESS, big_meta.as_bytes(), 250),
            Err(Problem::InvalidBatch { .. })
        ));
    }

    fn parts(body: &str, max: usize) -> Result<Vec<BatchPart>, Problem> {
        split(&GOCARDLESS, body.as_bytes(), max)
    }

    #[test]
    fn each_event_goes_in_the_envelope_alone_with_its_bytes_as_sent() {
        let body =
            r#"{"events": [{"id":"EV1", "n": 1.50}, {"id":"EV2"}], "meta": {"webhook_id":"WB1"}}"#;
        let parts = parts(body, 250).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            String::from_utf8(parts[0].body.clone()).unwrap(),
            r#"{"events":[{"id":"EV1", "n": 1.50}],"meta":{"webhook_id":"WB1"}}"#
        );
        assert_eq!(
            String::from_utf8(parts[1].body.clone()).unwrap(),
            r#"{"events":[{"id":"EV2"}],"meta":{"webhook_id":"WB1"}}"#
        );
    }

    #[test]
    fn an_event_in_another_transmission_is_the_same_payload() {
        let first = parts(
            r#"{"events":[{"id":"EV1"}],"meta":{"webhook_id":"WB1"}}"#,
            9,
        );
        let again = parts(
            r#"{"meta":{"webhook_id":"WB2"},"events":[{"id":"EV0"},{ "id" : "EV1" }]}"#,
            9,
        );
        assert_eq!(
            first.unwrap()[0].payload_sha256,
            again.unwrap()[1].payload_sha256
        );
        let changed = parts(r#"{"events":[{"id":"EV1","x":1}],"meta":{}}"#, 9).unwrap();
        let first = parts(r#"{"events":[{"id":"EV1"}],"meta":{}}"#, 9).unwrap();
        assert_ne!(first[0].payload_sha256, changed[0].payload_sha256);
    }

    #[test]
    fn a_batch_that_is_not_one_is_refused_whole() {
        let refused = |body: &str, max: usize| match parts(body, max) {
            Err(Problem::InvalidBatch { reason }) => reason,
            other => panic!("{body}: {other:?}"),
        };
        assert!(refused(r#"[{"id":"EV1"}]"#, 9).contains("not an object"));
        assert!(refused(r#"{"meta":{}}"#, 9).contains("no \"events\" list"));
        assert!(refused(r#"{"events":{"id":"EV1"}}"#, 9).contains("not a list"));
        assert!(refused(r#"{"events":[]}"#, 9).contains("lists no event"));
        assert!(
            refused(r#"{"events":[{},{},{}]}"#, 2).contains("3 events, over MAX_BATCH_EVENTS (2)")
        );
        assert_eq!(
            parts(r#"{"events":[{},{}]}"#, 2).unwrap().len(),
            2,
            "at the limit"
        );
        assert!(matches!(
            parts(r#"{"events":[{"id":1,"id":2}]}"#, 9),
            Err(Problem::InvalidJson { .. })
        ));
        assert!(matches!(parts("{", 9), Err(Problem::InvalidJson { .. })));
    }
}
