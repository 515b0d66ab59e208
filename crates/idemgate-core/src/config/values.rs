//! The formats of values configuration holds: origin URLs and retry
//! schedules.

use super::settings::{misconfigured, Setting};
use crate::problem::Problem;

/// `http(s)://host[:port][/base]`, no query, fragment or credentials. The
/// detail never echoes the value: it may hold credentials. Checked by hand
/// rather than with the `url` crate, whose IDNA tables would cost the wasm
/// about 20 KiB gzipped; the runtime parses the URL again on every fetch.
pub(super) fn parse_origin_url(setting: &Setting) -> Result<String, Problem> {
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
