//! Typed configuration (SPEC §0 and §8): the routes of a deployment, each
//! with every setting resolved from the route's own table, then the
//! top-level variable, then the default.
//!
//! [`Config::from_lookup`] takes any `name -> value` function, so the rules
//! are tested natively; the Workers adapter passes `env` (vars, secrets,
//! and `ROUTES` as JSON text). An invalid value is a
//! [`Problem::Misconfigured`] naming the variable (`WAIT_MS`) or the
//! route's field (`ROUTES.stripe.signature`): never a silent default, and
//! never a secret's value or a URL's credentials in the detail.

use crate::json::{self, Json};
use crate::key::{KeyScope, KeySource};
use crate::problem::Problem;
use crate::receipt::{RetryableStatuses, StatusSet};
use crate::routes::{is_operator, is_route_name, normalize_path};
use crate::signature::{scheme_names, SchemeSettings, Secret, SignatureScheme};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DedupMode {
    Webhook,
    Api,
}

/// What a duplicate gets while the first delivery of its key is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlightPolicy {
    Wait,
    Conflict,
    Ack,
}

/// Whose key space a delivery is in, besides its route's (SPEC §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tenant {
    /// One key space for every caller (`TENANT_HEADER=none`, or unset on
    /// a webhook route).
    Shared,
    /// The header's value (its hash) separates key spaces. Without it, a
    /// request is 400 `missing-tenant` when `required` (an explicit
    /// `TENANT_HEADER`), else anonymous (api mode's `Authorization`).
    Header { name: String, required: bool },
}

/// SPEC §2b: forward while the sender waits, or acknowledge at once and
/// deliver with retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sync,
    Async(AsyncDelivery),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsyncDelivery {
    /// Delays before each retry, in milliseconds (before jitter).
    pub retry_schedule_ms: Vec<u64>,
    pub ack_status: u16,
    /// `ACK_BODY` verbatim, or `None` for the JSON acknowledgement.
    pub ack_body: Option<String>,
    /// `GIVE_UP_STATUSES`: origin statuses that make a receipt dead at once.
    pub give_up_statuses: StatusSet,
    /// How long a dead letter is kept for the operator.
    pub dead_retention_seconds: u64,
}

/// One route: where its deliveries go and how they are deduplicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConfig {
    pub name: String,
    /// The normalised path prefix this route covers.
    pub path: String,
    /// Base URL the request path and query are appended to; no trailing slash.
    pub origin_url: String,
    pub mode: DedupMode,
    pub key_sources: Vec<KeySource>,
    pub key_scope: KeyScope,
    pub tenant: Tenant,
    pub delivery: Delivery,
    pub in_flight: InFlightPolicy,
    pub wait_ms: u64,
    pub max_waiters: usize,
    pub origin_timeout_ms: u64,
    pub lease_ms: u64,
    pub retention_seconds: u64,
    pub retryable_statuses: RetryableStatuses,
    pub max_body_bytes: u64,
    pub max_stored_response_bytes: u64,
    pub signature_scheme: SignatureScheme,
    pub signature_tolerance_seconds: u64,
    pub log_duplicates: bool,
    pub forward_secret: Option<Secret>,
    /// The name `forward_secret` is read by (`FORWARD_SECRET`, or the
    /// route's own), which an async receipt keeps to sign later attempts.
    pub forward_secret_name: Option<String>,
    pub admin_token: Option<Secret>,
}

/// A deployment: its routes, and the top-level admin token (which guards
/// the operator routes that name no route, such as `/__idemgate/stats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub routes: Vec<RouteConfig>,
    /// Whether `ROUTES` is set (otherwise one route, `default`, at `/`).
    pub explicit_routes: bool,
    pub admin_token: Option<Secret>,
    /// `SWEEP_LIMIT`: objects one run of the scheduled sweep wakes.
    pub sweep_limit: u32,
}

/// The largest replay body a receipt can hold. Durable Object SQLite stores
/// at most 2 MB per row; the receipt row also holds its record (headers,
/// attempts), so half of that is left to the body.
pub const MAX_STORABLE_RESPONSE_BYTES: u64 = 1_048_576;
/// The largest body an async route accepts: it is stored whole in one row.
pub const MAX_ASYNC_BODY_BYTES: u64 = 1_048_576;
/// Workers refuse request bodies over 100 MB on most plans.
pub const MAX_BODY_BYTES_LIMIT: u64 = 104_857_600;

const WEBHOOK_KEY_SOURCES: &str =
    "header:Idempotency-Key,header:webhook-id,json:/transaction_id,json:/id";
const API_KEY_SOURCES: &str = "header:Idempotency-Key";
const DEFAULT_RETRY_SCHEDULE: &str = "10s,1m,5m,30m,2h,6h,12h,24h,24h";

impl Config {
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, Problem> {
        let top = Settings {
            env: &lookup,
            route: None,
        };
        let admin_token = top.secret("ADMIN_TOKEN")?;
        let sweep_limit = top.number(
            "SWEEP_LIMIT",
            crate::sweep::DEFAULT_LIMIT.into(),
            1,
            crate::sweep::MAX_LIMIT.into(),
        )? as u32;
        let Some(routes_text) = top.get("ROUTES")? else {
            let route = route_config("default", "/", &top)?;
            return Ok(Config {
                routes: vec![route],
                explicit_routes: false,
                admin_token,
                sweep_limit,
            });
        };
        let parsed = json::parse(routes_text.value.as_bytes())
            .map_err(|error| misconfigured("ROUTES", format!("is not JSON: {error}")))?;
        let Json::Object(entries) = parsed else {
            return Err(misconfigured(
                "ROUTES",
                "must be a table (an object) of routes by name",
            ));
        };
        if entries.is_empty() {
            return Err(misconfigured("ROUTES", "names no route"));
        }
        let mut routes: Vec<RouteConfig> = Vec::with_capacity(entries.len());
        for (name, table) in &entries {
            if !is_route_name(name) {
                return Err(misconfigured(
                    format!("ROUTES.{}", printable(name)),
                    "a route name is 1 to 32 characters of a-z, 0-9 and -",
                ));
            }
            let Json::Object(fields) = table else {
                return Err(misconfigured(
                    format!("ROUTES.{name}"),
                    "must be a table of settings",
                ));
            };
            let settings = Settings {
                env: &lookup,
                route: Some((name, fields)),
            };
            settings.check_fields()?;
            let path = settings
                .get("PATH")?
                .ok_or_else(|| misconfigured(format!("ROUTES.{name}.path"), "is required"))?;
            let route = route_config(name, &path.value, &settings)?;
            if let Some(other) = routes.iter().find(|other| other.path == route.path) {
                return Err(misconfigured(
                    format!("ROUTES.{name}.path"),
                    format!("{:?} is also the path of route {}", route.path, other.name),
                ));
            }
            routes.push(route);
        }
        Ok(Config {
            routes,
            explicit_routes: true,
            admin_token,
            sweep_limit,
        })
    }

    /// The route named `name`.
    pub fn route(&self, name: &str) -> Option<&RouteConfig> {
        self.routes.iter().find(|route| route.name == name)
    }

    /// The route whose path covers the normalised `path` most closely.
    pub fn route_for(&self, path: &str) -> Result<&RouteConfig, Problem> {
        crate::routes::longest_match(
            self.routes
                .iter()
                .enumerate()
                .map(|(index, route)| (index, route.path.as_str())),
            path,
        )
        .map(|index| &self.routes[index])
        .ok_or(Problem::NoRoute)
    }
}

impl RouteConfig {
    /// Whether this route acknowledges at once and delivers later.
    pub fn is_async(&self) -> bool {
        matches!(self.delivery, Delivery::Async(_))
    }
}

fn route_config(name: &str, raw_path: &str, settings: &Settings) -> Result<RouteConfig, Problem> {
    let path = route_path(raw_path, settings)?;
    let origin = settings.get("ORIGIN_URL")?.ok_or_else(|| {
        misconfigured(
            settings.label("ORIGIN_URL"),
            if settings.route.is_some() {
                "is required (or set the top-level ORIGIN_URL)"
            } else {
                "is required and not set"
            },
        )
    })?;
    let origin_url = parse_origin_url(&origin)?;
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
    let lease_ms = settings.number("LEASE_MS", origin_timeout_ms + 5_000, 1, 3_600_000)?;
    if lease_ms <= origin_timeout_ms {
        return Err(misconfigured(
            settings.label("LEASE_MS"),
            format!(
                "must exceed ORIGIN_TIMEOUT_MS ({origin_timeout_ms}): a lease must outlive the forward it guards"
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
    let (forward_secret, forward_secret_name) = match settings.named_secret("FORWARD_SECRET")? {
        Some((name, secret)) => (Some(secret), Some(name)),
        None => (None, None),
    };
    Ok(RouteConfig {
        name: name.to_string(),
        path,
        origin_url,
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
        signature_scheme,
        signature_tolerance_seconds,
        log_duplicates: settings.choice(
            "LOG_DUPLICATES",
            false,
            &[("true", true), ("false", false)],
        )?,
        forward_secret,
        forward_secret_name,
        admin_token: settings.secret("ADMIN_TOKEN")?,
    })
}

fn route_path(raw: &str, settings: &Settings) -> Result<String, Problem> {
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
    let scheme_settings = SchemeSettings {
        secret: settings
            .secret("SIGNING_SECRET")?
            .map(|secret| secret.expose().to_string()),
        header: value("SIGNATURE_HEADER")?,
        encoding: value("SIGNATURE_ENCODING")?,
        prefix: value("SIGNATURE_PREFIX")?,
        url: value("SIGNATURE_URL")?,
    };
    SignatureScheme::configure(&name, &scheme_settings)
        .map_err(|error| misconfigured(settings.label(error.setting), error.reason))
}

/// `10s,1m,5m,...`: each delay a whole number of `s`, `m`, `h` or `d`,
/// from 1 s to 7 days; 1 to 20 of them.
pub fn parse_schedule(text: &str) -> Result<Vec<u64>, String> {
    let delays = text
        .split(',')
        .map(|entry| {
            let entry = entry.trim();
            let (digits, unit) = entry.split_at(
                entry
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(entry.len()),
            );
            let scale = match unit {
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => {
                    return Err(format!(
                        "{entry:?} is not a delay such as 10s, 5m, 2h or 1d"
                    ))
                }
            };
            let count: u64 = digits
                .parse()
                .map_err(|_| format!("{entry:?} is not a delay such as 10s, 5m, 2h or 1d"))?;
            let ms = count
                .checked_mul(scale)
                .filter(|ms| (1_000..=7 * 86_400_000).contains(ms));
            ms.ok_or_else(|| format!("{entry:?} is not between 1s and 7d"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    if delays.len() > 20 {
        return Err("lists more than 20 delays".into());
    }
    Ok(delays)
}

fn misconfigured(variable: impl Into<String>, reason: impl Into<String>) -> Problem {
    Problem::Misconfigured {
        variable: variable.into(),
        reason: reason.into(),
    }
}

/// A name from configuration, safe to print (no control characters).
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// A setting's value and the name to blame when it is wrong.
struct Setting {
    value: String,
    label: String,
}

impl Setting {
    fn default_of(value: &str) -> Setting {
        Setting {
            value: value.to_string(),
            label: "default".to_string(),
        }
    }
}

/// Where a route's settings come from: its own table, then the top level.
struct Settings<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    route: Option<(&'a str, &'a [(String, Json)])>,
}

/// The route-table field names of a variable: its lowercase name, and the
/// shorter names SPEC §0's example uses.
fn field_names(variable: &str) -> Vec<String> {
    let mut names = vec![variable.to_ascii_lowercase()];
    match variable {
        "ORIGIN_URL" => names.push("origin".into()),
        "DEDUP_MODE" => names.push("mode".into()),
        "SIGNATURE_SCHEME" => names.push("signature".into()),
        _ => {}
    }
    names
}

/// Every variable a route may set.
const ROUTE_VARIABLES: &[&str] = &[
    "PATH",
    "ORIGIN_URL",
    "DEDUP_MODE",
    "KEY_SOURCES",
    "KEY_SCOPE",
    "TENANT_HEADER",
    "DELIVERY",
    "IN_FLIGHT",
    "WAIT_MS",
    "MAX_WAITERS",
    "ORIGIN_TIMEOUT_MS",
    "LEASE_MS",
    "RETENTION_SECONDS",
    "RETRYABLE_STATUSES",
    "RETRY_SCHEDULE",
    "GIVE_UP_STATUSES",
    "DEAD_RETENTION_SECONDS",
    "ACK_STATUS",
    "ACK_BODY",
    "MAX_BODY_BYTES",
    "MAX_STORED_RESPONSE_BYTES",
    "SIGNATURE_SCHEME",
    "SIGNATURE_TOLERANCE_SECONDS",
    "SIGNATURE_HEADER",
    "SIGNATURE_ENCODING",
    "SIGNATURE_PREFIX",
    "SIGNATURE_URL",
    "LOG_DUPLICATES",
    "SIGNING_SECRET",
    "FORWARD_SECRET",
    "ADMIN_TOKEN",
];

impl Settings<'_> {
    fn label(&self, variable: &str) -> String {
        match self.route {
            Some((route, fields)) => {
                let names = field_names(variable);
                let used = names
                    .iter()
                    .find(|name| fields.iter().any(|(field, _)| field == *name))
                    .unwrap_or(&names[0]);
                format!("ROUTES.{route}.{used}")
            }
            None => variable.to_string(),
        }
    }

    /// A misspelt setting would otherwise be silently ignored.
    fn check_fields(&self) -> Result<(), Problem> {
        let Some((route, fields)) = self.route else {
            return Ok(());
        };
        for (field, _) in fields {
            let known = ROUTE_VARIABLES
                .iter()
                .any(|variable| field_names(variable).contains(field));
            if !known {
                return Err(misconfigured(
                    format!("ROUTES.{route}.{}", printable(field)),
                    "is not a setting (SPEC §8 names them; lowercase)",
                ));
            }
        }
        Ok(())
    }

    /// The route's own field, if any (a value as text, and its label).
    fn own(&self, variable: &str) -> Result<Option<Setting>, Problem> {
        let Some((route, fields)) = self.route else {
            return Ok(None);
        };
        for name in field_names(variable) {
            let Some((_, value)) = fields.iter().find(|(field, _)| *field == name) else {
                continue;
            };
            let label = format!("ROUTES.{route}.{name}");
            let text = match value {
                Json::String(text) => text.clone(),
                Json::Number(text) => text.clone(),
                Json::Bool(flag) => flag.to_string(),
                _ => {
                    return Err(misconfigured(
                        label,
                        "must be a string, a number or a boolean",
                    ))
                }
            };
            if text.trim().is_empty() {
                return Err(misconfigured(label, "is set but empty"));
            }
            return Ok(Some(Setting {
                value: text.trim().to_string(),
                label,
            }));
        }
        Ok(None)
    }

    /// The top-level variable, if set.
    fn top(&self, variable: &str) -> Result<Option<Setting>, Problem> {
        match (self.env)(variable) {
            None => Ok(None),
            Some(value) if value.trim().is_empty() => {
                Err(misconfigured(variable, "is set but empty"))
            }
            Some(value) => Ok(Some(Setting {
                value: value.trim().to_string(),
                label: variable.to_string(),
            })),
        }
    }

    fn get(&self, variable: &str) -> Result<Option<Setting>, Problem> {
        match self.own(variable)? {
            Some(setting) => Ok(Some(setting)),
            None if variable == "PATH" => Ok(None),
            None => self.top(variable),
        }
    }

    /// A secret: a route names it (the Worker secret, or locally the
    /// `.dev.vars` entry or `--var`, of that name); the top level holds it.
    fn secret(&self, variable: &str) -> Result<Option<Secret>, Problem> {
        Ok(self.named_secret(variable)?.map(|(_, secret)| secret))
    }

    /// A secret and the name it is read by.
    fn named_secret(&self, variable: &str) -> Result<Option<(String, Secret)>, Problem> {
        if let Some(named) = self.own(variable)? {
            let value = (self.env)(&named.value).filter(|value| !value.is_empty());
            return match value {
                Some(value) => Ok(Some((named.value.clone(), Secret::new(value)))),
                None => Err(misconfigured(
                    named.label,
                    format!(
                        "names the secret {}, which is not set (wrangler secret put {})",
                        printable(&named.value),
                        printable(&named.value)
                    ),
                )),
            };
        }
        match (self.env)(variable) {
            None => Ok(None),
            Some(value) if value.is_empty() => Err(misconfigured(variable, "is set but empty")),
            Some(value) => Ok(Some((variable.to_string(), Secret::new(value)))),
        }
    }

    fn choice<T: Copy>(
        &self,
        variable: &str,
        default: T,
        options: &[(&str, T)],
    ) -> Result<T, Problem> {
        let Some(setting) = self.get(variable)? else {
            return Ok(default);
        };
        options
            .iter()
            .find(|(label, _)| label.eq_ignore_ascii_case(&setting.value))
            .map(|(_, choice)| *choice)
            .ok_or_else(|| {
                let labels: Vec<&str> = options.iter().map(|(label, _)| *label).collect();
                misconfigured(
                    setting.label,
                    format!(
                        "{:?} is not one of {}",
                        printable(&setting.value),
                        labels.join(", ")
                    ),
                )
            })
    }

    fn number(
        &self,
        variable: &str,
        default: u64,
        minimum: u64,
        maximum: u64,
    ) -> Result<u64, Problem> {
        let Some(setting) = self.get(variable)? else {
            return Ok(default);
        };
        match setting.value.parse::<u64>() {
            Ok(number) if (minimum..=maximum).contains(&number) => Ok(number),
            Ok(_) => Err(misconfigured(
                setting.label,
                format!("must be from {minimum} to {maximum}"),
            )),
            Err(_) => Err(misconfigured(
                setting.label,
                format!("{:?} is not a whole number", printable(&setting.value)),
            )),
        }
    }
}

/// `http(s)://host[:port][/base]`, no query, fragment or credentials. The
/// detail never echoes the value: it may hold credentials. Checked by hand
/// rather than with the `url` crate, whose IDNA tables would cost the wasm
/// about 20 KiB gzipped; the runtime parses the URL again on every fetch.
fn parse_origin_url(setting: &Setting) -> Result<String, Problem> {
    let label = setting.label.clone();
    let value = setting.value.as_str();
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(|| misconfigured(label.clone(), "is not an http(s) URL with a host"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(misconfigured(
            label,
            "must not hold credentials: send them as a header the origin checks",
        ));
    }
    let (host, port) = match authority.find(']') {
        Some(end) if authority.starts_with('[') => {
            (&authority[..=end], authority[end + 1..].strip_prefix(':'))
        }
        _ => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if port.is_some_and(|port| {
        port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err()
    }) {
        return Err(misconfigured(
            label,
            "has a port that is not a number from 0 to 65535",
        ));
    }
    let valid_host = !host.is_empty()
        && (host.starts_with('[') && host.ends_with(']')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')));
    if !valid_host {
        return Err(misconfigured(label, "is not an http(s) URL with a host"));
    }
    if rest.contains(['?', '#']) {
        return Err(misconfigured(
            label,
            "must not carry a query or fragment: the request's own are appended",
        ));
    }
    if value
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || !b.is_ascii())
    {
        return Err(misconfigured(
            label,
            "holds spaces, control or non-ASCII characters",
        ));
    }
    Ok(value.trim_end_matches('/').to_string())
}

/// An RFC 9110 token, which is what a header name is.
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, Problem> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    fn route(pairs: &[(&str, &str)]) -> Result<RouteConfig, Problem> {
        let mut all = vec![("ORIGIN_URL", "http://o")];
        all.extend_from_slice(pairs);
        config(&all).map(|config| config.routes[0].clone())
    }

    fn variable_of(problem: Problem) -> String {
        match problem {
            Problem::Misconfigured { variable, .. } => variable,
            other => panic!("expected misconfigured, got {other:?}"),
        }
    }

    #[test]
    fn without_routes_there_is_one_default_route_at_the_root() {
        let config = config(&[("ORIGIN_URL", "https://api.example.com/")]).unwrap();
        assert!(!config.explicit_routes);
        let route = &config.routes[0];
        assert_eq!((route.name.as_str(), route.path.as_str()), ("default", "/"));
        assert_eq!(route.origin_url, "https://api.example.com");
        assert_eq!(route.mode, DedupMode::Webhook);
        assert_eq!(route.key_sources.len(), 4);
        assert_eq!(route.key_scope, KeyScope::Path);
        assert_eq!(route.delivery, Delivery::Sync);
        assert_eq!(route.in_flight, InFlightPolicy::Wait);
        assert_eq!(route.wait_ms, 10_000);
        assert_eq!(route.max_waiters, 256);
        assert_eq!(route.origin_timeout_ms, 10_000);
        assert_eq!(route.lease_ms, 15_000);
        assert_eq!(route.retention_seconds, 259_200);
        assert_eq!(route.max_body_bytes, 1_048_576);
        assert_eq!(route.max_stored_response_bytes, 65_536);
        assert_eq!(route.signature_tolerance_seconds, 300);
        assert!(!route.log_duplicates);
        assert_eq!(route.forward_secret, None);
        assert!(route.retryable_statuses.contains(503));
        assert!(!route.retryable_statuses.contains(404));
    }

    #[test]
    fn numbers_have_ranges_and_the_lease_outlives_the_timeout() {
        for (name, value) in [
            ("WAIT_MS", "60001"),
            ("MAX_WAITERS", "4097"),
            ("ORIGIN_TIMEOUT_MS", "99"),
            ("ORIGIN_TIMEOUT_MS", "300001"),
            ("ORIGIN_TIMEOUT_MS", "2147483648"),
            ("LEASE_MS", "18446744073709551615"),
            ("LEASE_MS", "10000"),
            ("RETENTION_SECONDS", "59"),
            ("RETENTION_SECONDS", "31536001"),
            ("RETENTION_SECONDS", "18446744073709551615"),
            ("MAX_BODY_BYTES", "0"),
            ("MAX_BODY_BYTES", "104857601"),
            ("MAX_STORED_RESPONSE_BYTES", "1048577"),
            ("SIGNATURE_TOLERANCE_SECONDS", "0"),
            ("WAIT_MS", "-1"),
            ("WAIT_MS", "1e3"),
        ] {
            assert_eq!(
                variable_of(route(&[(name, value)]).unwrap_err()),
                name,
                "{name}={value}"
            );
        }
        assert_eq!(
            route(&[("ORIGIN_TIMEOUT_MS", "2000")]).unwrap().lease_ms,
            7_000
        );
        assert_eq!(route(&[("LEASE_MS", "10001")]).unwrap().lease_ms, 10_001);
        let problem = route(&[
            ("ORIGIN_TIMEOUT_MS", "100"),
            ("LEASE_MS", "59000"),
            ("RETENTION_SECONDS", "60"),
        ]);
        assert_eq!(problem.unwrap().retention_seconds, 60);
        let problem = route(&[
            ("ORIGIN_TIMEOUT_MS", "100"),
            ("LEASE_MS", "60000"),
            ("RETENTION_SECONDS", "60"),
        ]);
        assert_eq!(variable_of(problem.unwrap_err()), "RETENTION_SECONDS");
    }

    #[test]
    fn unknown_choices_are_errors_not_defaults() {
        for (name, value) in [
            ("DEDUP_MODE", "batch"),
            ("IN_FLIGHT", "drop"),
            ("KEY_SCOPE", "tenant"),
            ("DELIVERY", "later"),
            ("KEY_SOURCES", "cookie:x"),
            ("KEY_SOURCES", "header:a,,json:/b"),
            ("SIGNATURE_SCHEME", "md5"),
            ("TENANT_HEADER", "bad header"),
            ("RETRYABLE_STATUSES", "5xx"),
            ("LOG_DUPLICATES", "yes"),
            ("ADMIN_TOKEN", ""),
        ] {
            assert_eq!(
                variable_of(route(&[(name, value)]).unwrap_err()),
                name,
                "{name}={value}"
            );
        }
        assert_eq!(
            route(&[("KEY_SCOPE", "global")]).unwrap().key_scope,
            KeyScope::Route
        );
    }

    #[test]
    fn signed_routes_default_to_signed_keys_and_route_scope() {
        let stripe = route(&[
            ("SIGNATURE_SCHEME", "stripe"),
            ("SIGNING_SECRET", "whsec_x"),
        ])
        .unwrap();
        assert_eq!(
            stripe.key_sources,
            KeySource::parse_list("json:/id").unwrap()
        );
        assert_eq!(stripe.key_scope, KeyScope::Route);
        assert_eq!(
            variable_of(route(&[("SIGNATURE_SCHEME", "stripe")]).unwrap_err()),
            "SIGNING_SECRET"
        );
        let api = route(&[("DEDUP_MODE", "api")]).unwrap();
        assert_eq!(api.key_sources, vec![KeySource::header("Idempotency-Key")]);
    }

    #[test]
    fn async_routes_bound_their_bodies_and_read_their_schedule() {
        let route = route(&[
            ("DELIVERY", "async"),
            ("RETRY_SCHEDULE", "1s,1m,2h,1d"),
            ("ACK_STATUS", "200"),
            ("ACK_BODY", "[accepted]"),
        ])
        .unwrap();
        let Delivery::Async(settings) = &route.delivery else {
            panic!()
        };
        assert_eq!(
            settings.retry_schedule_ms,
            [1_000, 60_000, 7_200_000, 86_400_000]
        );
        assert_eq!(settings.ack_status, 200);
        assert_eq!(settings.ack_body.as_deref(), Some("[accepted]"));
        let default = super::parse_schedule(DEFAULT_RETRY_SCHEDULE).unwrap();
        assert_eq!(default.len(), 9);
        for bad in [
            "0s",
            "10",
            "1w",
            "8d",
            "1s,,1s",
            "-1s",
            "18446744073709551615d",
        ] {
            assert!(super::parse_schedule(bad).is_err(), "{bad}");
        }
        for (name, value) in [
            ("MAX_BODY_BYTES", "1048577"),
            ("ACK_STATUS", "302"),
            ("RETRY_SCHEDULE", "soon"),
            ("GIVE_UP_STATUSES", "410,200"),
            ("GIVE_UP_STATUSES", "x"),
            ("DEAD_RETENTION_SECONDS", "86399"),
            ("DEAD_RETENTION_SECONDS", "31536001"),
        ] {
            let problem = super::tests::route(&[("DELIVERY", "async"), (name, value)]).unwrap_err();
            assert_eq!(variable_of(problem), name, "{value}");
        }
    }

    #[test]
    fn async_routes_read_what_ends_a_delivery_and_how_long_a_dead_one_stays() {
        let route = route(&[
            ("DELIVERY", "async"),
            ("GIVE_UP_STATUSES", "410, 451"),
            ("DEAD_RETENTION_SECONDS", "86400"),
        ])
        .unwrap();
        let Delivery::Async(settings) = &route.delivery else {
            panic!()
        };
        assert!(settings.give_up_statuses.contains(410));
        assert!(!settings.give_up_statuses.contains(404));
        assert_eq!(settings.dead_retention_seconds, 86_400);
        let defaults = super::tests::route(&[("DELIVERY", "async")]).unwrap();
        let Delivery::Async(defaults) = &defaults.delivery else {
            panic!()
        };
        assert_eq!(defaults.dead_retention_seconds, 2_592_000);
        assert!(!(100..=599).any(|status| defaults.give_up_statuses.contains(status)));
    }

    #[test]
    fn a_success_is_never_retryable() {
        for value in ["200", "500-599,201", "100-599"] {
            let problem = route(&[("RETRYABLE_STATUSES", value)]).unwrap_err();
            assert_eq!(variable_of(problem.clone()), "RETRYABLE_STATUSES");
            assert!(problem.detail().contains("a success"), "{value}");
        }
    }

    #[test]
    fn a_routes_forward_secret_is_known_by_its_name() {
        let top = route(&[("FORWARD_SECRET", "s")]).unwrap();
        assert_eq!(top.forward_secret_name.as_deref(), Some("FORWARD_SECRET"));
        let routed = config(&[
            ("ORIGIN_URL", "https://pay.internal"),
            (
                "ROUTES",
                r#"{"a":{"path":"/a","forward_secret":"HOOKS_FORWARD"},"b":{"path":"/b"}}"#,
            ),
            ("HOOKS_FORWARD", "s2"),
        ])
        .unwrap();
        let a = routed.route("a").unwrap();
        assert_eq!(a.forward_secret_name.as_deref(), Some("HOOKS_FORWARD"));
        assert_eq!(a.forward_secret.as_ref().unwrap().expose(), "s2");
        assert_eq!(routed.route("b").unwrap().forward_secret_name, None);
    }

    #[test]
    fn origin_urls_are_checked_without_echoing_them() {
        for bad in [
            "not a url",
            "ftp://x",
            "http://o/?q=1",
            "https://user:hunter2@o.example",
        ] {
            let problem = config(&[("ORIGIN_URL", bad)]).unwrap_err();
            assert!(
                !problem.detail().contains("hunter2"),
                "{}",
                problem.detail()
            );
            assert_eq!(variable_of(problem), "ORIGIN_URL");
        }
        assert_eq!(variable_of(config(&[]).unwrap_err()), "ORIGIN_URL");
        for good in [
            "http://127.0.0.1:9090",
            "https://pay.internal.example/hooks/",
            "http://[::1]:8080/x",
            "http://[::1]/x",
            "https://a-b.c_d",
        ] {
            assert!(config(&[("ORIGIN_URL", good)]).is_ok(), "{good}");
        }
        assert_eq!(
            config(&[("ORIGIN_URL", "https://o.example/base/")])
                .unwrap()
                .routes[0]
                .origin_url,
            "https://o.example/base"
        );
    }

    const ROUTES: &str = r#"{
        "stripe": {"path": "/webhooks/stripe", "origin": "https://pay.internal/hooks", "signature": "stripe", "signing_secret": "STRIPE_WEBHOOK_SECRET"},
        "api": {"path": "/v1", "mode": "api", "tenant_header": "Authorization", "wait_ms": 5000, "log_duplicates": true},
        "adyen": {"path": "/webhooks/adyen", "delivery": "async", "signature_scheme": "adyen", "signing_secret": "ADYEN_HMAC_KEY", "ack_body": "[accepted]"}
    }"#;

    fn routes(extra: &[(&str, &str)]) -> Result<Config, Problem> {
        let mut pairs = vec![
            ("ROUTES", ROUTES),
            ("ORIGIN_URL", "https://pay.internal"),
            ("STRIPE_WEBHOOK_SECRET", "whsec_stripe"),
            (
                "ADYEN_HMAC_KEY",
                "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
            ),
            ("WAIT_MS", "2000"),
        ];
        pairs.extend_from_slice(extra);
        config(&pairs)
    }

    #[test]
    fn routes_take_their_own_settings_then_the_top_level_then_defaults() {
        let config = routes(&[]).unwrap();
        assert!(config.explicit_routes);
        let stripe = config.route("stripe").unwrap();
        assert_eq!(stripe.origin_url, "https://pay.internal/hooks");
        assert_eq!(stripe.wait_ms, 2_000, "the top-level WAIT_MS");
        assert!(
            stripe.signature_scheme
                == SignatureScheme::configure(
                    "stripe",
                    &SchemeSettings {
                        secret: Some("whsec_stripe".into()),
                        ..SchemeSettings::default()
                    }
                )
                .unwrap()
        );
        let api = config.route("api").unwrap();
        assert_eq!(
            api.origin_url, "https://pay.internal",
            "the top-level ORIGIN_URL"
        );
        assert_eq!(api.wait_ms, 5_000, "its own, a TOML number");
        assert!(api.log_duplicates, "its own, a TOML boolean");
        assert_eq!(
            api.tenant,
            Tenant::Header {
                name: "authorization".into(),
                required: true
            }
        );
        assert!(config.route("adyen").unwrap().is_async());
        assert_eq!(
            config.route_for("/webhooks/stripe/evt").unwrap().name,
            "stripe"
        );
        assert_eq!(config.route_for("/v1/charges").unwrap().name, "api");
        assert_eq!(
            config.route_for("/v2/charges").unwrap_err(),
            Problem::NoRoute
        );
        assert_eq!(
            config.route_for("/webhooks/stripex").unwrap_err(),
            Problem::NoRoute
        );
    }

    #[test]
    fn a_bad_route_names_itself_and_its_field() {
        let cases = [
            (
                r#"{"stripe":{"path":"/s","signature":"strip","signing_secret":"S"}}"#,
                "ROUTES.stripe.signature",
            ),
            (
                r#"{"stripe":{"path":"/s","signature":"stripe"}}"#,
                "ROUTES.stripe.signing_secret",
            ),
            (
                r#"{"stripe":{"path":"/s","signature":"stripe","signing_secret":"UNSET"}}"#,
                "ROUTES.stripe.signing_secret",
            ),
            (
                r#"{"a":{"path":"/a","singing_secret":"S"}}"#,
                "ROUTES.a.singing_secret",
            ),
            (r#"{"a":{"origin":"http://o"}}"#, "ROUTES.a.path"),
            (r#"{"a":{"path":"a"}}"#, "ROUTES.a.path"),
            (r#"{"a":{"path":"/__idemgate/x"}}"#, "ROUTES.a.path"),
            (r#"{"a":{"path":"/a%2Fb"}}"#, "ROUTES.a.path"),
            (r#"{"a":{"path":"/a"},"b":{"path":"/a/"}}"#, "ROUTES.b.path"),
            (r#"{"A":{"path":"/a"}}"#, "ROUTES.A"),
            (r#"{"a":{"path":"/a","wait_ms":[1]}}"#, "ROUTES.a.wait_ms"),
            (r#"{"a":{"path":"/a","lease_ms":10}}"#, "ROUTES.a.lease_ms"),
            (r#"{"a":"/a"}"#, "ROUTES.a"),
            (r#"["/a"]"#, "ROUTES"),
            (r#"{}"#, "ROUTES"),
            ("{not json", "ROUTES"),
        ];
        for (routes, variable) in cases {
            let problem = config(&[
                ("ROUTES", routes),
                ("ORIGIN_URL", "http://o"),
                ("S", "whsec_s"),
            ])
            .unwrap_err();
            assert_eq!(variable_of(problem), variable, "{routes}");
        }
        let problem = config(&[("ROUTES", r#"{"a":{"path":"/a"}}"#)]).unwrap_err();
        assert_eq!(variable_of(problem), "ROUTES.a.origin_url");
    }

    #[test]
    fn a_named_secret_is_never_echoed() {
        let problem = config(&[
            (
                "ROUTES",
                r#"{"s":{"path":"/s","signature":"standard-webhooks","signing_secret":"SW"}}"#,
            ),
            ("ORIGIN_URL", "http://o"),
            ("SW", "whsec_not base64 but secret!"),
        ])
        .unwrap_err();
        assert_eq!(variable_of(problem.clone()), "ROUTES.s.signing_secret");
        assert!(
            !problem.detail().contains("secret!"),
            "{}",
            problem.detail()
        );
    }

    #[test]
    fn limits_hold_at_their_boundaries() {
        let ack = |body: String| route(&[("DELIVERY", "async"), ("ACK_BODY", body.as_str())]);
        assert!(ack("x".repeat(4_096)).is_ok());
        assert_eq!(variable_of(ack("x".repeat(4_097)).unwrap_err()), "ACK_BODY");
        assert_eq!(super::parse_schedule("7d").unwrap(), [7 * 86_400_000]);
        assert!(super::parse_schedule("1s").is_ok());
        let delays = |count: usize| vec!["1s"; count].join(",");
        assert_eq!(super::parse_schedule(&delays(20)).unwrap().len(), 20);
        assert!(super::parse_schedule(&delays(21)).is_err());
        assert!(!route(&[]).unwrap().is_async());
    }

    #[test]
    fn a_setting_is_named_as_it_was_spelt() {
        for field in ["signature", "signature_scheme"] {
            let routes = format!(r#"{{"a":{{"path":"/a","{field}":"md5"}}}}"#);
            let problem = config(&[("ROUTES", routes.as_str()), ("ORIGIN_URL", "http://o")]);
            assert_eq!(
                variable_of(problem.unwrap_err()),
                format!("ROUTES.a.{field}")
            );
        }
        let blank = route(&[("DEDUP_MODE", "  ")]).unwrap_err();
        assert!(
            blank.detail().contains("set but empty"),
            "{}",
            blank.detail()
        );
        assert_eq!(variable_of(blank), "DEDUP_MODE", "blank is not unset");
        // A derived error names the field as the route spelt it.
        let env = |_: &str| None;
        let spelt = |field: &str| -> String {
            let fields = [
                ("path".to_string(), Json::String("/a".into())),
                (field.to_string(), Json::String("x".into())),
            ];
            let settings = Settings {
                env: &env,
                route: Some(("a", &fields)),
            };
            settings.label("SIGNATURE_SCHEME")
        };
        assert_eq!(spelt("signature"), "ROUTES.a.signature");
        assert_eq!(spelt("signature_scheme"), "ROUTES.a.signature_scheme");
        assert_eq!(spelt("other"), "ROUTES.a.signature_scheme");
        // A route's path is its own: never the top level's (a shell's PATH).
        let problem = config(&[
            ("ROUTES", r#"{"a":{"origin":"http://o"}}"#),
            ("PATH", "/usr/bin"),
        ]);
        assert_eq!(variable_of(problem.unwrap_err()), "ROUTES.a.path");
    }

    #[test]
    fn origin_urls_need_a_host_and_a_port_that_is_a_number() {
        for bad in [
            "http://:80",
            "http://o:",
            "http://o:8a",
            "http://o:65536",
            "http://[::1",
            "http://[::1]:99999",
            "http://[::1]:x",
            "http://o/a b",
            "http://o/\u{7}",
            "http://o/caf\u{e9}",
            "http://o:+80",
        ] {
            assert_eq!(
                variable_of(config(&[("ORIGIN_URL", bad)]).unwrap_err()),
                "ORIGIN_URL",
                "{bad:?}"
            );
        }
        assert!(config(&[("ORIGIN_URL", "http://o:65535")]).is_ok());
        // Only a leading `[` opens an IPv6 literal; a stray `]` is in the port.
        let stray = config(&[("ORIGIN_URL", "http://x:1]")]).unwrap_err();
        assert!(stray.detail().contains("port"), "{}", stray.detail());
    }
}
