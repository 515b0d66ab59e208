//! Header lists as plain data, and the filters SPEC §5 applies to them.
//!
//! The Workers `Headers` type is JS-backed and panics in native tests, so the
//! pure core sees headers as `(lowercase name, value)` pairs.

pub type HeaderList = Vec<(String, String)>;

/// Inbound headers never forwarded (SPEC §5), in any case: idemgate sets
/// `Idempotency-*` itself, and `x-idemgate-*` is its own namespace. The
/// underscore spellings go too, because many servers (CGI, nginx with
/// `underscores_in_headers`, Rails) read `Idempotency_Key` as
/// `Idempotency-Key`.
pub const FORBIDDEN_PREFIXES: &[&str] =
    &["idempotency-", "idempotency_", "x-idemgate-", "x-idemgate_"];
pub const REPLAYED: &str = "Idempotent-Replayed";
pub const DECISION: &str = "Idemgate-Decision";
pub const RECEIPT_ID: &str = "Idemgate-Receipt-Id";

/// Whether a sender may have set this header to impersonate idemgate.
pub fn is_forbidden(name: &str) -> bool {
    let name = name.as_bytes();
    FORBIDDEN_PREFIXES.iter().any(|prefix| {
        name.len() >= prefix.len() && name[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
    })
}

/// `Set-Cookie` belongs to the one caller whose delivery was forwarded
/// (SPEC §2): it is never stored, replayed or given to a waiting duplicate.
pub fn is_set_cookie(name: &str) -> bool {
    name.eq_ignore_ascii_case("set-cookie") || name.eq_ignore_ascii_case("set-cookie2")
}

/// A response's headers for anyone but the caller it was made for.
pub fn without_set_cookie(headers: &[(String, String)]) -> HeaderList {
    headers
        .iter()
        .filter(|(name, _)| !is_set_cookie(name))
        .cloned()
        .collect()
}

/// An RFC 9110 token, which is what a header name is.
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

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
                && !is_forbidden(&name)
                && name != "content-length"
                && name != "host"
        })
        .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
        .collect()
}

/// What of an origin response is kept for replay: everything but hop-by-hop
/// headers, `content-length` (the runtime recomputes it) and `Set-Cookie`.
pub fn for_replay(headers: &[(String, String)]) -> HeaderList {
    let connection = connection_tokens(headers);
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_lowercase();
            !is_hop_by_hop(&name, &connection) && name != "content-length" && !is_set_cookie(&name)
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
            // What idemgate sets itself and v2 signs: never from a sender.
            ("Idempotency-Signature-V2", "t=1,v2=00"),
            ("idempotency-source", "reconciliation"),
            ("Idempotency-Stale", "true"),
            ("Idempotency_Source", "reconciliation"),
            ("x-idemgate-key", "forged"),
            ("Idempotency_Key", "forged"),
            ("IDEMPOTENCY_EPOCH", "99"),
            ("X-Idemgate_Scope", "forged"),
            ("idempotencykey", "kept: not the prefix"),
            ("stripe-signature", "t=1,v1=ab"),
            ("content-length", "12"),
        ]);
        assert_eq!(
            for_origin(&inbound),
            list(&[
                ("content-type", "application/json"),
                ("idempotencykey", "kept: not the prefix"),
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
            ("Set-Cookie", "session=abc"),
            ("set-cookie2", "old=1"),
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
    fn set_cookie_is_kept_only_for_its_caller() {
        let response = list(&[("set-cookie", "s=1"), ("x-a", "1"), ("SET-COOKIE", "t=2")]);
        assert_eq!(without_set_cookie(&response), list(&[("x-a", "1")]));
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
