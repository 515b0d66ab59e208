//! Alerts (SPEC §13, v4): where a person hears about trouble. Decision
//! events are observed per route and condition ([`Condition`]); the
//! alert book of each route ([`book::AlertBook`], kept by the route's
//! alert object through [`kept::KeptAlerts`]) decides when a condition fires, sends at most one alert per
//! route and condition per `ALERT_INTERVAL_SECONDS` with the count since
//! the last, a `resolved` one when it clears, and keeps every alert it
//! could not deliver in an outbox that it retries ([`message`] renders and
//! signs them).
//!
//! Why not idemgate's own async delivery: a JSON alert is signed as
//! Standard Webhooks, whose receivers refuse a `webhook-timestamp` more
//! than five minutes old, so every attempt must be signed afresh; an async
//! delivery forwards the bytes and headers it stored. The book's outbox is
//! that retry, with the signature made at each attempt.
//!
//! `ALERTS` is read apart from the routes: a broken `ALERTS` is shown in
//! health and sends nothing, and never stops a delivery.

pub mod book;
pub mod kept;
pub mod message;
mod send_gate;

pub use send_gate::{SendGate, SEND_BOUND_MS};

use serde::{Deserialize, Serialize};

use crate::json::{self, Json};

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// A receipt became dead.
    Dead,
    /// The oldest pending async delivery is older than its threshold.
    OldestPending,
    /// At least the threshold of 401s in five minutes.
    SignatureFailures,
    /// Forwards have kept failing for the threshold's seconds.
    OriginFailures,
    /// A reconciliation run filled events, or failed.
    Reconcile,
    /// Deliveries answered 429 by flow control.
    OriginBusy,
    /// A route that fails to load.
    Misconfigured,
}

impl Condition {
    pub const ALL: [Condition; 7] = [
        Condition::Dead,
        Condition::OldestPending,
        Condition::SignatureFailures,
        Condition::OriginFailures,
        Condition::Reconcile,
        Condition::OriginBusy,
        Condition::Misconfigured,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Condition::Dead => "dead",
            Condition::OldestPending => "oldest_pending",
            Condition::SignatureFailures => "signature_failures",
            Condition::OriginFailures => "origin_failures",
            Condition::Reconcile => "reconcile",
            Condition::OriginBusy => "origin_busy",
            Condition::Misconfigured => "misconfigured",
        }
    }

    /// The condition a decision event is a sign of, if any: its decision
    /// (`dead`, `failed`, `rejected`, ...) and its problem's name.
    pub fn of_decision(decision: &str, reason: Option<&str>) -> Option<Condition> {
        match (decision, reason) {
            ("dead", _) => Some(Condition::Dead),
            ("failed", _) => Some(Condition::OriginFailures),
            (_, Some("bad-signature")) => Some(Condition::SignatureFailures),
            (_, Some("origin-busy")) => Some(Condition::OriginBusy),
            (_, Some("misconfigured")) => Some(Condition::Misconfigured),
            _ => None,
        }
    }

    /// Whether it fires on its first sign: the others fire once a count or
    /// a duration passes a threshold.
    fn fires_at_once(self) -> bool {
        !matches!(
            self,
            Condition::SignatureFailures | Condition::OriginFailures
        )
    }
}

/// Where alerts go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sink {
    pub url: String,
    pub format: Format,
    /// The name of the Worker secret (`whsec_...`) a `json` sink's alerts
    /// are signed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `{"text": ...}`: Slack's incoming webhooks, and anything that takes
    /// them (Mattermost, Teams' Slack-compatible connectors).
    Slack,
    /// The alert as JSON, signed as Standard Webhooks.
    Json,
}

/// `ALERT_THRESHOLDS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    pub oldest_pending_seconds: u64,
    pub signature_failures: u64,
    pub origin_failures_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            oldest_pending_seconds: 900,
            signature_failures: 20,
            origin_failures_seconds: 300,
        }
    }
}

/// The deployment's alerting: its sinks, interval and thresholds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertsConfig {
    pub sinks: Vec<Sink>,
    pub interval_ms: u64,
    pub thresholds: Thresholds,
}

/// The window `signature_failures` counts over.
pub const SIGNATURE_WINDOW_MS: u64 = 300_000;

/// Reads `ALERTS`, `ALERT_INTERVAL_SECONDS` and `ALERT_THRESHOLDS`;
/// `Ok(None)` without `ALERTS`. An error names the variable at fault.
pub fn parse(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<AlertsConfig>, (&'static str, String)> {
    let Some(text) = lookup("ALERTS").filter(|text| !text.trim().is_empty()) else {
        return Ok(None);
    };
    let sinks = sinks(&text).map_err(|reason| ("ALERTS", reason))?;
    for sink in &sinks {
        if let Some(name) = &sink.secret {
            let value = lookup(name).ok_or_else(|| {
                (
                    "ALERTS",
                    format!("names the secret {name}, which is not set"),
                )
            })?;
            message::whsec_key(&value)
                .map_err(|reason| ("ALERTS", format!("the secret {name} {reason}")))?;
        }
    }
    let interval_seconds = match lookup("ALERT_INTERVAL_SECONDS") {
        None => 300,
        Some(text) => text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|seconds| (1..=86_400).contains(seconds))
            .ok_or(("ALERT_INTERVAL_SECONDS", "must be 1 to 86400".to_string()))?,
    };
    let thresholds = match lookup("ALERT_THRESHOLDS") {
        None => Thresholds::default(),
        Some(text) => thresholds(&text).map_err(|reason| ("ALERT_THRESHOLDS", reason))?,
    };
    Ok(Some(AlertsConfig {
        sinks,
        interval_ms: interval_seconds * 1_000,
        thresholds,
    }))
}

fn sinks(text: &str) -> Result<Vec<Sink>, String> {
    let parsed = json::parse(text.as_bytes()).map_err(|error| format!("is not JSON: {error}"))?;
    let Json::Array(entries) = parsed else {
        return Err("must be a list of sinks".into());
    };
    if entries.is_empty() {
        return Err("lists no sink".into());
    }
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            sink(entry).map_err(|reason| format!("{}: {reason}", sink_label(index, entry)))
        })
        .collect()
}

/// A sink as an error names it: its position in `ALERTS` (from 1) and its
/// URL's host, never the URL (SPEC §6: a Slack webhook's path is its
/// token, and a URL may carry a user and password).
fn sink_label(index: usize, entry: &Json) -> String {
    let host = match entry {
        Json::Object(members) => {
            members
                .iter()
                .find_map(|(name, value)| match (name.as_ref(), value) {
                    ("url", Json::String(url)) => crate::api_origin::host_for_display(url),
                    _ => None,
                })
        }
        _ => None,
    };
    match host {
        Some(host) => format!("sink {} ({host})", index + 1),
        None => format!("sink {}", index + 1),
    }
}

/// An error of sending to the sink at `index` (from the runtime's fetch,
/// which may quote the URL), with the URL and its parts replaced by the
/// sink's label.
pub fn scrub_sink_error(error: &str, index: usize, url: &str) -> String {
    let label = match crate::api_origin::host_for_display(url) {
        Some(host) => format!("sink {} ({host})", index + 1),
        None => format!("sink {}", index + 1),
    };
    let mut scrubbed = error.replace(url, &label);
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let path = &rest[authority.len()..];
    let user_info = authority.rsplit_once('@').map(|(user_info, _)| user_info);
    for part in [rest, path]
        .into_iter()
        .chain(user_info)
        .chain(user_info.into_iter().flat_map(|info| info.split(':')))
    {
        if part.len() >= 4 {
            scrubbed = scrubbed.replace(part, "[redacted]");
        }
    }
    scrubbed
}

fn sink(entry: &Json) -> Result<Sink, String> {
    let Json::Object(members) = entry else {
        return Err("each sink must be an object with url and format".into());
    };
    let text = |name: &str| -> Result<Option<String>, String> {
        match members.iter().find(|(member, _)| member == name) {
            None => Ok(None),
            Some((_, Json::String(value))) => Ok(Some(value.to_string())),
            Some(_) => Err(format!("a sink's {name} must be a string")),
        }
    };
    for (name, _) in members {
        if !["url", "format", "secret"].contains(&name.as_ref()) {
            return Err(format!(
                "a sink has no setting {name:?} (url, format, secret)"
            ));
        }
    }
    let url = text("url")?.ok_or("a sink needs a url")?;
    if !sink_url_allowed(&url) {
        return Err(
            "its url must be https:// to a host named by DNS, with no user or password (http:// only for 127.0.0.1, [::1] or localhost)"
                .into(),
        );
    }
    let format = match text("format")?.as_deref() {
        Some("slack") => Format::Slack,
        Some("json") => Format::Json,
        _ => return Err("a sink's format must be \"slack\" or \"json\"".into()),
    };
    let secret = text("secret")?;
    match (format, &secret) {
        (Format::Json, None) => {
            return Err("a json sink needs a secret (the name of a whsec_ Worker secret)".into())
        }
        (Format::Slack, Some(_)) => {
            return Err("a slack sink takes no secret: the URL is its credential".into())
        }
        (_, Some(name)) if !crate::config::is_secret_name(name) => {
            return Err("a sink's secret is the name of a Worker secret (A-Z, 0-9, _)".into())
        }
        _ => {}
    }
    Ok(Sink {
        url,
        format,
        secret,
    })
}

/// An `https://` URL, or `http://` to a loopback host (tests).
fn sink_url_allowed(url: &str) -> bool {
    let Some((scheme_and_host, _)) = url.split_once("://").map(|(scheme, rest)| {
        let end = rest.find('/').unwrap_or(rest.len());
        (format!("{scheme}://{}", &rest[..end]), ())
    }) else {
        return false;
    };
    !url.contains(char::is_whitespace)
        && crate::api_origin::parse_api_origin(&scheme_and_host).is_some()
}

fn thresholds(text: &str) -> Result<Thresholds, String> {
    let parsed = json::parse(text.as_bytes()).map_err(|error| format!("is not JSON: {error}"))?;
    let Json::Object(members) = parsed else {
        return Err("must be a JSON object".into());
    };
    let mut thresholds = Thresholds::default();
    for (name, value) in &members {
        let Json::Number(number) = value else {
            return Err(format!("{name} must be a number"));
        };
        let number: u64 = number
            .parse()
            .ok()
            .filter(|number| *number >= 1)
            .ok_or_else(|| format!("{name} must be a whole number of at least 1"))?;
        match name.as_ref() {
            "oldest_pending_seconds" => thresholds.oldest_pending_seconds = number,
            "signature_failures" => thresholds.signature_failures = number,
            "origin_failures_seconds" => thresholds.origin_failures_seconds = number,
            other => {
                return Err(format!(
                    "has no threshold {other:?} (oldest_pending_seconds, signature_failures, origin_failures_seconds)"
                ))
            }
        }
    }
    Ok(thresholds)
}

#[cfg(test)]
mod tests;
