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

/// A DNS name: dot-separated labels of letters, digits and inner hyphens.
fn is_dns_name(host: &str) -> bool {
    !host.is_empty()
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
}
