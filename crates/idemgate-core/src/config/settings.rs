//! Where a route's setting comes from (its own table, then the top level)
//! and what may be said of it: the name to blame, never a secret's value.

use crate::json::{Json, Member};
use crate::problem::Problem;
use crate::signature::Secret;

pub(super) fn misconfigured(variable: impl Into<String>, reason: impl Into<String>) -> Problem {
    Problem::Misconfigured {
        variable: variable.into(),
        reason: reason.into(),
    }
}

/// A value from configuration, safe to print in a problem's detail: no
/// control characters, at most 64 of them, and never what looks like a
/// secret put where a name belongs (SPEC §6, v3).
/// `12.5` as 12500: digits, and at most three after a point.
fn thousandths(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if whole.is_empty()
        || whole.len() > 9
        || fraction.len() > 3
        || !digits(whole)
        || !digits(fraction)
        || (text.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let fraction: u64 = format!("{fraction:0<3}").parse().ok()?;
    Some(whole.parse::<u64>().ok()? * 1_000 + fraction)
}

pub(super) fn printable(text: &str) -> String {
    if looks_like_secret(text) {
        return "(a value that looks like a secret, not shown)".into();
    }
    text.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// A secret's name (SPEC §6, v3): 1 to 64 of `A-Z`, `0-9` and `_`.
pub fn is_secret_name(text: &str) -> bool {
    (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'_')
}

/// Whether `text` looks like a secret's value rather than its name: a
/// prefix providers give secrets, a long run of hex, or base64 (which a
/// name, all capitals, never is).
pub fn looks_like_secret(text: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "whsec_", "whpk_", "whsk_", "sk_", "rk_", "pk_", "shpss_", "pdl_", "xoxb-", "xoxp-",
    ];
    let text = text.trim();
    let lowered = text.to_ascii_lowercase();
    let hex = text.len() >= 32 && text.bytes().all(|byte| byte.is_ascii_hexdigit());
    let base64 = text.len() >= 24
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"+/=-_".contains(&byte))
        && text.bytes().any(|byte| byte.is_ascii_lowercase())
        && text.bytes().any(|byte| byte.is_ascii_digit());
    PREFIXES.iter().any(|prefix| lowered.starts_with(prefix)) || hex || base64
}

/// A setting's value and the name to blame when it is wrong.
pub(super) struct Setting {
    pub(super) value: String,
    pub(super) label: String,
}

impl Setting {
    pub(super) fn default_of(value: &str) -> Setting {
        Setting {
            value: value.to_string(),
            label: "default".to_string(),
        }
    }
}

/// Where a route's settings come from: its own table, then the top level.
pub(super) struct Settings<'a> {
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) route: Option<(&'a str, &'a [Member<'a>])>,
}

/// The route-table field names of a variable: its lowercase name, and the
/// shorter names SPEC §0's example uses.
fn field_names(variable: &str) -> Vec<String> {
    let mut names = vec![variable.to_ascii_lowercase()];
    match variable {
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
    "ORIGIN",
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
    "MAX_IN_FLIGHT",
    "RATE_PER_SECOND",
    "FLOW_SHARDS",
    "ACK_STATUS",
    "ACK_BODY",
    "MAX_BODY_BYTES",
    "MAX_STORED_RESPONSE_BYTES",
    "MAX_BATCH_EVENTS",
    "ORDER_KEY",
    "ORDER_TIME",
    "ON_STALE",
    "ORDER_HOLD_MS",
    "SIGNATURE_SCHEME",
    "SIGNATURE_TOLERANCE_SECONDS",
    "SIGNATURE_HEADER",
    "SIGNATURE_ENCODING",
    "SIGNATURE_PREFIX",
    "SIGNATURE_URL",
    "SIGNATURE_CERT_HOSTS",
    "SIGNATURE_API_BASE",
    "LOG_DUPLICATES",
    "SIGNING_SECRET",
    "PLAID_CLIENT_ID",
    "FORWARD_SECRET",
    "ADMIN_TOKEN",
];

impl Settings<'_> {
    pub(super) fn label(&self, variable: &str) -> String {
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
    pub(super) fn check_fields(&self) -> Result<(), Problem> {
        let Some((route, fields)) = self.route else {
            return Ok(());
        };
        for (field, _) in fields {
            let known = field == "reconcile"
                || ROUTE_VARIABLES
                    .iter()
                    .any(|variable| field_names(variable).iter().any(|name| name == field));
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
    pub(super) fn own(&self, variable: &str) -> Result<Option<Setting>, Problem> {
        let Some((route, fields)) = self.route else {
            return Ok(None);
        };
        for name in field_names(variable) {
            let Some((_, value)) = fields.iter().find(|(field, _)| *field == name) else {
                continue;
            };
            let label = format!("ROUTES.{route}.{name}");
            let text = match value {
                Json::String(text) | Json::Number(text) => text.to_string(),
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
    pub(super) fn top(&self, variable: &str) -> Result<Option<Setting>, Problem> {
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

    pub(super) fn get(&self, variable: &str) -> Result<Option<Setting>, Problem> {
        match self.own(variable)? {
            Some(setting) => Ok(Some(setting)),
            None if variable == "PATH" => Ok(None),
            None => self.top(variable),
        }
    }

    /// A secret: a route names it (the Worker secret, or locally the
    /// `.dev.vars` entry or `--var`, of that name); the top level holds it.
    pub(super) fn secret(&self, variable: &str) -> Result<Option<Secret>, Problem> {
        Ok(self.named_secret(variable)?.map(|(_, secret)| secret))
    }

    /// The signing secrets (SPEC §4, v3: several while a sender rotates):
    /// those a route names, as one name or a list of them, or the top
    /// level's `SIGNING_SECRET` and `SIGNING_SECRET_PREVIOUS`. The current
    /// one first; it is the one a test delivery is signed with.
    pub(super) fn signing_secrets(&self) -> Result<Vec<Secret>, Problem> {
        if let Some((route, fields)) = self.route {
            let found = fields.iter().find(|(field, _)| field == "signing_secret");
            if let Some((_, Json::Array(names))) = found {
                let label = format!("ROUTES.{route}.signing_secret");
                if names.is_empty() {
                    return Err(misconfigured(label, "names no secret"));
                }
                return names
                    .iter()
                    .map(|name| match name {
                        Json::String(name) => self.named(&label, name),
                        _ => Err(misconfigured(
                            label.clone(),
                            "is a list of the names of secrets",
                        )),
                    })
                    .collect();
            }
        }
        let mut secrets: Vec<Secret> = self.secret("SIGNING_SECRET")?.into_iter().collect();
        if self.route.is_none() || self.own("SIGNING_SECRET")?.is_none() {
            secrets.extend(self.top_secret("SIGNING_SECRET_PREVIOUS")?);
        }
        Ok(secrets)
    }

    /// The top level's secret `variable`, if set.
    fn top_secret(&self, variable: &str) -> Result<Option<Secret>, Problem> {
        match (self.env)(variable) {
            None => Ok(None),
            Some(value) if value.is_empty() => Err(misconfigured(variable, "is set but empty")),
            Some(value) => Ok(Some(Secret::new(value))),
        }
    }

    /// The secret a route names `name`, blamed on `label`.
    pub(super) fn named(&self, label: &str, name: &str) -> Result<Secret, Problem> {
        if !is_secret_name(name) || looks_like_secret(name) {
            let reason = match looks_like_secret(name) {
                true => "holds a value, not the name of a secret: put the value in a Worker secret (wrangler secret put NAME) and name it here",
                false => "is not the name of a secret (1 to 64 of A-Z, 0-9 and _)",
            };
            return Err(misconfigured(label, reason));
        }
        match (self.env)(name).filter(|value| !value.is_empty()) {
            Some(value) => Ok(Secret::new(value)),
            None => Err(misconfigured(
                label,
                format!("names the secret {name}, which is not set (wrangler secret put {name})"),
            )),
        }
    }

    /// A secret and the name it is read by.
    pub(super) fn named_secret(&self, variable: &str) -> Result<Option<(String, Secret)>, Problem> {
        if let Some(named) = self.own(variable)? {
            if !is_secret_name(&named.value) || looks_like_secret(&named.value) {
                let reason = match looks_like_secret(&named.value) {
                    true => "holds a value, not the name of a secret: put the value in a Worker secret (wrangler secret put NAME) and name it here",
                    false => "is not the name of a secret (1 to 64 of A-Z, 0-9 and _)",
                };
                return Err(misconfigured(named.label, reason));
            }
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

    pub(super) fn choice<T: Copy>(
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

    /// An optional whole number in `minimum..=maximum`.
    pub(super) fn optional_number(
        &self,
        variable: &str,
        minimum: u64,
        maximum: u64,
    ) -> Result<Option<u64>, Problem> {
        match self.get(variable)? {
            None => Ok(None),
            Some(_) => self.number(variable, 0, minimum, maximum).map(Some),
        }
    }

    /// An optional positive decimal number of at most `maximum`, with at
    /// most three decimals, in thousandths (`RATE_PER_SECOND=0.5` is 500).
    pub(super) fn optional_thousandths(
        &self,
        variable: &str,
        maximum: u64,
    ) -> Result<Option<u64>, Problem> {
        let Some(setting) = self.get(variable)? else {
            return Ok(None);
        };
        match thousandths(&setting.value) {
            Some(value) if value > 0 && value <= maximum * 1_000 => Ok(Some(value)),
            _ => Err(misconfigured(
                setting.label,
                format!(
                    "{:?} is not a positive number of at most {maximum}, with at most three decimals",
                    printable(&setting.value)
                ),
            )),
        }
    }

    pub(super) fn number(
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
