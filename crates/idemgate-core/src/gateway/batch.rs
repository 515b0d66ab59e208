//! A batch's way through the gateway (SPEC §4, v4): cut into its events,
//! each admitted as a delivery of its own before any is sent (a batch that
//! cannot be taken whole stores nothing), then each delivered to its key's
//! object in the sender's order, and the batch answered for all of them.
//!
//! Sequential, not concurrent: the sender ordered its events, and an
//! origin may act on one (a payment confirmed) only after the one before
//! (the payment created). A batch of one event is answered as that event
//! is. A failing event does not stop the ones after
//! it: the batch is answered with its status, the sender sends the whole
//! batch again, and the events already delivered replay.

use std::collections::HashMap;

use super::{answer_from_previous, replayed_here, Edge, Handled};
use crate::batch::{split, BatchFormat};
use crate::headers::{self, DECISION, RECEIPT_ID};
use crate::object_call::{ObjectCall, Reply};
use crate::pipeline::{admit, admit_batch_part, Admitted, Authenticated};
use crate::problem::Problem;
use crate::receipt::HttpResponse;
use crate::replay_cache::cache_key;

/// The header naming the batch on its answer (and in the log).
pub const BATCH: &str = "Idemgate-Batch";

/// Delivers the verified batch `authenticated` holds.
pub(super) async fn deliver_batch<E: Edge>(
    edge: &E,
    authenticated: &Authenticated<'_>,
    format: &BatchFormat,
) -> Result<Handled<E::Response>, Problem> {
    let route = authenticated.route();
    let parts = split(format, authenticated.inbound().body, route.max_batch_events)?;
    let admitted = parts
        .iter()
        .map(|part| admit_batch_part(authenticated, format, part))
        .collect::<Result<Vec<Admitted>, Problem>>()?;
    refuse_repeated_events(&admitted)?;
    if route.is_async() && !edge.has_index() {
        return Err(super::no_index());
    }
    // A notification the third version took whole, under its events'
    // joined key, is answered from that receipt, not delivered again.
    if format.joined_before && admitted.len() > 1 {
        let mut joined = admit(authenticated)?.delivery;
        joined.if_known = true;
        let call = ObjectCall::deliver(joined, 0);
        let reply = edge
            .call(call, authenticated.inbound().body.to_vec())
            .await?;
        if !reply.unknown_key {
            return Ok(Handled::Answered(reply));
        }
    }
    let batch = authenticated.batch_id();
    let mut events = Vec::with_capacity(admitted.len());
    let mut edge_replays = Vec::new();
    let mut last = None;
    for (admitted, part) in admitted.into_iter().zip(parts) {
        let key = admitted.delivery.identity.key.as_str().to_string();
        let now = edge.now_ms();
        if let Some((object, found)) = replayed_here(edge, &admitted, None, now) {
            events.push(EventAnswer::of(key, &found, true));
            edge_replays.push((object, found));
            continue;
        }
        let (cached_as, answer) =
            match answer_from_previous(edge, route, &admitted, &part.body).await {
                Some(previous) => previous,
                None => {
                    let cached_as = cache_key(
                        &admitted.delivery.identity.object,
                        admitted.delivery.fingerprint.as_str(),
                    );
                    let call = ObjectCall::deliver(admitted.delivery, 0);
                    (cached_as, edge.call(call, part.body).await)
                }
            };
        let response = match answer {
            Ok(reply) => {
                keep_replay(edge, &reply, cached_as);
                reply.response
            }
            Err(problem) => crate::answer::render_problem(&problem),
        };
        events.push(EventAnswer::of(key, &response, false));
        last = Some(response);
    }
    // A batch of one event is answered as that event: the origin's own
    // answer (or its replay), as a request of one event always was.
    let only = match events.len() {
        1 => last.or_else(|| edge_replays.first().map(|(_, replay)| replay.clone())),
        _ => None,
    };
    let response = match only {
        Some(mut response) => {
            response
                .headers
                .push((BATCH.to_ascii_lowercase(), batch.clone()));
            response
        }
        _ => answer(&batch, &events, all_taken_status(route)),
    };
    Ok(Handled::Batch {
        route: route.name.clone(),
        log_duplicates: route.log_duplicates,
        response,
        batch,
        edge_replays,
    })
}

/// What a batch whose every event was taken is answered: 200 on a sync
/// route, the route's `ACK_STATUS` (202) on an async one.
fn all_taken_status(route: &crate::config::RouteConfig) -> u16 {
    match &route.delivery {
        crate::config::Delivery::Async(terms) => terms.ack_status,
        crate::config::Delivery::Sync => 200,
    }
}

/// Two events of one key would be one delivery and a replay of it: a
/// batch that repeats an event is refused whole.
fn refuse_repeated_events(admitted: &[Admitted]) -> Result<(), Problem> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(admitted.len());
    for (index, admitted) in admitted.iter().enumerate() {
        let object = admitted.delivery.identity.object.as_str();
        if let Some(first) = seen.insert(object, index) {
            return Err(Problem::InvalidBatch {
                reason: format!(
                    "events {} and {} are one event (one idempotency key)",
                    first + 1,
                    index + 1
                ),
            });
        }
    }
    Ok(())
}

/// Keeps a complete reply in this isolate, as a single delivery's is.
fn keep_replay<E: Edge>(edge: &E, reply: &Reply, key: String) {
    if let Some(until) = reply.replayable_until {
        let now = edge.now_ms();
        let response = reply.response.clone();
        edge.with_replays(|cache| cache.put(key, response, until, now));
    }
}

/// What became of one event, as the batch's answer lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventAnswer {
    pub key: String,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_id: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub edge: bool,
    #[serde(skip)]
    retry_after: Option<String>,
}

impl EventAnswer {
    fn of(key: String, response: &HttpResponse, edge: bool) -> EventAnswer {
        let header = |name| headers::get(&response.headers, name).map(str::to_string);
        EventAnswer {
            key,
            status: response.status,
            decision: header(DECISION),
            receipt_id: header(RECEIPT_ID),
            edge,
            retry_after: header("retry-after"),
        }
    }
}

/// The batch's answer: `all_taken` (2xx) only when every event's answer
/// is 2xx (a sync route's origin answered each one 2xx, now or before; an
/// async route holds each one durably), else the first other event's
/// status, and its `Retry-After`; the body lists every event's answer in
/// the batch's order.
pub fn answer(batch: &str, events: &[EventAnswer], all_taken: u16) -> HttpResponse {
    let failing = events
        .iter()
        .find(|event| !(200..300).contains(&event.status));
    let status = failing.map_or(all_taken, |event| event.status);
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        (BATCH.to_ascii_lowercase(), batch.to_string()),
    ];
    if let Some(retry_after) = failing.and_then(|event| event.retry_after.clone()) {
        headers.push(("retry-after".into(), retry_after));
    }
    let body = serde_json::json!({ "batch": batch, "events": events });
    HttpResponse {
        status,
        headers,
        body: body.to_string().into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(status: u16, retry_after: Option<&str>) -> EventAnswer {
        EventAnswer {
            key: format!("EV{status}"),
            status,
            decision: None,
            receipt_id: None,
            edge: false,
            retry_after: retry_after.map(str::to_string),
        }
    }

    #[test]
    fn a_batch_is_2xx_only_when_every_event_is() {
        let all = [event(200, None), event(201, None)];
        assert_eq!(answer("b", &all, 200).status, 200);
        assert_eq!(answer("b", &all, 202).status, 202);
        let failing = [event(200, None), event(503, Some("7")), event(422, None)];
        let answered = answer("b", &failing, 200);
        assert_eq!(answered.status, 503, "the first failing event's");
        assert_eq!(headers::get(&answered.headers, "retry-after"), Some("7"));
        let body: serde_json::Value = serde_json::from_slice(&answered.body).unwrap();
        assert_eq!(body["batch"], "b");
        assert_eq!(body["events"].as_array().unwrap().len(), 3);
        assert_eq!(body["events"][1]["key"], "EV503");
        assert_eq!(answer("b", &[event(409, None)], 202).status, 409);
    }
}
