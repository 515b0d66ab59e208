//! A batch's way through the gateway (SPEC §4, v4): cut into its events,
//! each admitted as a delivery of its own before any is sent (a batch that
//! cannot be taken whole stores nothing), then each delivered to its key's
//! object, and the batch answered for all of them.
//!
//! One after another in the sender's order, not at once: an origin sees a
//! batch's events in the order the sender listed them. A failing event
//! does not stop the ones after it (an event the origin refuses for good
//! would otherwise hold them back forever): the batch is answered with its
//! status, the sender sends the whole batch again, the events already
//! delivered replay, and the failed one may then reach the origin after
//! later ones. Order per entity is SPEC §12's, not this.

use std::collections::HashMap;

use super::{answer_from_previous, replayed_here, Edge, Handled};
use crate::batch::{split, BatchFormat};
use crate::config::{Delivery, RouteConfig};
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
    let mut admitted = parts
        .iter()
        .map(|part| admit_batch_part(authenticated, format, part))
        .collect::<Result<Vec<Admitted>, Problem>>()?;
    refuse_repeated_events(&admitted)?;
    if route.is_async() && !edge.has_index() {
        return Err(super::no_index());
    }
    let batch = authenticated.batch_id();
    if admitted.len() > 1 {
        // The second version keyed a request by its whole body: a part of
        // several never had a receipt of its own there.
        for part in &mut admitted {
            part.previous = None;
        }
        // A notification the third version took whole, under its events'
        // joined key, is answered from that receipt, not delivered again.
        if format.joined_before {
            let mut joined = admit(authenticated)?.delivery;
            joined.if_known = true;
            let call = ObjectCall::deliver(joined, 0);
            let mut reply = edge
                .call(call, authenticated.inbound().body.to_vec())
                .await?;
            if !reply.unknown_key {
                reply.response.headers.push(batch_header(&batch));
                return Ok(Handled::Answered(reply));
            }
        }
    }
    let mut events = Vec::with_capacity(admitted.len());
    let mut edge_replays = Vec::new();
    let mut problems = Vec::new();
    let mut last = None;
    for (admitted, part) in admitted.into_iter().zip(parts) {
        let key = admitted.delivery.identity.key.as_str().to_string();
        let now = edge.now_ms();
        if let Some((object, found)) = replayed_here(edge, &admitted, None, now) {
            events.push(EventAnswer::of(key, &found, true));
            last = Some(found.clone());
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
            Err(problem) => {
                let response = crate::answer::render_problem(&problem);
                problems.push(problem);
                response
            }
        };
        events.push(EventAnswer::of(key, &response, false));
        last = Some(response);
    }
    let mut response = match (events.len(), last) {
        // A batch of one event is answered as that event: the origin's own
        // answer (or its replay), as a request of one event always was.
        (1, Some(only)) => only,
        _ => answer(&batch, &events, route, format),
    };
    response.headers.push(batch_header(&batch));
    Ok(Handled::Batch {
        route: route.name.clone(),
        log_duplicates: route.log_duplicates,
        response,
        batch,
        edge_replays,
        problems,
    })
}

fn batch_header(batch: &str) -> (String, String) {
    (BATCH.to_ascii_lowercase(), batch.to_string())
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

/// The batch's answer. When every event's answer is 2xx (a sync route's
/// origin answered each one 2xx, now or before; an async route holds each
/// one durably): 200 on a sync route, `ACK_STATUS` (202) on an async one,
/// with `ACK_BODY` if the route sets one, else the sender's own
/// acknowledgement if it expects one (Adyen's `[accepted]`), else the
/// list. Otherwise the first other event's status and `Retry-After`,
/// with the list: every event's answer in the batch's order.
pub fn answer(
    batch: &str,
    events: &[EventAnswer],
    route: &RouteConfig,
    format: &BatchFormat,
) -> HttpResponse {
    let failing = events
        .iter()
        .find(|event| !(200..300).contains(&event.status));
    let (taken_status, ack_body) = match &route.delivery {
        Delivery::Async(terms) => (terms.ack_status, terms.ack_body.as_deref()),
        Delivery::Sync => (200, None),
    };
    let text = |status, body: &str| HttpResponse {
        status,
        headers: vec![(
            "content-type".to_string(),
            "text/plain; charset=utf-8".to_string(),
        )],
        body: body.as_bytes().to_vec(),
    };
    match (failing, ack_body.or(format.accepted)) {
        (None, Some(body)) => return text(taken_status, body),
        (None, None) => {}
        (Some(_), _) => {}
    }
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    if let Some(retry_after) = failing.and_then(|event| event.retry_after.clone()) {
        headers.push(("retry-after".into(), retry_after));
    }
    let body = serde_json::json!({ "batch": batch, "events": events });
    HttpResponse {
        status: failing.map_or(taken_status, |event| event.status),
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

    fn route(vars: &[(&str, &str)]) -> RouteConfig {
        let vars: HashMap<&str, &str> = [
            ("ORIGIN_URL", "http://origin:9"),
            ("SIGNING_SECRET", "00"),
            ("FORWARD_SECRET", "forward-secret"),
        ]
        .into_iter()
        .chain(vars.iter().copied())
        .collect();
        let config = crate::config::Config::from_lookup(|name| {
            vars.get(name).map(|value| value.to_string())
        })
        .unwrap();
        config.route_for("/").unwrap().clone()
    }

    fn answered(route: &RouteConfig, events: &[EventAnswer]) -> HttpResponse {
        let format = route.signature_scheme.batch().unwrap();
        answer("b", events, route, format)
    }

    #[test]
    fn a_batch_is_2xx_only_when_every_event_is() {
        let sync = route(&[("SIGNATURE_SCHEME", "gocardless")]);
        let queued = route(&[("SIGNATURE_SCHEME", "gocardless"), ("DELIVERY", "async")]);
        let all = [event(200, None), event(201, None)];
        assert_eq!(answered(&sync, &all).status, 200);
        assert_eq!(answered(&queued, &all).status, 202);
        let failing = [event(200, None), event(503, Some("7")), event(422, None)];
        let refused = answered(&sync, &failing);
        assert_eq!(refused.status, 503, "the first failing event's");
        assert_eq!(headers::get(&refused.headers, "retry-after"), Some("7"));
        let body: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
        assert_eq!(body["batch"], "b");
        assert_eq!(body["events"].as_array().unwrap().len(), 3);
        assert_eq!(body["events"][1]["key"], "EV503");
        assert_eq!(
            answered(&queued, &[event(202, None), event(409, None)]).status,
            409
        );
    }

    #[test]
    fn a_batch_taken_whole_is_acknowledged_as_its_sender_expects() {
        let all = [event(200, None), event(201, None)];
        let adyen = route(&[("SIGNATURE_SCHEME", "adyen")]);
        let accepted = answered(&adyen, &all);
        assert_eq!(
            (accepted.status, accepted.body.as_slice()),
            (200, &b"[accepted]"[..])
        );
        let acked = route(&[
            ("SIGNATURE_SCHEME", "gocardless"),
            ("DELIVERY", "async"),
            ("ACK_STATUS", "200"),
            ("ACK_BODY", "ok"),
        ]);
        let ok = answered(&acked, &all);
        assert_eq!((ok.status, ok.body.as_slice()), (200, &b"ok"[..]));
        let failing = answered(&adyen, &[event(200, None), event(500, None)]);
        assert_eq!(failing.status, 500);
        assert!(failing.body.starts_with(b"{"), "the list, not [accepted]");
    }
}
