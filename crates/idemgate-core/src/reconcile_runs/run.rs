//! One reconciliation run of a route (what its object keeps between runs
//! is [`super::route_runs`]).
//!
//! A run lists its window page by page and settles each event of the
//! route's types: its key's object says whether it has a receipt (or, for
//! GitHub, GitHub's own record does); one that has none is filled. A run
//! stops before it could pass its [`Limits`] (a Cron invocation's
//! subrequests and time), keeping the cursor, and the next run goes on
//! from it. An API error ends the run; a 429 or a 5xx also backs off.

use serde::{Deserialize, Serialize};

use crate::config::RouteConfig;
use crate::delivery::{Delivery, Identity};
pub use crate::engine::Presence;
use crate::reconcile::wire::{ApiError, ApiRequest, ApiResponse, ListedEvent, Window};
use crate::reconcile::{FillBy, Listed, ReconcileConfig};

/// What a run may spend: subrequests (API calls and calls to key objects)
/// and milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub subrequests: u32,
    pub duration_ms: u64,
}

/// Within a Cron invocation's 1,000 subrequests and its time, with room
/// for the invocation's own calls.
pub const RUN_LIMITS: Limits = Limits {
    subrequests: 900,
    duration_ms: 25_000,
};

/// The most a page can cost: the list request, and per event (at most 100
/// on every source's page) a call to its key's object and a re-send.
const PAGE_COST: u32 = 1 + 2 * 100;

/// How old a cursor's window may be before it is dropped for a new one:
/// its oldest events must still have their receipts, which the route
/// keeps `lookback_seconds` plus at least an hour (SPEC §11); 50 minutes
/// leave a run's own time, and its last forward's, inside that hour.
const CURSOR_MAX_AGE_SECONDS: u64 = 3_000;

/// Most settled event ids a cursor keeps (they are stored in one value).
const SETTLED_KEPT: usize = 2_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Schedule,
    Operator,
}

/// A run, as the operator API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub trigger: Trigger,
    /// Milliseconds since the Unix epoch.
    pub started_at: u64,
    pub ended_at: u64,
    /// The creation times listed, Unix seconds.
    pub window: Window,
    /// Events of the route's types the API listed in the window.
    pub listed: u64,
    /// Of those, the ones whose delivery had arrived.
    pub already_received: u64,
    /// Delivered by this run (or re-sent by the provider at its request).
    pub filled: u64,
    /// Not filled; the next run tries again.
    pub failed: u64,
    /// Listed events of other types, left out.
    pub other_types: u64,
    /// Of the listed events not received, those an earlier run already
    /// asked the provider to re-send (within the lookback): the provider
    /// retries its re-send itself, and each new ask would be one more
    /// delivery of the event (Paddle's replays each carry a new
    /// notification id).
    #[serde(default)]
    pub already_asked: u64,
    /// Whether the run reached its window's end; if not, the next run
    /// goes on from the cursor.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

/// Where an unfinished window goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub window: Window,
    /// The next page's cursor (`None`: the first page).
    pub page: Option<String>,
    /// What the cursor was made for (source, API, endpoint, types): a
    /// cursor kept across a change of them is dropped, so that a page of
    /// another endpoint is never followed.
    #[serde(default)]
    pub made_for: String,
    /// Events of this window already settled (the newest
    /// [`SETTLED_KEPT`]): a run that stopped inside a page lists it again,
    /// and GitHub lists one event on several pages; neither is settled,
    /// counted or re-sent twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled: Vec<String>,
}

/// What the key's object says of a reconciled event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyAnswer {
    /// It holds a receipt: the delivery arrived.
    AlreadyReceived,
    /// It had none, and delivered (accepted, or forwarded and answered 2xx).
    Filled,
    /// It had none, and the delivery failed (why, for the log).
    Failed(String),
}

/// What a run needs from the world.
#[allow(async_fn_in_trait)]
pub trait RunBackend {
    fn now_ms(&self) -> u64;
    /// Sends a request to the provider's API; `Err` when no answer came.
    async fn call_api(&self, request: ApiRequest) -> Result<ApiResponse, String>;
    /// Hands a reconciled delivery (body in its request) to its key's
    /// object, which delivers it only if it holds no receipt.
    async fn deliver(&self, delivery: Delivery) -> Result<KeyAnswer, String>;
    /// What the key's object holds of a delivery of it.
    async fn presence(&self, identity: &Identity) -> Result<Presence, String>;
    /// A `reconciled` line per filled event, a `reconcile-failed` line per
    /// failed run; each counted.
    fn log(&self, line: &ReconcileLine);
}

/// One log line of reconciliation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReconcileLine {
    pub event: &'static str,
    /// `reconciled` or `reconcile-failed`.
    pub decision: &'static str,
    pub route: String,
    pub run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The events a route asked its provider to re-send, by id, and when
/// (milliseconds), kept for the lookback ([`super::route_runs::RouteRuns`]).
pub type Asked = std::collections::BTreeMap<String, u64>;

/// What a route's object remembers for its next run: where an unfinished
/// window goes on (`None`: a new window), and what it asked to be re-sent.
pub struct Remembered<'a> {
    pub cursor: Option<Cursor>,
    pub asked: &'a Asked,
}

/// How a run ended: its record, the cursor to keep, and how long the API
/// asked it to wait (`Retry-After`).
pub struct Ended {
    pub record: RunRecord,
    pub cursor: Option<Cursor>,
    pub retry_after_ms: Option<u64>,
    /// The events this run asked the provider to re-send.
    pub asked: Vec<String>,
}

/// Runs one reconciliation of `route` from `cursor` (a new window when
/// `None`). `id` names the run.
pub async fn run<B: RunBackend>(
    backend: &B,
    route: &RouteConfig,
    config: &ReconcileConfig,
    remembered: Remembered<'_>,
    id: String,
    trigger: Trigger,
    limits: Limits,
) -> Ended {
    let Remembered { cursor, asked } = remembered;
    let started_at = backend.now_ms();
    // A cursor too old for the receipts of its window (a long outage or
    // back-off), or whose next page is no longer on the API's origin (the
    // route's `api_base` changed), is dropped: a new window starts.
    let cursor = cursor.filter(|cursor| {
        let fresh = config.window(started_at / 1_000).from;
        let on_base = cursor.page.as_deref().is_none_or(|page| {
            !page.starts_with("http")
                || crate::reconcile::wire::on_base(page, &config.api_base).is_some()
        });
        cursor.window.from.saturating_add(CURSOR_MAX_AGE_SECONDS) >= fresh
            && on_base
            && cursor.made_for == config.cursor_scope()
    });
    let settled: Vec<String> = cursor
        .as_ref()
        .map_or_else(Vec::new, |cursor| cursor.settled.clone());
    let mut run = Run {
        backend,
        route,
        config,
        spent: 0,
        limits,
        deadline: started_at.saturating_add(limits.duration_ms),
        record: RunRecord {
            id,
            trigger,
            started_at,
            ended_at: started_at,
            window: match &cursor {
                Some(cursor) => cursor.window,
                None => config.window(started_at / 1_000),
            },
            listed: 0,
            already_received: 0,
            filled: 0,
            failed: 0,
            other_types: 0,
            already_asked: 0,
            complete: false,
            error: None,
        },
        retry_after_ms: None,
        settled_set: settled.iter().cloned().collect(),
        held: Vec::new(),
        asked_before: asked,
        asked: Vec::new(),
        token: None,
        settled,
    };
    let page = cursor.and_then(|cursor| cursor.page);
    let next = run.pages(page).await;
    let Run {
        mut record,
        retry_after_ms,
        mut settled,
        asked,
        ..
    } = run;
    record.ended_at = backend.now_ms();
    record.complete = next.is_none() && record.error.is_none();
    if let Some(error) = &record.error {
        backend.log(&ReconcileLine {
            event: "reconcile",
            decision: "reconcile-failed",
            route: route.name.clone(),
            run_id: record.id.clone(),
            event_id: None,
            event_type: None,
            status: Some(error.status),
            problem: Some(error.problem.clone()),
        });
    }
    let cursor = next.map(|page| {
        let over = settled.len().saturating_sub(SETTLED_KEPT);
        settled.drain(..over);
        Cursor {
            window: record.window,
            page,
            made_for: config.cursor_scope(),
            settled,
        }
    });
    Ended {
        record,
        cursor,
        retry_after_ms,
        asked,
    }
}

struct Run<'a, B> {
    backend: &'a B,
    route: &'a RouteConfig,
    config: &'a ReconcileConfig,
    spent: u32,
    limits: Limits,
    deadline: u64,
    record: RunRecord,
    retry_after_ms: Option<u64>,
    /// The API's access token (PayPal's), never shown.
    token: Option<String>,
    /// Ids of this window's settled events, in the order settled.
    settled: Vec<String>,
    settled_set: std::collections::HashSet<String>,
    /// Events listed so far only in part (GitHub's, by their
    /// redeliveries), merged with what later pages say of them.
    held: Vec<ListedEvent>,
    /// What earlier runs asked the provider to re-send, and this run.
    asked_before: &'a Asked,
    asked: Vec<String>,
}

impl<B: RunBackend> Run<'_, B> {
    /// Lists from `page` on; answers where the next run goes on: `None`
    /// when the window is done, `Some(page)` when it is not (the first
    /// page when `Some(None)`).
    async fn pages(&mut self, mut page: Option<String>) -> Option<Option<String>> {
        let api = self.config.api();
        self.token = match api.token_request() {
            Some(request) => match self.call(request).await {
                Ok(response) => match api.read_token(&response) {
                    Ok(token) => Some(token),
                    Err(error) => return self.fail(error, page),
                },
                Err(error) => return self.fail(error, page),
            },
            None => None,
        };
        let token = self.token.clone();
        loop {
            if !self.can_spend(PAGE_COST) {
                return Some(page);
            }
            let request = api.list(self.record.window, page.as_deref(), token.as_deref());
            let response = match self.call(request).await {
                Ok(response) if response.status == 200 => response,
                Ok(response) => return self.fail(api.error(&response), page),
                Err(error) => return self.fail(error, page),
            };
            let listed = match api.read_page(self.record.window, &response) {
                Ok(listed) => listed,
                Err(error) => return self.fail(error, page),
            };
            for event in listed.events {
                if self.settled_set.contains(&event.id) {
                    continue;
                }
                let Some(event) = self.whole(event) else {
                    continue;
                };
                if !self.record.window.contains(event.created) {
                    continue;
                }
                if !self.config.types.matches(&event.event_type) {
                    self.record.other_types += 1;
                    continue;
                }
                // Out of time inside a page: the next run lists it again
                // and skips what this one settled.
                if self.backend.now_ms() >= self.deadline {
                    return Some(page);
                }
                self.record.listed += 1;
                self.settled_set.insert(event.id.clone());
                self.settled.push(event.id.clone());
                match self.settle(&event, token.as_deref()).await {
                    Ok(()) => {}
                    // The API refused a re-send: the run ends there, and
                    // the event is not settled after all: the next run
                    // lists its page again and tries it.
                    Err(error) => {
                        self.record.listed -= 1;
                        self.settled.pop();
                        self.settled_set.remove(&event.id);
                        return self.fail(error, page);
                    }
                }
            }
            match listed.next {
                Some(next) => page = Some(next),
                None => return None,
            }
        }
    }

    /// `event` merged with what earlier pages said of it, once all of it
    /// is read; `None` while it is held for a later page. An event still
    /// held when the listing ends was never listed whole in the window
    /// (its first delivery is older), so it is not settled.
    fn whole(&mut self, event: ListedEvent) -> Option<ListedEvent> {
        let event = match self.held.iter().position(|held| held.id == event.id) {
            Some(at) => {
                let mut held = self.held.remove(at);
                held.delivered_per_provider = Some(
                    held.delivered_per_provider == Some(true)
                        || event.delivered_per_provider == Some(true),
                );
                held.created = held.created.min(event.created);
                held.complete |= event.complete;
                held
            }
            None => event,
        };
        if event.complete {
            return Some(event);
        }
        self.held.push(event);
        None
    }

    fn can_spend(&self, cost: u32) -> bool {
        self.spent.saturating_add(cost) <= self.limits.subrequests
            && self.backend.now_ms() < self.deadline
    }

    async fn call(&mut self, request: ApiRequest) -> Result<ApiResponse, ApiError> {
        self.spent += 1;
        let response = self.backend.call_api(request).await.map_err(|_| ApiError {
            status: 0,
            problem: "the API could not be reached".into(),
        })?;
        if response.status == 429 || response.status >= 500 {
            self.retry_after_ms = response
                .header("retry-after")
                .and_then(|seconds| seconds.trim().parse::<u64>().ok())
                .map(|seconds| seconds.saturating_mul(1_000));
        }
        Ok(response)
    }

    /// Ends the run with the API's error, whatever the provider's message
    /// repeated of the credential taken out.
    fn fail(&mut self, mut error: ApiError, page: Option<String>) -> Option<Option<String>> {
        error.problem = self.redacted(error.problem);
        self.record.error = Some(error);
        Some(page)
    }

    /// `text` (a provider's words) with the credential, each of its parts
    /// (`client_id:secret`) and the run's token taken out.
    fn redacted(&self, mut text: String) -> String {
        let key = self.config.api_key.expose();
        let parts = std::iter::once(key)
            .chain(key.split(':'))
            .chain(self.token.as_deref());
        for secret in parts.filter(|secret| secret.len() >= 4) {
            text = text.replace(secret, "[redacted]");
        }
        text
    }

    /// Settles one event of the route's types. An `Err` is the API's
    /// refusal of a re-send, which ends the run.
    async fn settle(&mut self, event: &ListedEvent, token: Option<&str>) -> Result<(), ApiError> {
        let source = self.config.source;
        let arrived = match (source.entry().lists, source.fills_by()) {
            // The API says itself which deliveries the route answered 2xx.
            (Listed::Deliveries, _) => Ok(Some(event.delivered_per_provider == Some(true))),
            (_, FillBy::Delivering) => return self.deliver(event).await,
            (_, FillBy::AskingTheProvider) => match self.identity(event) {
                Ok(delivery) => {
                    self.spent += 1;
                    self.backend
                        .presence(&delivery.identity)
                        .await
                        .map_err(|message| format!("its key's object could not say: {message}"))
                        .map(|presence| match presence {
                            Presence::Arrived => Some(true),
                            Presence::Absent => Some(false),
                            Presence::Failed => None,
                        })
                }
                Err(reason) => Err(reason),
            },
        };
        match arrived {
            Ok(Some(true)) => {
                self.record.already_received += 1;
                Ok(())
            }
            Ok(Some(false)) => self.resend(event, token).await,
            // Its delivery came and its forward failed: a re-send would
            // carry another body (Paddle's notification id) and be refused
            // as another payload, so the run forwards the event itself,
            // through the key's object, which compares it by event id.
            Ok(None) => self.deliver(event).await,
            Err(reason) => {
                self.failed(event, reason);
                Ok(())
            }
        }
    }

    async fn deliver(&mut self, event: &ListedEvent) -> Result<(), ApiError> {
        let delivery = match self.identity(event) {
            Ok(delivery) => delivery,
            Err(reason) => {
                self.failed(event, reason);
                return Ok(());
            }
        };
        self.spent += 1;
        match self.backend.deliver(delivery).await {
            Ok(KeyAnswer::AlreadyReceived) => self.record.already_received += 1,
            Ok(KeyAnswer::Filled) => self.filled(event),
            Ok(KeyAnswer::Failed(reason)) => self.failed(event, reason),
            Err(message) => self.failed(event, format!("its key's object failed: {message}")),
        }
        Ok(())
    }

    async fn resend(&mut self, event: &ListedEvent, token: Option<&str>) -> Result<(), ApiError> {
        // A provider that retries its own re-send is asked once per event
        // within the lookback (the review's item 1, round 5: a broken
        // endpoint made every run ask again, up to 288 times).
        if self.config.source.retries_resends() && self.asked_before.contains_key(&event.id) {
            self.record.already_asked += 1;
            return Ok(());
        }
        let api = self.config.api();
        let Some(request) = api.resend(event, token) else {
            self.failed(event, "the provider cannot re-send it".into());
            return Ok(());
        };
        let response = self.call(request).await?;
        match api.read_resend(&response) {
            Ok(()) => {
                self.asked.push(event.id.clone());
                self.filled(event);
                Ok(())
            }
            // One event's refusal (gone, or not re-sendable) fails it
            // alone; the API's own trouble ends the run.
            Err(error) if matches!(error.status, 400 | 404 | 409 | 422) => {
                self.failed(event, error.problem);
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// The delivery the live webhook of `event` would have made: its key
    /// derived through the route's own key sources, which must find the
    /// provider's event id (the key both sides share).
    fn identity(&self, event: &ListedEvent) -> Result<Delivery, String> {
        let now = self.backend.now_ms() / 1_000;
        let delivery =
            crate::pipeline::admit_reconciled(self.route, &event.body, &event.id, now)
                .map_err(|problem| format!("its key could not be derived: {}", problem.detail()))?;
        if delivery.identity.key.as_str() != event.id {
            return Err(format!(
                "the route's key sources do not find its event id (they read {}): a live delivery of it would have another key",
                self.route.key_sources.iter().map(|source| source.label()).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(delivery)
    }

    fn filled(&mut self, event: &ListedEvent) {
        self.record.filled += 1;
        self.backend.log(&ReconcileLine {
            event: "reconcile",
            decision: "reconciled",
            route: self.route.name.clone(),
            run_id: self.record.id.clone(),
            event_id: Some(event.id.clone()),
            event_type: Some(event.event_type.clone()),
            status: None,
            problem: None,
        });
    }

    fn failed(&mut self, event: &ListedEvent, reason: String) {
        self.record.failed += 1;
        // A refused re-send's reason is the provider's words, which may
        // repeat the credential as the run's error may.
        let reason = self.redacted(reason);
        self.backend.log(&ReconcileLine {
            event: "reconcile",
            decision: "reconcile-event-failed",
            route: self.route.name.clone(),
            run_id: self.record.id.clone(),
            event_id: Some(event.id.clone()),
            event_type: Some(event.event_type.clone()),
            status: None,
            problem: Some(reason),
        });
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
