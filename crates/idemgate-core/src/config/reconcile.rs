//! A route's `reconcile` table (SPEC §11, v4), checked: every field is
//! blamed by its own name, and the API key is read by the name of its
//! secret, never shown.

use super::settings::{misconfigured, printable, Settings};
use crate::api_origin::parse_api_origin;
use crate::json::{Json, Member};
use crate::key::{KeyPart, KeySource};
use crate::problem::Problem;
use crate::reconcile::{Endpoint, ReconcileConfig, Source, TypeFilter};
use crate::signature::SignatureScheme;

const FIELDS: &[&str] = &[
    "source",
    "api_key",
    "types",
    "every_seconds",
    "lookback_seconds",
    "grace_seconds",
    "api_base",
    "endpoint",
];

/// An hour: what a lookback leaves of the route's retention, so that a
/// receipt still says its event arrived when the event is last listed.
const RETENTION_MARGIN_SECONDS: u64 = 3_600;

/// The route's `reconcile`, if it has one.
pub(super) fn reconcile_config(
    settings: &Settings,
    scheme: &SignatureScheme,
    key_sources: &[KeySource],
    retention_seconds: u64,
) -> Result<Option<ReconcileConfig>, Problem> {
    let Some((route, fields)) = settings.route else {
        return Ok(None);
    };
    let Some((_, table)) = fields.iter().find(|(field, _)| field == "reconcile") else {
        return Ok(None);
    };
    let label = |field: &str| format!("ROUTES.{route}.reconcile.{field}");
    let Json::Object(table) = table else {
        return Err(misconfigured(
            format!("ROUTES.{route}.reconcile"),
            "must be a table (source, api_key, types, ...)",
        ));
    };
    if let Some((field, _)) = table
        .iter()
        .find(|(field, _)| !FIELDS.contains(&field.as_ref()))
    {
        return Err(misconfigured(
            label(&printable(field)),
            "is not a reconcile setting",
        ));
    }
    let text = |field: &str| -> Result<Option<String>, Problem> {
        match member(table, field) {
            None => Ok(None),
            Some(Json::String(text)) if !text.trim().is_empty() => {
                Ok(Some(text.trim().to_string()))
            }
            Some(_) => Err(misconfigured(label(field), "must be a non-empty string")),
        }
    };
    let number = |field: &str, default: u64, least: u64, most: u64| -> Result<u64, Problem> {
        let value = match member(table, field) {
            None => return Ok(default),
            Some(Json::Number(number)) => number.parse::<u64>().ok(),
            Some(Json::String(number)) => number.trim().parse::<u64>().ok(),
            Some(_) => None,
        };
        match value {
            Some(value) if (least..=most).contains(&value) => Ok(value),
            _ => Err(misconfigured(
                label(field),
                format!("must be a whole number from {least} to {most}"),
            )),
        }
    };

    let names = Source::all()
        .map(Source::name)
        .collect::<Vec<_>>()
        .join(", ");
    let source_name = text("source")?
        .ok_or_else(|| misconfigured(label("source"), format!("is required: one of {names}")))?;
    let source = Source::parse(&source_name).ok_or_else(|| {
        misconfigured(
            label("source"),
            format!(
                "unknown source {:?}; one of {names}",
                printable(&source_name)
            ),
        )
    })?;
    if scheme.name() != source.scheme() {
        return Err(misconfigured(
            label("source"),
            format!(
                "{} lists the deliveries of SIGNATURE_SCHEME={}, and this route verifies {}",
                source.name(),
                source.scheme(),
                scheme.name()
            ),
        ));
    }
    let api_key_name = text("api_key")?.ok_or_else(|| {
        misconfigured(
            label("api_key"),
            "is required: the name of the secret holding the API key",
        )
    })?;
    let api_key = settings.named(&label("api_key"), &api_key_name)?;
    let types = match member(table, "types") {
        Some(Json::Array(items)) => {
            let names = items
                .iter()
                .map(|item| match item {
                    Json::String(name) => Ok(name.to_string()),
                    _ => Err(misconfigured(label("types"), "is a list of event types")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            TypeFilter::parse(&names).map_err(|reason| misconfigured(label("types"), reason))?
        }
        Some(_) => return Err(misconfigured(label("types"), "is a list of event types")),
        None => {
            return Err(misconfigured(
                label("types"),
                "is required: the account's API lists every type, also those the endpoint never subscribed to ([\"*\"] for every type)",
            ))
        }
    };
    let every_seconds = number("every_seconds", 600, 60, 86_400)?;
    let listed_for = source.listed_for_seconds();
    let lookback_seconds = number("lookback_seconds", 172_800.min(listed_for), 60, listed_for)?;
    if lookback_seconds.saturating_add(RETENTION_MARGIN_SECONDS) > retention_seconds {
        return Err(misconfigured(
            label("lookback_seconds"),
            format!(
                "must be shorter than RETENTION_SECONDS, and DEAD_RETENTION_SECONDS on an async route ({retention_seconds}), by at least an hour: an event listed after its receipt expired would be delivered again"
            ),
        ));
    }
    let grace_seconds = number("grace_seconds", 600, 0, 86_400)?;
    if grace_seconds >= lookback_seconds {
        return Err(misconfigured(
            label("grace_seconds"),
            "must be shorter than lookback_seconds",
        ));
    }
    // A receipt the run fills (no earlier than grace_seconds after its
    // event) must outlive the provider's own retries of that event.
    let horizon = source.retry_horizon_seconds();
    if retention_seconds.saturating_add(grace_seconds) < horizon {
        return Err(misconfigured(
            format!("ROUTES.{route}.reconcile"),
            format!(
                "{} may deliver an event itself for {horizon} s after it happens (its own retries): RETENTION_SECONDS, and DEAD_RETENTION_SECONDS on an async route ({retention_seconds}), plus grace_seconds ({grace_seconds}) must reach that, or a late retry of an event this route filled finds no receipt and is forwarded again; raise the retention to at least {}",
                source.name(),
                horizon - grace_seconds
            ),
        ));
    }
    // The run finds an event's receipt by the key its live delivery has: a
    // key source ahead of the event id that reads what a listed event does
    // not carry (a header, a form field), or its bytes as sent, would key
    // the live delivery apart from the listed one.
    if source.keys_listed_events() {
        if let Some(first) = key_sources.first().filter(|source| {
            !source
                .parts
                .iter()
                .all(|part| matches!(part, KeyPart::JsonPointer(_)))
        }) {
            return Err(misconfigured(
                settings.label("KEY_SOURCES"),
                format!(
                    "{} is read ahead of the event id on a route reconciled from {}: a listed event has no headers, form fields or sender's bytes, so its key would differ from its live delivery's and it would be forwarded twice; put the event id's json: source first",
                    first.label(),
                    source.name()
                ),
            ));
        }
    }
    let api_base = match text("api_base")? {
        Some(base) => parse_api_origin(&base).ok_or_else(|| {
            misconfigured(
                label("api_base"),
                "must be an https:// origin (http:// only for 127.0.0.1, [::1] or localhost), without a path",
            )
        })?,
        None => source.default_api_base().to_string(),
    };
    let endpoint = match (source.entry().endpoint, text("endpoint")?) {
        (Endpoint::Required { valid, .. }, Some(endpoint)) if valid(&endpoint) => Some(endpoint),
        (Endpoint::Required { what, .. }, _) => {
            return Err(misconfigured(
                label("endpoint"),
                format!("is required for {}: {what}", source.name()),
            ))
        }
        (Endpoint::OrSigningSecret { valid, .. }, Some(endpoint)) if valid(&endpoint) => {
            Some(endpoint)
        }
        (Endpoint::OrSigningSecret { wrong, .. }, Some(_)) => {
            return Err(misconfigured(label("endpoint"), wrong))
        }
        (Endpoint::OrSigningSecret { .. }, None) => settings
            .signing_secrets()?
            .first()
            .map(|secret| secret.expose().to_string()),
        (Endpoint::Unused, Some(_)) => {
            return Err(misconfigured(
                label("endpoint"),
                format!("is not used by {}", source.name()),
            ))
        }
        (Endpoint::Unused, None) => None,
    };
    Ok(Some(ReconcileConfig {
        source,
        api_key_name,
        api_key,
        types,
        every_seconds,
        lookback_seconds,
        grace_seconds,
        api_base,
        endpoint,
    }))
}

fn member<'a>(table: &'a [Member<'a>], field: &str) -> Option<&'a Json<'a>> {
    table
        .iter()
        .find(|(name, _)| name == field)
        .map(|(_, value)| value)
}
