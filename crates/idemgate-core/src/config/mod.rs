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
//!
//! A route whose settings are wrong fails alone (SPEC §6, v3): its own
//! requests get its 500, every other route and the operator API work, and
//! health names it. Only where routing itself is unknown (`ROUTES` is not
//! JSON, a route's path is missing, invalid or taken twice) is the whole
//! configuration refused, so no request can fall to a shorter prefix.
//!
//! - [`route`]: one route's settings, resolved and checked;
//! - [`settings`]: where a value comes from, and what may be said of it;
//! - [`values`]: the formats of origin URLs and retry schedules.

mod order;
mod reconcile;
mod route;
mod settings;
#[cfg(test)]
mod tests;
mod values;

pub use order::{OrderConfig, DEFAULT_HOLD_MS, MAX_HOLD_MS};
pub use settings::is_secret_name;
pub use values::parse_schedule;

use crate::flow::FlowLimits;
use crate::json::{self, Json};
use crate::key::{KeyScope, KeySource};
use crate::problem::Problem;
use crate::receipt::{RetryableStatuses, StatusSet};
use crate::routes::is_route_name;
use crate::signature::{Secret, SignatureScheme};

use route::route_config;
use settings::{misconfigured, printable, Settings};

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
/// (Compared only where its scheme can sign: see `SignatureScheme`.)
/// A binding a route's forwards go through instead of the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginBinding {
    pub kind: BindingKind,
    /// The binding's name in the Worker's environment.
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingKind {
    /// Another Worker (`service:NAME`): no public URL, no network hop.
    Service,
    /// An mTLS certificate binding (`mtls:NAME`): the forward to
    /// `ORIGIN_URL` presents idemgate's client certificate.
    Mtls,
}

#[derive(Debug, Clone)]
#[cfg_attr(feature = "sign", derive(PartialEq, Eq))]
pub struct RouteConfig {
    pub name: String,
    /// The normalised path prefix this route covers.
    pub path: String,
    /// Base URL the request path and query are appended to; no trailing slash.
    pub origin_url: String,
    /// The binding the route's forwards go through (SPEC §5, v5), if its
    /// `ORIGIN` names one.
    pub origin_binding: Option<OriginBinding>,
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
    /// `MAX_BATCH_EVENTS`: the most events one batch may hold (SPEC §4, v4).
    pub max_batch_events: usize,
    /// `MAX_IN_FLIGHT` and `RATE_PER_SECOND`; `None` when neither is set.
    pub flow: Option<FlowLimits>,
    pub signature_scheme: SignatureScheme,
    pub signature_tolerance_seconds: u64,
    pub log_duplicates: bool,
    pub forward_secret: Option<Secret>,
    /// The name `forward_secret` is read by (`FORWARD_SECRET`, or the
    /// route's own), which an async receipt keeps to sign later attempts.
    pub forward_secret_name: Option<String>,
    /// `reconcile` (SPEC §11): the provider's events API this route is
    /// compared with.
    pub reconcile: Option<crate::reconcile::ReconcileConfig>,
    /// `order_key` and `order_time` (SPEC §12, v4): deliveries of one
    /// entity one at a time, oldest first (async routes only).
    pub order: Option<OrderConfig>,
    pub admin_token: Option<Secret>,
}

/// A deployment: its routes, and the top-level admin token (which guards
/// the operator routes that name no route, such as `/__idemgate/stats`).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "sign", derive(PartialEq, Eq))]
pub struct Config {
    pub routes: Vec<RouteConfig>,
    /// Routes whose settings are wrong: each answers its own requests with
    /// its problem, alone.
    pub broken: Vec<BrokenRoute>,
    /// Whether `ROUTES` is set (otherwise one route, `default`, at `/`).
    pub explicit_routes: bool,
    pub admin_token: Option<Secret>,
    /// `SWEEP_LIMIT`: objects one run of the scheduled sweep wakes.
    pub sweep_limit: u32,
    /// `INDEX_SHARDS` (SPEC §15, v5): each route's receipt index is kept
    /// by this many objects.
    pub index_shards: u16,
    /// `ACCESS_TEAM` and `ACCESS_AUD` (SPEC §13, v5): whose Access tokens
    /// name the actor of an operator's act.
    pub access: Option<crate::access::AccessConfig>,
}

/// A route that is configured wrong: where it is, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenRoute {
    pub name: String,
    /// Its normalised path, which it keeps: its requests must not fall to
    /// a shorter prefix.
    pub path: String,
    pub problem: Problem,
}

/// The largest replay body a receipt can hold. Durable Object SQLite stores
/// at most 2 MB per row; the receipt row also holds its record (headers,
/// attempts), so half of that is left to the body.
pub const MAX_STORABLE_RESPONSE_BYTES: u64 = 1_048_576;
/// The largest body an async route accepts: it is stored whole in one row.
pub const MAX_ASYNC_BODY_BYTES: u64 = 1_048_576;
/// The largest body a sync route accepts: 4 MiB. Admitting a delivery
/// holds up to 13 times its body at once (a JSON body of tiny members;
/// `tests/body_memory.rs` holds it to that, and measures 9.6 since the
/// reader stopped building a tree), beside the runtime's copy and the
/// copy sent to the key's object: about 16 times, 64 MiB for 4 MiB, in an
/// isolate of 128 MB whose wasm memory never shrinks.
pub const MAX_BODY_BYTES_LIMIT: u64 = 4_194_304;
/// The most `MAX_BATCH_EVENTS` may be: each event is one Durable Object
/// request of the batch's, and a Worker's request makes at most 1,000.
pub const MAX_BATCH_EVENTS_LIMIT: u64 = 500;

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
        let index_shards = top.number(
            "INDEX_SHARDS",
            crate::index::shard::DEFAULT_SHARDS.into(),
            1,
            crate::index::shard::MAX_SHARDS.into(),
        )? as u16;
        let access = crate::access::parse(
            top.get("ACCESS_TEAM")?
                .map(|setting| setting.value)
                .as_deref(),
            top.get("ACCESS_AUD")?
                .map(|setting| setting.value)
                .as_deref(),
        )
        .map_err(|(variable, reason)| misconfigured(variable, reason))?;
        let mut config = Config {
            routes: Vec::new(),
            broken: Vec::new(),
            explicit_routes: false,
            admin_token,
            sweep_limit,
            index_shards,
            access,
        };
        let Some(routes_text) = top.get("ROUTES")? else {
            config.add("default", "/".into(), route_config("default", "/", &top));
            return Ok(config);
        };
        config.explicit_routes = true;
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
        for (name, table) in &entries {
            let Json::Object(fields) = table else {
                return Err(misconfigured(
                    format!("ROUTES.{}", printable(name)),
                    "must be a table of settings",
                ));
            };
            let settings = Settings {
                env: &lookup,
                route: Some((name, fields)),
            };
            // Where each route is must be known, or a request could fall
            // to a shorter prefix: a path that is wrong refuses them all.
            let path = settings.get("PATH")?.ok_or_else(|| {
                misconfigured(format!("ROUTES.{}.path", printable(name)), "is required")
            })?;
            let normalized = route::route_path(&path.value, &settings)?;
            if let Some(other) = config.paths().find(|(_, other)| *other == normalized) {
                return Err(misconfigured(
                    format!("ROUTES.{}.path", printable(name)),
                    format!("{normalized:?} is also the path of route {}", other.0),
                ));
            }
            let route = if !is_route_name(name) {
                Err(misconfigured(
                    format!("ROUTES.{}", printable(name)),
                    "a route name is 1 to 32 characters of a-z, 0-9 and -",
                ))
            } else {
                settings
                    .check_fields()
                    .and_then(|()| route_config(name, &path.value, &settings))
            };
            config.add(name, normalized, route);
        }
        Ok(config)
    }

    /// Breaks each route whose `ORIGIN` names a binding the Worker lacks
    /// (`bound` says which it has): `misconfigured`, named by health, as
    /// every other setting at fault.
    pub fn refuse_missing_bindings(&mut self, bound: impl Fn(&str) -> bool) {
        let (kept, missing): (Vec<RouteConfig>, Vec<RouteConfig>) =
            std::mem::take(&mut self.routes)
                .into_iter()
                .partition(|route| {
                    route
                        .origin_binding
                        .as_ref()
                        .is_none_or(|binding| bound(&binding.name))
                });
        self.routes = kept;
        for route in missing {
            let binding = route.origin_binding.expect("a missing binding");
            let variable = match self.explicit_routes {
                true => format!("ROUTES.{}.origin", route.name),
                false => "ORIGIN".to_string(),
            };
            let (kind, section) = match binding.kind {
                BindingKind::Service => ("service", "[[services]]"),
                BindingKind::Mtls => ("mTLS certificate", "[[mtls_certificates]]"),
            };
            self.broken.push(BrokenRoute {
                name: route.name,
                path: route.path,
                problem: settings::misconfigured(
                    variable,
                    format!(
                        "names the {kind} binding {}, which this Worker does not have (wrangler.toml {section})",
                        binding.name
                    ),
                ),
            });
        }
    }

    fn add(&mut self, name: &str, path: String, route: Result<RouteConfig, Problem>) {
        match route {
            Ok(route) => self.routes.push(route),
            Err(problem) => self.broken.push(BrokenRoute {
                name: printable(name),
                path,
                problem,
            }),
        }
    }

    /// Every route's name and path, working or not.
    fn paths(&self) -> impl Iterator<Item = (&str, &str)> {
        self.routes
            .iter()
            .map(|route| (route.name.as_str(), route.path.as_str()))
            .chain(
                self.broken
                    .iter()
                    .map(|route| (route.name.as_str(), route.path.as_str())),
            )
    }

    /// The working route named `name`.
    pub fn route(&self, name: &str) -> Option<&RouteConfig> {
        self.routes.iter().find(|route| route.name == name)
    }

    /// The route whose path covers the normalised `path` most closely;
    /// a broken one answers with its problem.
    pub fn route_for(&self, path: &str) -> Result<&RouteConfig, Problem> {
        let paths: Vec<(&str, &str)> = self.paths().collect();
        let index = crate::routes::longest_match(
            paths
                .iter()
                .enumerate()
                .map(|(index, (_, path))| (index, *path)),
            path,
        )
        .ok_or(Problem::NoRoute)?;
        match self.routes.get(index) {
            Some(route) => Ok(route),
            None => Err(self.broken[index - self.routes.len()].problem.clone()),
        }
    }

    /// The problem of the broken route named `name`, if it is one.
    pub fn broken_route(&self, name: &str) -> Option<&Problem> {
        self.broken
            .iter()
            .find(|route| route.name == name)
            .map(|route| &route.problem)
    }
}

impl RouteConfig {
    /// Whether this route acknowledges at once and delivers later.
    pub fn is_async(&self) -> bool {
        matches!(self.delivery, Delivery::Async(_))
    }

    /// Headers of this route whose values are never shown, besides the
    /// well-known credential and signature names: its own signature
    /// header and its tenant header.
    pub fn masked_headers(&self) -> Vec<&str> {
        let tenant = match &self.tenant {
            Tenant::Header { name, .. } => Some(name.as_str()),
            Tenant::Shared => None,
        };
        self.signature_scheme
            .signature_header()
            .into_iter()
            .chain(tenant)
            .collect()
    }
}
