//! SPEC §0: which route a request belongs to, from its normalised path.
//!
//! Normalisation serves route matching and path scope only; the origin
//! receives the path as the sender sent it. It decodes percent-encoded
//! unreserved characters (RFC 3986 §6.2.2.2), upper-cases the hex digits of
//! the escapes it keeps (§6.2.2.1), removes dot segments (§5.2.4),
//! collapses repeated slashes and drops a trailing slash, so that a genuine
//! signed delivery replayed to `/webhooks/stripe/`, `//webhooks/stripe` or
//! `/webhooks/%73tripe` is the same key. An encoded `/` or `\` (which would
//! let one path pose as two) and a malformed escape are refused.

use crate::problem::Problem;

/// The prefix of the operator API, matched on the normalised path.
pub const OPERATOR_PREFIX: &str = "/__idemgate";

/// The normalised form of a request path (query excluded).
pub fn normalize_path(raw: &str) -> Result<String, Problem> {
    let decoded = decode_unreserved(raw)?;
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let mut path = String::with_capacity(decoded.len() + 1);
    for segment in &segments {
        path.push('/');
        path.push_str(segment);
    }
    if path.is_empty() {
        path.push('/');
    }
    Ok(path)
}

fn invalid(reason: &str) -> Problem {
    Problem::InvalidPath {
        reason: reason.to_string(),
    }
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn decode_unreserved(raw: &str) -> Result<String, Problem> {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'%' {
            let next = raw[at..].find('%').map_or(raw.len(), |offset| at + offset);
            out.push_str(&raw[at..next]);
            at = next;
            continue;
        }
        let hex = bytes
            .get(at + 1..at + 3)
            .filter(|pair| pair.iter().all(u8::is_ascii_hexdigit))
            .ok_or_else(|| invalid("the path holds a malformed percent-escape"))?;
        let value = u8::from_str_radix(std::str::from_utf8(hex).expect("hex digits"), 16)
            .expect("two hex digits");
        match value {
            b'/' | b'\\' => {
                return Err(invalid(
                    "the path holds an encoded '/' or '\\' (%2F, %5C), which could make one path pass for another",
                ))
            }
            byte if is_unreserved(byte) => out.push(char::from(byte)),
            _ => {
                out.push('%');
                out.push_str(&std::str::from_utf8(hex).expect("hex digits").to_ascii_uppercase());
            }
        }
        at += 3;
    }
    Ok(out)
}

/// Whether the normalised `path` is `prefix` or lies under it, on whole
/// segments: `/webhooks/stripe` covers `/webhooks/stripe/x`, not
/// `/webhooks/stripex`.
pub fn covers(prefix: &str, path: &str) -> bool {
    prefix == "/"
        || path == prefix
        || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

/// Whether a normalised path belongs to the operator API.
pub fn is_operator(path: &str) -> bool {
    covers(OPERATOR_PREFIX, path)
}

/// The route that covers `path` with the longest prefix, among `prefixes`
/// (index, prefix); `None` when none does.
pub fn longest_match<'a, I>(prefixes: I, path: &str) -> Option<usize>
where
    I: IntoIterator<Item = (usize, &'a str)>,
{
    prefixes
        .into_iter()
        .filter(|(_, prefix)| covers(prefix, path))
        .max_by_key(|(_, prefix)| prefix.len())
        .map(|(index, _)| index)
}

/// A valid route name: 1 to 32 characters of `a-z`, `0-9` and `-`.
pub fn is_route_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(raw: &str) -> String {
        normalize_path(raw).unwrap()
    }

    #[test]
    fn variants_of_one_path_normalise_alike() {
        for raw in [
            "/webhooks/stripe",
            "/webhooks/stripe/",
            "//webhooks/stripe",
            "/webhooks//stripe//",
            "/webhooks/%73tripe",
            "/webhooks/%73%74ripe",
            "/webhooks/./stripe",
            "/webhooks/x/../stripe",
            "/webhooks/%2e/stripe",
            "/../webhooks/stripe",
        ] {
            assert_eq!(normal(raw), "/webhooks/stripe", "{raw}");
        }
    }

    #[test]
    fn case_and_reserved_escapes_are_kept() {
        assert_eq!(normal("/Webhooks/Stripe"), "/Webhooks/Stripe");
        assert_eq!(normal("/a%20b/c%c3%a9"), "/a%20b/c%C3%A9");
        assert_eq!(normal("/a%3Fb"), "/a%3Fb");
        assert_eq!(normal("/"), "/");
        assert_eq!(normal(""), "/");
        assert_eq!(normal("/.."), "/");
        assert_eq!(normal("/~user/a-b_c"), "/~user/a-b_c");
        assert_eq!(normal("/%7Euser"), "/~user");
    }

    #[test]
    fn encoded_separators_and_bad_escapes_are_refused() {
        for raw in [
            "/a%2Fb", "/a%2fb", "/a%5Cb", "/a%5cb", "/a%", "/a%2", "/a%zz", "/a%%41",
        ] {
            let problem = normalize_path(raw).unwrap_err();
            assert_eq!(problem.name(), "invalid-path", "{raw}");
            assert_eq!(problem.status(), 400);
        }
    }

    #[test]
    fn prefixes_match_whole_segments_and_the_longest_wins() {
        assert!(covers("/webhooks/stripe", "/webhooks/stripe"));
        assert!(covers("/webhooks/stripe", "/webhooks/stripe/x"));
        assert!(!covers("/webhooks/stripe", "/webhooks/stripex"));
        assert!(!covers("/webhooks/stripe", "/webhooks"));
        assert!(covers("/", "/anything"));
        let routes = [(0, "/"), (1, "/webhooks"), (2, "/webhooks/stripe")];
        assert_eq!(longest_match(routes, "/webhooks/stripe/evt"), Some(2));
        assert_eq!(longest_match(routes, "/webhooks/adyen"), Some(1));
        assert_eq!(longest_match(routes, "/v1/charges"), Some(0));
        assert_eq!(longest_match([(0, "/v1")], "/v2"), None);
    }

    #[test]
    fn the_operator_api_is_found_on_the_normalised_path() {
        assert!(is_operator(&normal("/__idemgate/health")));
        assert!(is_operator(&normal("/x/../__idemgate/receipts")));
        assert!(is_operator(&normal("//__idemgate//stats")));
        assert!(!is_operator(&normal("/__idemgatex/health")));
    }

    #[test]
    fn route_names() {
        assert!(is_route_name("stripe"));
        assert!(is_route_name("psp-2"));
        assert!(is_route_name(&"a".repeat(32)));
        for bad in ["", "Stripe", "a_b", "a b", &"a".repeat(33)] {
            assert!(!is_route_name(bad), "{bad}");
        }
    }
}
