//! Typed configuration from the environment (SPEC §8).
//!
//! [`Config::from_lookup`] takes any `name -> value` function, so the parsing
//! rules are tested natively; the Workers adapter passes `Env` vars and
//! secrets. An invalid value is a [`Problem::Misconfigured`] that names the
//! variable: never a silent default.

use crate::key::{KeyScope, KeySource};
use crate::problem::Problem;
use crate::signature::{decode_standard_webhooks_secret, Secret, SignatureScheme};

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub origin_url: String,
    pub mode: DedupMode,
    pub key_sources: Vec<KeySource>,
    pub key_scope: KeyScope,
    pub tenant_header: Option<String>,
    pub in_flight: InFlightPolicy,
    pub wait_ms: u64,
    pub origin_timeout_ms: u64,
    pub lease_ms: u64,
    pub retention_seconds: u64,
    pub max_body_bytes: u64,
    pub max_stored_response_bytes: u64,
    pub signature_scheme: SignatureScheme,
    pub signature_tolerance_seconds: u64,
    pub forward_secret: Option<Secret>,
    pub admin_token: Option<Secret>,
}

const WEBHOOK_KEY_SOURCES: &str =
    "header:Idempotency-Key,header:webhook-id,json:/transaction_id,json:/id";
const API_KEY_SOURCES: &str = "header:Idempotency-Key";
/// A signed sender's key must come from what the signature covers: Stripe
/// signs only the body (its event id), Standard Webhooks signs `webhook-id`.
/// An unsigned header could otherwise replay one signed event under many keys.
const STRIPE_KEY_SOURCES: &str = "json:/id";
const STANDARD_WEBHOOKS_KEY_SOURCES: &str = "header:webhook-id";

#[derive(Clone, Copy)]
enum SchemeName {
    None,
    Stripe,
    StandardWebhooks,
}

impl Config {
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, Problem> {
        let vars = Vars(&lookup);
        let origin_url = parse_origin_url(vars.required("ORIGIN_URL")?)?;
        let mode = vars.choice(
            "DEDUP_MODE",
            DedupMode::Webhook,
            &[("webhook", DedupMode::Webhook), ("api", DedupMode::Api)],
        )?;
        let scheme_name = vars.choice(
            "SIGNATURE_SCHEME",
            SchemeName::None,
            &[
                ("none", SchemeName::None),
                ("stripe", SchemeName::Stripe),
                ("standard-webhooks", SchemeName::StandardWebhooks),
            ],
        )?;
        let signature_scheme = match scheme_name {
            SchemeName::None => SignatureScheme::None,
            SchemeName::Stripe => SignatureScheme::Stripe {
                secret: Secret::new(
                    vars.required_for("SIGNING_SECRET", "SIGNATURE_SCHEME=stripe")?,
                ),
            },
            SchemeName::StandardWebhooks => SignatureScheme::StandardWebhooks {
                key: decode_standard_webhooks_secret(
                    &vars.required_for("SIGNING_SECRET", "SIGNATURE_SCHEME=standard-webhooks")?,
                )
                .map_err(|reason| misconfigured("SIGNING_SECRET", reason))?,
            },
        };
        let signature_tolerance_seconds = vars.number("SIGNATURE_TOLERANCE_SECONDS", 300, 1)?;
        let key_sources = match vars.get("KEY_SOURCES")? {
            Some(list) => KeySource::parse_list(&list),
            None => KeySource::parse_list(match (scheme_name, mode) {
                (SchemeName::Stripe, _) => STRIPE_KEY_SOURCES,
                (SchemeName::StandardWebhooks, _) => STANDARD_WEBHOOKS_KEY_SOURCES,
                (SchemeName::None, DedupMode::Webhook) => WEBHOOK_KEY_SOURCES,
                (SchemeName::None, DedupMode::Api) => API_KEY_SOURCES,
            }),
        }
        .map_err(|reason| misconfigured("KEY_SOURCES", reason))?;
        let key_scope = vars.choice(
            "KEY_SCOPE",
            KeyScope::Path,
            &[("path", KeyScope::Path), ("global", KeyScope::Global)],
        )?;
        let tenant_header = vars.get("TENANT_HEADER")?;
        if let Some(name) = &tenant_header {
            if !is_header_name(name) {
                return Err(misconfigured("TENANT_HEADER", "is not a header name"));
            }
        }
        let in_flight = vars.choice(
            "IN_FLIGHT",
            InFlightPolicy::Wait,
            &[
                ("wait", InFlightPolicy::Wait),
                ("conflict", InFlightPolicy::Conflict),
                ("ack", InFlightPolicy::Ack),
            ],
        )?;
        let wait_ms = vars.number("WAIT_MS", 10_000, 0)?;
        let origin_timeout_ms = vars.number("ORIGIN_TIMEOUT_MS", 10_000, 1)?;
        let lease_ms = vars.number("LEASE_MS", origin_timeout_ms + 5_000, 1)?;
        let retention_seconds = vars.number("RETENTION_SECONDS", 259_200, 1)?;
        let max_body_bytes = vars.number("MAX_BODY_BYTES", 1_048_576, 1)?;
        let max_stored_response_bytes = vars.number("MAX_STORED_RESPONSE_BYTES", 65_536, 0)?;
        if max_stored_response_bytes > MAX_STORABLE_RESPONSE_BYTES {
            return Err(misconfigured(
                "MAX_STORED_RESPONSE_BYTES",
                format!(
                    "must be at most {MAX_STORABLE_RESPONSE_BYTES}: a Durable Object's SQLite row \
                     holds at most 2 MB, and the receipt keeps the body beside its record"
                ),
            ));
        }
        Ok(Config {
            origin_url,
            mode,
            key_sources,
            key_scope,
            tenant_header,
            in_flight,
            wait_ms,
            origin_timeout_ms,
            lease_ms,
            retention_seconds,
            max_body_bytes,
            max_stored_response_bytes,
            signature_scheme,
            signature_tolerance_seconds,
            forward_secret: vars.get("FORWARD_SECRET")?.map(Secret::new),
            admin_token: vars.get("ADMIN_TOKEN")?.map(Secret::new),
        })
    }
}

/// The largest replay body a receipt can hold. Durable Object SQLite stores
/// at most 2 MB per row; the receipt row also holds its record (headers,
/// attempts), so half of that is left to the body. A larger setting could
/// only fail later, when an outcome is recorded.
pub const MAX_STORABLE_RESPONSE_BYTES: u64 = 1_048_576;

fn misconfigured(variable: &'static str, reason: impl Into<String>) -> Problem {
    Problem::Misconfigured {
        variable,
        reason: reason.into(),
    }
}

struct Vars<'a, F: Fn(&str) -> Option<String>>(&'a F);

impl<F: Fn(&str) -> Option<String>> Vars<'_, F> {
    /// A set variable; an empty or blank value is an error, not "unset".
    fn get(&self, name: &'static str) -> Result<Option<String>, Problem> {
        match (self.0)(name) {
            None => Ok(None),
            Some(value) if value.trim().is_empty() => Err(misconfigured(name, "is set but empty")),
            Some(value) => Ok(Some(value.trim().to_string())),
        }
    }

    fn required(&self, name: &'static str) -> Result<String, Problem> {
        self.get(name)?
            .ok_or_else(|| misconfigured(name, "is required and not set"))
    }

    fn required_for(&self, name: &'static str, because: &str) -> Result<String, Problem> {
        self.get(name)?
            .ok_or_else(|| misconfigured(name, format!("is required by {because}")))
    }

    fn choice<T: Copy>(
        &self,
        name: &'static str,
        default: T,
        options: &[(&str, T)],
    ) -> Result<T, Problem> {
        let Some(value) = self.get(name)? else {
            return Ok(default);
        };
        options
            .iter()
            .find(|(label, _)| label.eq_ignore_ascii_case(&value))
            .map(|(_, choice)| *choice)
            .ok_or_else(|| {
                let labels: Vec<&str> = options.iter().map(|(label, _)| *label).collect();
                misconfigured(
                    name,
                    format!("{value:?} is not one of {}", labels.join(", ")),
                )
            })
    }

    fn number(&self, name: &'static str, default: u64, minimum: u64) -> Result<u64, Problem> {
        let Some(value) = self.get(name)? else {
            return Ok(default);
        };
        match value.parse::<u64>() {
            Ok(number) if number >= minimum => Ok(number),
            Ok(_) => Err(misconfigured(name, format!("must be at least {minimum}"))),
            Err(_) => Err(misconfigured(
                name,
                format!("{value:?} is not a whole number"),
            )),
        }
    }
}

fn parse_origin_url(value: String) -> Result<String, Problem> {
    let url = url::Url::parse(&value)
        .map_err(|error| misconfigured("ORIGIN_URL", format!("{value:?} is not a URL: {error}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(misconfigured(
            "ORIGIN_URL",
            format!("{value:?} is not an http(s) URL with a host"),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(misconfigured(
            "ORIGIN_URL",
            "must not carry a query or fragment: the request's own are appended",
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

    fn variable_of(problem: Problem) -> &'static str {
        match problem {
            Problem::Misconfigured { variable, .. } => variable,
            other => panic!("expected misconfigured, got {other:?}"),
        }
    }

    #[test]
    fn defaults_follow_the_spec() {
        let config = config(&[("ORIGIN_URL", "https://api.example.com/")]).unwrap();
        assert_eq!(config.origin_url, "https://api.example.com");
        assert_eq!(config.mode, DedupMode::Webhook);
        assert_eq!(config.key_sources.len(), 4);
        assert_eq!(config.key_scope, KeyScope::Path);
        assert_eq!(config.in_flight, InFlightPolicy::Wait);
        assert_eq!(config.wait_ms, 10_000);
        assert_eq!(config.origin_timeout_ms, 10_000);
        assert_eq!(config.lease_ms, 15_000);
        assert_eq!(config.retention_seconds, 259_200);
        assert_eq!(config.max_body_bytes, 1_048_576);
        assert_eq!(config.max_stored_response_bytes, 65_536);
        assert_eq!(config.forward_secret, None);
    }

    #[test]
    fn a_stored_response_limit_a_row_cannot_hold_is_misconfigured() {
        let limit = MAX_STORABLE_RESPONSE_BYTES.to_string();
        let config_at_limit = config(&[
            ("ORIGIN_URL", "http://o"),
            ("MAX_STORED_RESPONSE_BYTES", limit.as_str()),
        ]);
        assert_eq!(
            config_at_limit.unwrap().max_stored_response_bytes,
            MAX_STORABLE_RESPONSE_BYTES
        );
        let over = (MAX_STORABLE_RESPONSE_BYTES + 1).to_string();
        let problem = config(&[
            ("ORIGIN_URL", "http://o"),
            ("MAX_STORED_RESPONSE_BYTES", over.as_str()),
        ]);
        assert_eq!(
            variable_of(problem.unwrap_err()),
            "MAX_STORED_RESPONSE_BYTES"
        );
    }

    #[test]
    fn lease_defaults_to_timeout_plus_five_seconds() {
        let config = config(&[("ORIGIN_URL", "http://o"), ("ORIGIN_TIMEOUT_MS", "2000")]).unwrap();
        assert_eq!(config.lease_ms, 7_000);
    }

    #[test]
    fn api_mode_uses_only_the_idempotency_key_header() {
        let config = config(&[("ORIGIN_URL", "http://o"), ("DEDUP_MODE", "api")]).unwrap();
        assert_eq!(
            config.key_sources,
            vec![KeySource::Header("idempotency-key".into())]
        );
    }

    #[test]
    fn signed_schemes_need_a_secret_and_default_to_signed_keys() {
        for scheme in ["stripe", "standard-webhooks"] {
            let problem = config(&[("ORIGIN_URL", "http://o"), ("SIGNATURE_SCHEME", scheme)]);
            assert_eq!(variable_of(problem.unwrap_err()), "SIGNING_SECRET");
        }
        let stripe = config(&[
            ("ORIGIN_URL", "http://o"),
            ("SIGNATURE_SCHEME", "stripe"),
            ("SIGNING_SECRET", "whsec_x"),
        ])
        .unwrap();
        assert_eq!(
            stripe.key_sources,
            vec![KeySource::JsonPointer("/id".into())]
        );
        let standard = config(&[
            ("ORIGIN_URL", "http://o"),
            ("SIGNATURE_SCHEME", "standard-webhooks"),
            ("SIGNING_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        ])
        .unwrap();
        assert_eq!(
            standard.key_sources,
            vec![KeySource::Header("webhook-id".into())]
        );
        let bad_secret = config(&[
            ("ORIGIN_URL", "http://o"),
            ("SIGNATURE_SCHEME", "standard-webhooks"),
            ("SIGNING_SECRET", "whsec_not base64!"),
        ]);
        assert_eq!(variable_of(bad_secret.unwrap_err()), "SIGNING_SECRET");
    }

    #[test]
    fn missing_origin_url_names_the_variable() {
        assert_eq!(variable_of(config(&[]).unwrap_err()), "ORIGIN_URL");
    }

    #[test]
    fn invalid_origin_urls_are_rejected() {
        for bad in ["not a url", "ftp://x", "http://o/?q=1", "   "] {
            assert_eq!(
                variable_of(config(&[("ORIGIN_URL", bad)]).unwrap_err()),
                "ORIGIN_URL",
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_choices_and_non_numbers_are_errors_not_defaults() {
        let cases = [
            ("DEDUP_MODE", "batch"),
            ("IN_FLIGHT", "drop"),
            ("KEY_SCOPE", "tenant"),
            ("WAIT_MS", "ten"),
            ("ORIGIN_TIMEOUT_MS", "0"),
            ("MAX_BODY_BYTES", "-1"),
            ("KEY_SOURCES", "cookie:x"),
            ("SIGNATURE_SCHEME", "md5"),
            ("SIGNATURE_TOLERANCE_SECONDS", "5m"),
            ("TENANT_HEADER", "bad header"),
            ("ADMIN_TOKEN", ""),
        ];
        for (name, value) in cases {
            let problem = config(&[("ORIGIN_URL", "http://o"), (name, value)]).unwrap_err();
            assert_eq!(variable_of(problem), name, "{name}={value}");
        }
    }
}
