//! A route's `order_key`, `order_time`, `on_stale` and `ORDER_HOLD_MS`
//! (SPEC §12, v4), checked: both sources or neither, read from signed
//! bytes as keys are, and only on an async route.

use super::settings::{misconfigured, Settings};
use crate::key::{KeyPart, KeySource};
use crate::problem::Problem;
use crate::signature::SignatureScheme;

/// How a route orders its deliveries per entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderConfig {
    /// Which entity a delivery is about (`order_key`).
    pub key: KeySource,
    /// The event's own time (`order_time`): one part.
    pub time: KeySource,
    /// `on_stale = "skip"`: a stale delivery ends `superseded`.
    pub skip_stale: bool,
    /// `ORDER_HOLD_MS`: the longest a delivery waits for an older one
    /// that may still come.
    pub hold_ms: u64,
}

pub const DEFAULT_HOLD_MS: u64 = 2_000;
pub const MAX_HOLD_MS: u64 = 60_000;

pub(super) fn order_config(
    settings: &Settings,
    scheme: &SignatureScheme,
    delivery_async: bool,
) -> Result<Option<OrderConfig>, Problem> {
    let key = settings.get("ORDER_KEY")?;
    let time = settings.get("ORDER_TIME")?;
    let on_stale = settings.get("ON_STALE")?;
    let hold_ms = settings.number("ORDER_HOLD_MS", DEFAULT_HOLD_MS, 0, MAX_HOLD_MS)?;
    let (key, time) = match (key, time) {
        (None, None) => {
            return match on_stale {
                Some(setting) => Err(misconfigured(
                    setting.label,
                    "orders nothing without order_key and order_time",
                )),
                None => Ok(None),
            }
        }
        (Some(key), Some(time)) => (key, time),
        (Some(set), None) | (None, Some(set)) => {
            return Err(misconfigured(
                set.label,
                "needs both order_key and order_time (SPEC §12)",
            ))
        }
    };
    if !delivery_async {
        return Err(misconfigured(
            key.label,
            "is for async routes: a sync delivery's sender waits, and cannot be held for another's turn (set delivery = \"async\")",
        ));
    }
    let source = |setting: &super::settings::Setting| {
        let source = KeySource::parse(&setting.value)
            .map_err(|reason| misconfigured(setting.label.clone(), reason))?;
        for part in &source.parts {
            if matches!(part, KeyPart::BodySha256 | KeyPart::SchemeKey) {
                return Err(misconfigured(
                    setting.label.clone(),
                    format!(
                        "{} names no entity or time; use json:, header: or form:",
                        part.label()
                    ),
                ));
            }
            scheme
                .allows(part)
                .map_err(|reason| misconfigured(setting.label.clone(), reason))?;
        }
        Ok(source)
    };
    let order_key = source(&key)?;
    let order_time = source(&time)?;
    if order_time.parts.len() != 1 {
        return Err(misconfigured(
            time.label,
            "is one source: a time is not joined from parts",
        ));
    }
    let skip_stale = settings.choice("ON_STALE", false, &[("forward", false), ("skip", true)])?;
    Ok(Some(OrderConfig {
        key: order_key,
        time: order_time,
        skip_stale,
        hold_ms,
    }))
}
