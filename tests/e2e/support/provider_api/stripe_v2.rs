//! Stripe's `GET /v2/core/events`, as its API reference describes it
//! (https://docs.stripe.com/api/v2/core/events/list): the thin events an
//! event destination delivers, newest first, for 30 days.
//!
//! - `Authorization: Bearer <secret key>` (https://docs.stripe.com/api-v2-overview),
//!   and a `Stripe-Version`, as the reference's examples send it: the fake
//!   refuses a request without one.
//! - `limit` (the page size: the reference states no most; the fake takes
//!   1 to 100, 20 when none is asked), `created[gt|gte|lt|lte]` (RFC
//!   3339), `types` (up to 20 exact names, repeated), `object_id`.
//! - The answer is `{"data", "next_page_url", "previous_page_url"}`; the
//!   next page's URL holds an opaque `page` token carrying the first
//!   request's filters, and is `null` on the last page.
//! - Errors are `{"error": {"type", "code", "message"}}`.
//! - A listed event has `data` (and `changes`), which only the API renders:
//!   the destination's delivery is the event without them.

use super::*;

/// What the first page asked for, carried by each `page` token.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Filters {
    limit: usize,
    gte: Option<u64>,
    gt: Option<u64>,
    lte: Option<u64>,
    lt: Option<u64>,
    types: Vec<String>,
    object_id: Option<String>,
    offset: usize,
}

fn error(status: StatusCode, kind: &str, code: &str, message: &str) -> Response {
    let body = json!({"error": {"type": kind, "code": code, "message": message}});
    (status, axum::Json(body)).into_response()
}

pub(super) async fn events(
    State(fake): State<Arc<Mutex<Fake>>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let target = logged("/v2/core/events", &query);
    let unauthorized = json!({"error": {"type": "invalid_request_error", "code": "invalid_api_key", "message": "Invalid API Key provided: sk_****"}});
    if let Some(refused) = gate(&fake, &headers, "GET", target, unauthorized) {
        return refused;
    }
    if headers.get("stripe-version").is_none() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "missing_stripe_version",
            "Requests to the /v2 namespace must name an API version in the Stripe-Version header.",
        );
    }
    let value = |name: &str| param(&query, name);
    let filters = match value("page") {
        Some(page) => {
            let decoded = page
                .strip_prefix("page_")
                .and_then(|token| hex::decode(token).ok())
                .and_then(|bytes| serde_json::from_slice::<Filters>(&bytes).ok());
            match decoded {
                Some(filters) => filters,
                None => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "invalid_request_error",
                        "invalid_page_token",
                        "The page token is not valid.",
                    )
                }
            }
        }
        None => {
            // A time that is not RFC 3339 names its parameter.
            let time = |name: &str| -> Result<Option<u64>, String> {
                match value(name) {
                    None => Ok(None),
                    Some(at) => idemgate_core::time::rfc3339_ms(&at)
                        .map(Some)
                        .ok_or_else(|| name.to_string()),
                }
            };
            let limit = value("limit").map_or(Some(20), |limit| limit.parse().ok());
            let Some(limit) = limit.filter(|limit| (1..=100).contains(limit)) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "invalid_limit",
                    "limit must be from 1 to 100.",
                );
            };
            let types: Vec<String> = query
                .iter()
                .filter(|(key, _)| key == "types")
                .map(|(_, value)| value.clone())
                .collect();
            if types.len() > 20 {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "too_many_types",
                    "types may name up to 20 event types.",
                );
            }
            let times = ["created[gte]", "created[gt]", "created[lte]", "created[lt]"].map(time);
            if let Some(Err(name)) = times.iter().find(|at| at.is_err()) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "invalid_timestamp",
                    &format!("{name} must be an RFC 3339 timestamp."),
                );
            }
            let [gte, gt, lte, lt] = times.map(|at| at.unwrap_or_default());
            Filters {
                limit,
                gte,
                gt,
                lte,
                lt,
                types,
                object_id: value("object_id"),
                offset: 0,
            }
        }
    };
    let fake = fake.lock().unwrap();
    let mut listed: Vec<&Value> = fake
        .stripe_v2
        .iter()
        .filter(|event| {
            let created =
                idemgate_core::time::rfc3339_ms(event["created"].as_str().unwrap()).unwrap();
            filters.gte.is_none_or(|at| created >= at)
                && filters.gt.is_none_or(|at| created > at)
                && filters.lte.is_none_or(|at| created <= at)
                && filters.lt.is_none_or(|at| created < at)
                && (filters.types.is_empty()
                    || filters
                        .types
                        .iter()
                        .any(|name| event["type"] == name.as_str()))
                && filters
                    .object_id
                    .as_ref()
                    .is_none_or(|id| event["related_object"]["id"] == id.as_str())
        })
        .collect();
    // Newest first; of one millisecond, the later added first.
    listed.reverse();
    listed.sort_by_key(|event| {
        std::cmp::Reverse(idemgate_core::time::rfc3339_ms(
            event["created"].as_str().unwrap(),
        ))
    });
    let page: Vec<&Value> = listed
        .iter()
        .skip(filters.offset)
        .take(filters.limit)
        .copied()
        .collect();
    let end = filters.offset + page.len();
    let link = |offset: usize| {
        let token = Filters {
            offset,
            ..filters.clone()
        };
        format!(
            "/v2/core/events?page=page_{}",
            hex::encode(serde_json::to_vec(&token).unwrap())
        )
    };
    let next = (end < listed.len()).then(|| link(end));
    let previous = (filters.offset > 0).then(|| link(filters.offset.saturating_sub(filters.limit)));
    axum::Json(json!({"data": page, "next_page_url": next, "previous_page_url": previous}))
        .into_response()
}
