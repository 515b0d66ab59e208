//! Header lists as plain data, and the filters SPEC §5 applies to them.
//!
//! The Workers `Headers` type is JS-backed and panics in native tests, so the
//! pure core sees headers as `(lowercase name, value)` pairs.

pub type HeaderList = Vec<(String, String)>;

/// Headers idemgate adds to a forward; a sender must not be able to forge them.
pub const IDEMPOTENCY_PREFIX: &str = "idempotency-";
/// idemgate's own namespace. Nothing internal travels in headers (the
/// object is called over RPC), but inbound ones are still never forwarded,
/// so the namespace stays free for idemgate.
pub const INTERNAL_PREFIX: &str = "x-idemgate-";
pub const REPLAYED: &str = "Idempotent-Replayed";
pub const DECISION: &str = "Idemgate-Decision";

/// RFC 9110 §7.6.1 connection-specific headers, never forwarded or stored.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

pub fn get<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(header, _)| header.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Hop-by-hop headers, including any that `Connection` names.
fn is_hop_by_hop(name: &str, connection_tokens: &[String]) -> bool {
    HOP_BY_HOP.contains(&name) || connection_tokens.iter().any(|token| token == name)
}

/// A header list as one string, for crossing to JavaScript in one call
/// instead of one per header: NUL ends each name and each value, because
/// the Fetch standard forbids it in both.
pub fn encode_list(headers: &[(String, String)]) -> String {
    let mut text = String::with_capacity(
        headers
            .iter()
            .map(|(name, value)| name.len() + value.len() + 2)
            .sum(),
    );
    for (name, value) in headers {
        text.push_str(name);
        text.push('\0');
        text.push_str(value);
        text.push('\0');
    }
    text
}

/// The inverse of [`encode_list`]. A trailing name without a value (which
/// `encode_list` never writes) is dropped.
pub fn decode_list(text: &str) -> HeaderList {
    let mut parts = text.split('\0');
    let mut headers = Vec::new();
    while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
        headers.push((name.to_string(), value.to_string()));
    }
    headers
}

fn connection_tokens(headers: &[(String, String)]) -> Vec<String> {
    get(headers, "connection")
        .map(|value| {
            value
                .split(',')
                .map(|token| token.trim().to_ascii_lowercase())
                .filter(|token| !token.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// What a sender's headers become on the way to the origin: no hop-by-hop
/// headers, no `Idempotency-*` (idemgate sets its own), no internal ones,
/// and no `content-length` (the runtime sets it for the bytes it sends).
pub fn for_origin(headers: &[(String, String)]) -> HeaderList {
    let connection = connection_tokens(headers);
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_lowercase();
            !is_hop_by_hop(&name, &connection)
                && !name.starts_with(IDEMPOTENCY_PREFIX)
                && !name.starts_with(INTERNAL_PREFIX)
                && name != "content-length"
                && name != "host"
        })
        .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
        .collect()
}

/// What of an origin response is kept for replay: everything but hop-by-hop
/// headers and `content-length`, which the runtime recomputes.
pub fn for_replay(headers: &[(String, String)]) -> HeaderList {
    let connection = connection_tokens(headers);
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_lowercase();
            !is_hop_by_hop(&name, &connection) && name != "content-length"
        })
        .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> HeaderList {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn forward_drops_hop_by_hop_idempotency_and_internal_headers() {
        let inbound = list(&[
            ("content-type", "application/json"),
            ("Connection", "keep-alive, X-Trace"),
            ("x-trace", "1"),
            ("transfer-encoding", "chunked"),
            ("Idempotency-Key", "\"k\""),
            ("idempotency-epoch", "99"),
            ("idempotency-signature", "t=1,v1=00"),
            ("x-idemgate-key", "forged"),
            ("stripe-signature", "t=1,v1=ab"),
            ("content-length", "12"),
        ]);
        assert_eq!(
            for_origin(&inbound),
            list(&[
                ("content-type", "application/json"),
                ("stripe-signature", "t=1,v1=ab"),
            ])
        );
    }

    #[test]
    fn replay_keeps_origin_headers_but_not_framing() {
        let response = list(&[
            ("content-type", "application/json"),
            ("x-payment-id", "pay_1"),
            ("content-length", "10"),
            ("connection", "close"),
        ]);
        assert_eq!(
            for_replay(&response),
            list(&[
                ("content-type", "application/json"),
                ("x-payment-id", "pay_1"),
            ])
        );
    }

    #[test]
    fn a_list_survives_its_one_string_form() {
        let headers = list(&[
            ("content-type", "application/json"),
            ("x-empty", ""),
            ("set-cookie", "a=1; Path=/, b=2"),
        ]);
        assert_eq!(decode_list(&encode_list(&headers)), headers);
        assert_eq!(decode_list(&encode_list(&[])), HeaderList::new());
        assert_eq!(decode_list("dangling"), HeaderList::new());
    }

    #[test]
    fn get_is_case_insensitive() {
        let headers = list(&[("content-type", "text/plain")]);
        assert_eq!(get(&headers, "Content-Type"), Some("text/plain"));
        assert_eq!(get(&headers, "accept"), None);
    }
}
