//! One route's settings, each resolved from the route's own table, then
//! the top-level variable, then the default, and checked.

use super::settings::{misconfigured, printable, Setting, Settings};
use super::values::{parse_origin_url, parse_schedule};
use super::{
    AsyncDelivery, BindingKind, DedupMode, Delivery, InFlightPolicy, OriginBinding, RouteConfig,
    Tenant, API_KEY_SOURCES, DEFAULT_RETRY_SCHEDULE, MAX_ASYNC_BODY_BYTES, MAX_BODY_BYTES_LIMIT,
    MAX_STORABLE_RESPONSE_BYTES, WEBHOOK_KEY_SOURCES,
};
use crate::flow::{FlowLimits, MAX_FLOW_SHARDS};
use crate::headers::is_header_name;
use crate::key::{KeyScope, KeySource};
use crate::problem::Problem;
use crate::receipt::{RetryableStatuses, StatusSet};
use crate::reconcile::FillBy;
use crate::routes::{is_operator, normalize_path};
use crate::signature::{scheme_names, SchemeSettings, SignatureScheme};

pub(super) fn route_config(
    name: &str,
    raw_path: &str,
    settings: &Settings,
) -> Result<RouteConfig, Problem> {
    let path = route_path(raw_path, settings)?;
    let (origin_url, origin_binding) = origin(settings)?;
    let mode = settings.choice(
        "DEDUP_MODE",
        DedupMode::Webhook,
        &[("webhook", DedupMode::Webhook), ("api", DedupMode::Api)],
    )?;
    let signature_scheme = signature_scheme(settings)?;
    let signature_tolerance_seconds =
        settings.number("SIGNATURE_TOLERANCE_SECONDS", 300, 1, 86_400)?;
    let key_sources = match settings.get("KEY_SOURCES")? {
        Some(list) => KeySource::parse_list(&list.value)
            .map_err(|reason| misconfigured(list.label, reason))?,
        None => KeySource::parse_list(match (signature_scheme.default_key_sources(), mode) {
            (Some(signed), _) => signed,
            (None, DedupMode::Webhook) => WEBHOOK_KEY_SOURCES,
            (None, DedupMode::Api) => API_KEY_SOURCES,
        })
        .expect("the default key sources parse"),
    };
    // A signature covers the body (and perhaps an id header), not the path:
    // by default a signed route is one key space, so a genuine delivery
    // replayed to another path under the route is the same key.
    let default_scope = if signature_scheme.is_none() {
        KeyScope::Path
    } else {
        KeyScope::Route
    };
    let key_scope = settings.choice(
        "KEY_SCOPE",
        default_scope,
        &[
            ("route", KeyScope::Route),
            ("path", KeyScope::Path),
            ("global", KeyScope::Route),
        ],
    )?;
    let tenant = match settings.get("TENANT_HEADER")? {
        Some(header) if header.value.eq_ignore_ascii_case("none") => Tenant::Shared,
        Some(header) if !is_header_name(&header.value) => {
            return Err(misconfigured(header.label, "is not a header name"))
        }
        Some(header) if !signature_scheme.signs_header(&header.value) => {
            return Err(misconfigured(
                header.label,
                format!(
                    "{} is not signed by SIGNATURE_SCHEME={}: a delivery re-sent with another value would be a new key, forwarded again",
                    printable(&header.value),
                    signature_scheme.name()
                ),
            ))
        }
        Some(header) => Tenant::Header {
            name: header.value.to_ascii_lowercase(),
            required: true,
        },
        // SPEC §3 (v3): in api mode, callers with different credentials
        // never share a key; a caller without any is anonymous.
        None if mode == DedupMode::Api && signature_scheme.is_none() => Tenant::Header {
            name: "authorization".into(),
            required: false,
        },
        None => Tenant::Shared,
    };
    // On a signed route a key may come only from what is signed.
    if let Some(reason) = key_sources
        .iter()
        .flat_map(|source| source.parts.iter())
        .find_map(|part| signature_scheme.allows(part).err())
    {
        return Err(misconfigured(settings.label("KEY_SOURCES"), reason));
    }
    if key_scope == KeyScope::Path && !signature_scheme.is_none() {
        return Err(misconfigured(
            settings.label("KEY_SCOPE"),
            format!(
                "path scope on a signed route: SIGNATURE_SCHEME={} does not sign the path, so a delivery re-sent to another path would be a new key, forwarded again",
                signature_scheme.name()
            ),
        ));
    }
    let delivery_async = settings.choice("DELIVERY", false, &[("sync", false), ("async", true)])?;
    let in_flight = settings.choice(
        "IN_FLIGHT",
        InFlightPolicy::Wait,
        &[
            ("wait", InFlightPolicy::Wait),
            ("conflict", InFlightPolicy::Conflict),
            ("ack", InFlightPolicy::Ack),
        ],
    )?;
    let wait_ms = settings.number("WAIT_MS", 10_000, 0, 60_000)?;
    let max_waiters = settings.number("MAX_WAITERS", 256, 0, 4_096)? as usize;
    let origin_timeout_ms = settings.number("ORIGIN_TIMEOUT_MS", 10_000, 100, 300_000)?;
    // The margin covers timers that fire late and calls that come back
    // late (a forward must end before another may take its key over). The
    // default lease keeps SPEC §8's 5 s, or the margin where that is more
    // (a timeout over 50 s), so a route that sets no lease is never
    // refused for it.
    let margin_ms = lease_margin_ms(origin_timeout_ms);
    let default_lease_ms = origin_timeout_ms + margin_ms.max(5_000);
    let lease_ms = settings.number("LEASE_MS", default_lease_ms, 1, 3_600_000)?;
    if lease_ms < origin_timeout_ms.saturating_add(margin_ms) {
        return Err(misconfigured(
            settings.label("LEASE_MS"),
            format!(
                "must exceed ORIGIN_TIMEOUT_MS ({origin_timeout_ms}) by at least {margin_ms} ms (1000 ms and a tenth of the timeout): a lease must outlive the forward it guards"
            ),
        ));
    }
    let retention_seconds = settings.number("RETENTION_SECONDS", 259_200, 60, 31_536_000)?;
    if retention_seconds * 1_000 <= lease_ms {
        return Err(misconfigured(
            settings.label("RETENTION_SECONDS"),
            format!("must be longer than LEASE_MS ({lease_ms} ms)"),
        ));
    }
    let retryable_statuses = match settings.get("RETRYABLE_STATUSES")? {
        Some(list) => RetryableStatuses::parse(&list.value)
            .map_err(|reason| misconfigured(list.label, reason))?,
        None => RetryableStatuses::default(),
    };
    let body_limit = if delivery_async {
        MAX_ASYNC_BODY_BYTES
    } else {
        MAX_BODY_BYTES_LIMIT
    };
    let max_body_bytes = settings.number("MAX_BODY_BYTES", 1_048_576, 1, body_limit)?;
    let max_stored_response_bytes = settings.number(
        "MAX_STORED_RESPONSE_BYTES",
        65_536,
        0,
        MAX_STORABLE_RESPONSE_BYTES,
    )?;
    let max_batch_events = settings.number(
        "MAX_BATCH_EVENTS",
        crate::batch::DEFAULT_MAX_EVENTS as u64,
        1,
        super::MAX_BATCH_EVENTS_LIMIT,
    )? as usize;
    let delivery = if delivery_async {
        let schedule = settings
            .get("RETRY_SCHEDULE")?
            .unwrap_or_else(|| Setting::default_of(DEFAULT_RETRY_SCHEDULE));
        let retry_schedule_ms = parse_schedule(&schedule.value)
            .map_err(|reason| misconfigured(schedule.label, reason))?;
        let ack_status = settings.number("ACK_STATUS", 202, 200, 299)? as u16;
        let ack_body = match settings.get("ACK_BODY")? {
            Some(body) if body.value.len() > 4_096 => {
                return Err(misconfigured(body.label, "must be at most 4096 bytes"))
            }
            Some(body) => Some(body.value),
            None => None,
        };
        let give_up_statuses = match settings.get("GIVE_UP_STATUSES")? {
            Some(list) => {
                StatusSet::parse(&list.value).map_err(|reason| misconfigured(list.label, reason))?
            }
            None => StatusSet::default(),
        };
        Delivery::Async(AsyncDelivery {
            retry_schedule_ms,
            ack_status,
            ack_body,
            give_up_statuses,
            dead_retention_seconds: settings.number(
                "DEAD_RETENTION_SECONDS",
                2_592_000,
                86_400,
                31_536_000,
            )?,
        })
    } else {
        Delivery::Sync
    };
    let max_in_flight = settings.optional_number("MAX_IN_FLIGHT", 1, 10_000)?;
    let rate_thousandths = settings.optional_thousandths("RATE_PER_SECOND", 100_000)?;
    let flow = (max_in_flight.is_some() || rate_thousandths.is_some()).then_some(FlowLimits {
        max_in_flight: max_in_flight.map(|max| max as u32),
        rate_thousandths,
        shards: 1,
    });
    let flow = match flow {
        Some(limits) => Some(
            limits
                .split(settings.number("FLOW_SHARDS", 1, 1, u64::from(MAX_FLOW_SHARDS))? as u16)
                .map_err(|reason| misconfigured("FLOW_SHARDS", reason))?,
        ),
        None => None,
    };
    // A receipt must outlive the lookback, a dead letter's too.
    let kept_seconds = match &delivery {
        Delivery::Async(terms) => retention_seconds.min(terms.dead_retention_seconds),
        Delivery::Sync => retention_seconds,
    };
    let reconcile = super::reconcile::reconcile_config(
        settings,
        &signature_scheme,
        &key_sources,
        kept_seconds,
    )?;
    let order = super::order::order_config(settings, &signature_scheme, delivery_async)?;
    let (forward_secret, forward_secret_name) = match settings.named_secret("FORWARD_SECRET")? {
        Some((name, secret)) => (Some(secret), Some(name)),
        None => (None, None),
    };
    // Where a forward carries no signature of the sender's, idemgate's is
    // the only proof the origin can check.
    let unsigned_forwards = match (signature_scheme.batch(), &reconcile) {
        (Some(_), _) => Some(format!(
            "SIGNATURE_SCHEME={} sends batches: each event is forwarded alone, without the sender's signature, which covered the whole batch",
            signature_scheme.name()
        )),
        (None, Some(reconcile)) if reconcile.source.fills_by() == FillBy::Delivering => Some(format!(
            "the route is reconciled from {}: an event the run fills is forwarded as the API listed it, with no signature of the sender's",
            reconcile.source.name()
        )),
        _ => None,
    };
    if let (None, Some(why)) = (&forward_secret, unsigned_forwards) {
        return Err(misconfigured(
            settings.label("FORWARD_SECRET"),
            format!("is required on this route: {why}, so the origin could verify nothing of such a forward without idemgate's signature"),
        ));
    }
    Ok(RouteConfig {
        name: name.to_string(),
        path,
        origin_url,
        origin_binding,
        mode,
        key_sources,
        key_scope,
        tenant,
        delivery,
        in_flight,
        wait_ms,
        max_waiters,
        origin_timeout_ms,
        lease_ms,
        retention_seconds,
        retryable_statuses,
        max_body_bytes,
        max_stored_response_bytes,
        max_batch_events,
        flow,
        signature_scheme,
        signature_tolerance_seconds,
        log_duplicates: settings.choice(
            "LOG_DUPLICATES",
            false,
            &[("true", true), ("false", false)],
        )?,
        forward_secret,
        forward_secret_name,
        reconcile,
        order,
        admin_token: settings.secret("ADMIN_TOKEN")?,
    })
}

pub(super) fn route_path(raw: &str, settings: &Settings) -> Result<String, Problem> {
    let label = settings.label("PATH");
    if !raw.starts_with('/') {
        return Err(misconfigured(label, "must start with /"));
    }
    let path =
        normalize_path(raw).map_err(|problem| misconfigured(label.clone(), problem.detail()))?;
    if is_operator(&path) {
        return Err(misconfigured(label, "/__idemgate is the operator API's"));
    }
    Ok(path)
}

fn signature_scheme(settings: &Settings) -> Result<SignatureScheme, Problem> {
    let Some(scheme) = settings.get("SIGNATURE_SCHEME")? else {
        return Ok(SignatureScheme::NONE);
    };
    let name = scheme.value.to_ascii_lowercase();
    if !scheme_names().any(|known| known == name) {
        return Err(misconfigured(
            scheme.label,
            format!(
                "unknown scheme {:?}; one of {}",
                printable(&scheme.value),
                scheme_names().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let value = |name: &'static str| {
        settings
            .get(name)
            .map(|found| found.map(|setting| setting.value))
    };
    let secrets: Vec<String> = settings
        .signing_secrets()?
        .iter()
        .map(|secret| secret.expose().to_string())
        .collect();
    let scheme_settings = SchemeSettings {
        secret: None,
        header: value("SIGNATURE_HEADER")?,
        encoding: value("SIGNATURE_ENCODING")?,
        prefix: value("SIGNATURE_PREFIX")?,
        url: value("SIGNATURE_URL")?,
        cert_hosts: value("SIGNATURE_CERT_HOSTS")?,
        api_base: value("SIGNATURE_API_BASE")?,
        client_id: settings
            .secret("PLAID_CLIENT_ID")?
            .map(|client_id| client_id.expose().to_string()),
    };
    SignatureScheme::configure_rotating(&name, &scheme_settings, &secrets)
        .map_err(|error| misconfigured(settings.label(error.setting), error.reason))
}

/// The least a lease must exceed the forward's timeout by (SPEC §8, v4):
/// a second, and a tenth of the timeout.
pub fn lease_margin_ms(origin_timeout_ms: u64) -> u64 {
    1_000_u64.max(origin_timeout_ms.div_ceil(10))
}

/// Where the route's forwards go (SPEC §5, v5): `origin` (`ORIGIN`)
/// names a binding (`service:NAME`, `mtls:NAME`) or is the URL;
/// `origin_url` (`ORIGIN_URL`) is the URL, which an mTLS binding needs and
/// a service binding may set (its host is then only what the origin
/// Worker sees; `https://NAME` when unset). A route's own settings come
/// before the top level's.
fn origin(settings: &Settings) -> Result<(String, Option<OriginBinding>), Problem> {
    let (own_origin, own_url) = (settings.own("ORIGIN")?, settings.own("ORIGIN_URL")?);
    let (origin, url) = match (own_origin, own_url) {
        (None, None) => (settings.top("ORIGIN")?, settings.top("ORIGIN_URL")?),
        own => own,
    };
    let binding = match origin {
        None => None,
        Some(origin) => match origin.value.clone().split_once(':') {
            Some((kind @ ("service" | "mtls"), name)) => {
                if !is_binding_name(name) {
                    return Err(misconfigured(
                        origin.label,
                        "names a binding that is not a binding's name (letters, digits and _)",
                    ));
                }
                let kind = match kind {
                    "service" => BindingKind::Service,
                    _ => BindingKind::Mtls,
                };
                Some((
                    origin,
                    OriginBinding {
                        kind,
                        name: name.to_string(),
                    },
                ))
            }
            _ if url.is_none() => return Ok((parse_origin_url(&origin)?, None)),
            _ => {
                return Err(misconfigured(
                    origin.label,
                    "is a URL and origin_url is set too: set one of them",
                ))
            }
        },
    };
    // A binding without a URL of its own may take the top level's.
    let url = match (&binding, url) {
        (Some(_), None) => settings.top("ORIGIN_URL")?,
        (_, url) => url,
    };
    match (binding, url) {
        (None, Some(url)) => Ok((parse_origin_url(&url)?, None)),
        (None, None) => Err(misconfigured(
            settings.label("ORIGIN_URL"),
            if settings.route.is_some() {
                "is required (or set the top-level ORIGIN_URL)"
            } else {
                "is required and not set"
            },
        )),
        (Some((_, binding)), Some(url)) => Ok((parse_origin_url(&url)?, Some(binding))),
        (Some((_, binding)), None) if binding.kind == BindingKind::Service => Ok((
            format!("https://{}", binding.name.to_ascii_lowercase()),
            Some(binding),
        )),
        (Some((origin, _)), None) => Err(misconfigured(
            origin.label,
            "names an mTLS certificate binding: set origin_url to the https URL it reaches",
        )),
    }
}

fn is_binding_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}
