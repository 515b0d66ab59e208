//! Which route a delivery goes to, and what it is signed with: read from
//! the variables (`.dev.vars`) by the gateway's own configuration code, so
//! a route the worker would refuse is refused here with the same words.

use idemgate_core::config::{Config, DedupMode, RouteConfig};
use idemgate_core::signature::SignatureScheme;

use crate::provider::{self, Provider, PROVIDERS};

/// `scripts/dev` passes `ORIGIN_URL` and `FORWARD_SECRET` with `--var`, so
/// `.dev.vars` has neither; the sender never forwards, it only needs the
/// routes to parse as the gateway's do (a batch route needs a
/// `FORWARD_SECRET`).
const ORIGIN_STAND_IN: &str = "http://127.0.0.1:9090";
const FORWARD_SECRET_STAND_IN: &str = "demo-forward-secret";

/// The route a delivery goes to and how its sender signs.
#[derive(Debug, Clone)]
pub struct Target {
    pub provider: &'static Provider,
    pub route: String,
    /// The route's normalised path prefix.
    pub path: String,
    /// The scheme as the worker configures it, with the current secret.
    pub scheme: SignatureScheme,
    /// The current signing secret itself, for the senders the core does
    /// not sign for (Standard Webhooks `v1a`, PayPal).
    pub secret: Option<String>,
    /// The variable that secret is read from.
    pub secret_name: Option<String>,
    pub cert_hosts: Vec<String>,
    /// Where the route asks for its sender's key (Plaid).
    pub api_base: Option<String>,
}

/// Variables by name, later entries winning.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    pub entries: Vec<(String, String)>,
    /// Where they came from, for messages.
    pub source: String,
}

impl Vars {
    pub fn get(&self, name: &str) -> Option<String> {
        self.entries
            .iter()
            .rev()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.clone())
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.entries.push((name.to_string(), value.to_string()));
    }

    /// The configuration the worker would build from these variables.
    pub fn config(&self) -> Result<Config, String> {
        Config::from_lookup(|name| {
            self.get(name).or_else(|| match name {
                "ORIGIN_URL" => Some(ORIGIN_STAND_IN.to_string()),
                "FORWARD_SECRET" => Some(FORWARD_SECRET_STAND_IN.to_string()),
                _ => None,
            })
        })
        .map_err(|problem| {
            format!(
                "{}: the gateway would refuse every request: {}",
                self.source,
                problem.detail()
            )
        })
    }

    /// The name of the variable holding `route`'s current signing secret:
    /// the one it names (the first of a list), else `SIGNING_SECRET`.
    pub fn secret_name(&self, route: &str) -> String {
        let named = self
            .get("ROUTES")
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|routes| match &routes[route]["signing_secret"] {
                serde_json::Value::String(name) => Some(name.clone()),
                serde_json::Value::Array(names) => names.first()?.as_str().map(str::to_string),
                _ => None,
            });
        named.unwrap_or_else(|| "SIGNING_SECRET".to_string())
    }
}

/// Every route's name and scheme, working or not, for messages.
fn route_names(config: &Config) -> Vec<String> {
    config
        .routes
        .iter()
        .map(|route| format!("{} ({})", route.name, route.signature_scheme.name()))
        .chain(
            config
                .broken
                .iter()
                .map(|route| format!("{} (misconfigured)", route.name)),
        )
        .collect()
}

fn provider_names() -> String {
    PROVIDERS
        .iter()
        .map(|provider| provider.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `route` is one `provider` sends to.
fn serves(route: &RouteConfig, provider: &Provider) -> bool {
    route.signature_scheme.name() == provider.scheme
        && (provider.scheme != "none" || route.mode == DedupMode::Api)
}

/// The route named `name`, or why there is none.
fn route_named<'a>(config: &'a Config, vars: &Vars, name: &str) -> Result<&'a RouteConfig, String> {
    if let Some(route) = config.route(name) {
        return Ok(route);
    }
    if let Some(problem) = config.broken_route(name) {
        let mut message = format!(
            "route {name} is misconfigured, so the gateway answers its requests 500: {}",
            problem.detail()
        );
        if message.contains("which is not set") {
            message.push_str(&format!(
                " (locally: add the secret's line to {})",
                vars.source
            ));
        }
        return Err(message);
    }
    Err(format!(
        "no route {name:?} in the ROUTES of {}; its routes: {}",
        vars.source,
        route_names(config).join(", ")
    ))
}

/// The route `wanted` (a provider or a route name, and `--route`) sends
/// to, signed with the route's secret or `secret` in its place.
pub fn resolve(
    vars: &Vars,
    wanted: &str,
    route: Option<&str>,
    secret: Option<&str>,
) -> Result<Target, String> {
    let config = vars.config()?;
    let (provider, route_name) = match provider::by_name(wanted) {
        Some(provider) => {
            let name = match route {
                Some(route) => route.to_string(),
                None if config.route(wanted).is_some() || config.broken_route(wanted).is_some() => {
                    wanted.to_string()
                }
                None => {
                    let candidates: Vec<&RouteConfig> = config
                        .routes
                        .iter()
                        .filter(|route| serves(route, provider))
                        .collect();
                    match candidates.as_slice() {
                        [one] => one.name.clone(),
                        [] => {
                            return Err(format!(
                                "no route of {} takes {} deliveries (signature = {:?}{}); its routes: {}. Add one to ROUTES (.dev.vars.example has one per provider).",
                                vars.source,
                                provider.name,
                                provider.scheme,
                                if provider.scheme == "none" { ", mode = \"api\"" } else { "" },
                                route_names(&config).join(", ")
                            ))
                        }
                        several => {
                            return Err(format!(
                                "several routes take {} deliveries: {}; pick one with --route NAME",
                                provider.name,
                                several
                                    .iter()
                                    .map(|route| route.name.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ))
                        }
                    }
                }
            };
            (provider, name)
        }
        None => {
            let named = route_named(&config, vars, wanted).map_err(|error| {
                if config.broken_route(wanted).is_some() {
                    return error;
                }
                format!(
                    "unknown provider {wanted:?}: one of {}, or a route of {} ({})",
                    provider_names(),
                    vars.source,
                    route_names(&config).join(", ")
                )
            });
            let found = named?;
            if let Some(other) = route.filter(|other| *other != wanted) {
                return Err(format!(
                    "{wanted} is a route, and --route names another ({other})"
                ));
            }
            let scheme = found.signature_scheme.name();
            let provider = provider::for_scheme(scheme)
                .filter(|provider| serves(found, provider))
                .ok_or_else(|| {
                    format!(
                        "route {wanted} checks no signature and is not an api route: send to it with curl, or name a provider ({})",
                        provider_names()
                    )
                })?;
            (provider, wanted.to_string())
        }
    };
    // A secret given on the command line replaces the one the route names,
    // so the route is configured with it exactly as the worker would be.
    let secret_name = vars.secret_name(&route_name);
    let config = match secret {
        Some(secret) => {
            let mut vars = vars.clone();
            vars.set(&secret_name, secret);
            vars.config()?
        }
        None => config,
    };
    let found = route_named(&config, vars, &route_name)?;
    if !serves(found, provider) {
        return Err(format!(
            "route {route_name} takes {} deliveries{}, not {}'s: pick its provider, or another route with --route",
            found.signature_scheme.name(),
            if found.mode == DedupMode::Api { " (api mode)" } else { "" },
            provider.name
        ));
    }
    let raw_secret = secret
        .map(str::to_string)
        .or_else(|| vars.get(&secret_name));
    let signed = provider.scheme != "none";
    Ok(Target {
        provider,
        route: route_name,
        path: found.path.clone(),
        scheme: found.signature_scheme.clone(),
        secret: raw_secret.filter(|_| signed),
        secret_name: signed.then_some(secret_name),
        cert_hosts: found.signature_scheme.cert_hosts().to_vec(),
        api_base: found.signature_scheme.api_base().map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(entries: &[(&str, &str)]) -> Vars {
        Vars {
            entries: entries
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
            source: "test.vars".into(),
        }
    }

    const ROUTES: &str = r#"{
        "default": {"path": "/"},
        "stripe": {"path": "/hooks/stripe", "signature": "stripe", "signing_secret": "STRIPE_SECRET"},
        "gh": {"path": "/hooks/gh", "signature": "github", "signing_secret": ["GH_NEXT", "GH"]},
        "gh2": {"path": "/hooks/gh2", "signature": "github", "signing_secret": "GH"},
        "api": {"path": "/v1", "mode": "api"},
        "broken": {"path": "/hooks/broken", "signature": "slack", "signing_secret": "MISSING"}
    }"#;

    fn sample() -> Vars {
        vars(&[
            ("ROUTES", ROUTES),
            ("STRIPE_SECRET", "whsec_x"),
            ("GH", "old"),
            ("GH_NEXT", "new"),
        ])
    }

    #[test]
    fn a_provider_goes_to_its_route_by_name_or_scheme() {
        let stripe = resolve(&sample(), "stripe", None, None).unwrap();
        assert_eq!(
            (stripe.route.as_str(), stripe.path.as_str()),
            ("stripe", "/hooks/stripe")
        );
        assert_eq!(stripe.secret.as_deref(), Some("whsec_x"));
        let api = resolve(&sample(), "api", None, None).unwrap();
        assert_eq!(api.route, "api");
        assert_eq!(api.secret, None);
        // A route named on its own: its scheme's sender; the current
        // secret of a rotating route is the first.
        let gh = resolve(&sample(), "gh", None, None).unwrap();
        assert_eq!(gh.provider.name, "github");
        assert_eq!(gh.secret.as_deref(), Some("new"));
    }

    #[test]
    fn errors_say_what_to_do() {
        let error = |wanted: &str, route: Option<&str>| {
            resolve(&sample(), wanted, route, None).unwrap_err()
        };
        let unknown = error("strip", None);
        assert!(
            unknown.contains("unknown provider") && unknown.contains("paypal"),
            "{unknown}"
        );
        assert!(error("github", None).contains("--route"));
        assert!(error("paddle", None).contains("no route of test.vars takes paddle"));
        let missing = error("broken", None);
        assert!(
            missing.contains("MISSING, which is not set") && missing.contains("test.vars"),
            "{missing}"
        );
        assert!(error("stripe", Some("gh")).contains("takes github deliveries"));
        assert!(error("default", None).contains("send to it with curl"));
        let no_routes = resolve(&vars(&[]), "stripe", None, None).unwrap_err();
        assert!(
            no_routes.contains("no route of test.vars takes stripe"),
            "{no_routes}"
        );
    }

    #[test]
    fn a_secret_given_replaces_the_routes() {
        let target = resolve(&sample(), "github", Some("gh2"), Some("other")).unwrap();
        assert_eq!(target.secret.as_deref(), Some("other"));
        assert_eq!(target.secret_name.as_deref(), Some("GH"));
        // Without ROUTES: the default route, with the top-level secret.
        let top = vars(&[
            ("SIGNATURE_SCHEME", "stripe"),
            ("SIGNING_SECRET", "whsec_top"),
        ]);
        let target = resolve(&top, "stripe", None, None).unwrap();
        assert_eq!(
            (target.route.as_str(), target.path.as_str()),
            ("default", "/")
        );
        assert_eq!(target.secret.as_deref(), Some("whsec_top"));
    }
}
