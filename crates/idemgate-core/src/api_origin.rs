//! The origins a route may name for a sender's API or its certificates
//! (SPEC §4, v4): `https://host[:port]`, and plain `http://` only for a
//! loopback host, exactly `127.0.0.1`, `[::1]` or `localhost`, so a test
//! can point a route at a local fake. Each such origin is compared as a
//! whole: a prefix would let `http://localhost.attacker.example` pass.

/// `text` as a lowercase origin, if it is one a route may name.
pub fn parse_api_origin(text: &str) -> Option<String> {
    let origin = text.to_ascii_lowercase();
    let (secure, rest) = match origin.strip_prefix("https://") {
        Some(rest) => (true, rest),
        None => (false, origin.strip_prefix("http://")?),
    };
    let (host, port) = split_port(rest)?;
    if let Some(port) = port {
        let valid = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|byte| byte.is_ascii_digit())
            && port
                .parse::<u32>()
                .is_ok_and(|port| (1..=65_535).contains(&port));
        if !valid {
            return None;
        }
    }
    let loopback = matches!(host, "127.0.0.1" | "[::1]" | "localhost");
    let allowed = match secure {
        true => loopback || is_dns_name(host),
        false => loopback,
    };
    allowed.then_some(origin)
}

/// The host and, after a `:`, the port (a bracketed IPv6 host keeps its
/// colons).
fn split_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (host, after) = authority.split_at(end + 1);
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    Some(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

/// A DNS name: dot-separated labels of letters, digits and inner hyphens,
/// and not an IPv4 address in any spelling a URL parser takes as one (its
/// last label a number: `169.254.169.254`, `2852039166`, `0xa9fea9fe`), so
/// that no configured origin reaches an address by number (a cloud
/// metadata endpoint, a private network).
fn is_dns_name(host: &str) -> bool {
    !host.is_empty()
        && !ends_in_a_number(host)
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        })
}

/// The WHATWG URL standard's "ends in a number": such a host is parsed
/// as IPv4.
fn ends_in_a_number(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or(host);
    if !last.is_empty() && last.bytes().all(|byte| byte.is_ascii_digit()) {
        return true;
    }
    last.strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|hex| hex.bytes().all(|byte| byte.is_ascii_hexdigit()))
}

/// The host of `url`, for naming it where a person reads it: no scheme,
/// user, password, port, path or query (a sink's URL may hold credentials
/// in any of those). `None` when no plausible host is there.
pub fn host_for_display(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_and_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let (host, _) = split_port(host_and_port)?;
    let plausible = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b".-[]:".contains(&byte));
    plausible.then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_hosts_and_loopback_http_only() {
        for (text, origin) in [
            ("https://api.paypal.com", "https://api.paypal.com"),
            (
                "https://API.sandbox.PayPal.com:8443",
                "https://api.sandbox.paypal.com:8443",
            ),
            ("http://127.0.0.1:9999", "http://127.0.0.1:9999"),
            ("http://localhost", "http://localhost"),
            ("http://[::1]:8080", "http://[::1]:8080"),
        ] {
            assert_eq!(parse_api_origin(text).as_deref(), Some(origin), "{text}");
        }
        // The review's case (round 4, item 14): a prefix is not the host.
        for text in [
            "http://localhost.attacker.example",
            "http://127.0.0.1.attacker.example",
            "http://localhost:80@attacker.example",
            "http://evil.example",
            "http://[::1].example",
            "https://a.example/path",
            "https://a.example?x",
            "https://a.example:",
            "https://a.example:0",
            "https://a.example:65536",
            "https://a.example:+80",
            "https://-a.example",
            "https://a..example",
            "https://",
            "ftp://a.example",
            "https://user@a.example",
        ] {
            assert_eq!(parse_api_origin(text), None, "{text}");
        }
    }

    /// The review's item 16 (round 5): an address by number is refused in
    /// every spelling a URL parser reads as IPv4.
    #[test]
    fn ip_literals_are_refused_however_spelt() {
        for text in [
            "https://169.254.169.254",
            "https://10.0.0.1:8443",
            "https://2852039166",
            "https://0xa9fea9fe",
            "https://0XA9.0xfe.0xa9fe",
            "https://169.254.169.254.",
            "https://[fd00::1]",
            "https://[::ffff:a9fe:a9fe]",
        ] {
            assert_eq!(parse_api_origin(text), None, "{text}");
        }
        for text in [
            "https://a1.example",
            "https://0x.example",
            "https://example.0xz",
        ] {
            assert!(parse_api_origin(text).is_some(), "{text}");
        }
    }

    #[test]
    fn a_url_is_shown_by_its_host_alone() {
        for (url, host) in [
            (
                "https://ops-user:S3cretPassw0rd@ops.example/idemgate?token=x",
                Some("ops.example"),
            ),
            (
                "https://hooks.slack.com/services/T0/B0/XXXXsecret",
                Some("hooks.slack.com"),
            ),
            ("http://127.0.0.1:9999/sink", Some("127.0.0.1")),
            ("https://OPS.example:8443", Some("ops.example")),
            ("not a url", None),
            ("https://", None),
        ] {
            assert_eq!(host_for_display(url).as_deref(), host, "{url}");
        }
    }
}
