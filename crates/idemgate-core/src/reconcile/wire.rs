//! A provider's events API as data: the requests a run sends and what
//! their answers hold, and the small formats each provider's file shares
//! (query values, RFC 3339 times, next-page links on the API's origin).
//! Nothing here sends anything or knows a provider.

/// An id an endpoint is named by (Paddle's destination, PayPal's
/// webhook): letters, digits, `-` and `_`, at most 128.
pub(super) fn is_id(text: &str) -> bool {
    (1..=128).contains(&text.len())
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte))
}

/// A request to the provider's API. Its headers carry the credential: it
/// is sent, never logged or stored.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiRequest {
    pub method: &'static str,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
}

impl ApiRequest {
    /// A `GET` of `url` with `headers`: how every source lists.
    pub fn get(url: String, headers: Vec<(String, String)>) -> ApiRequest {
        ApiRequest {
            method: "GET",
            url,
            headers,
            body: None,
        }
    }
}

impl std::fmt::Debug for ApiRequest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ApiRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &"redacted")
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl ApiResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::headers::get(&self.headers, name)
    }
}

/// Why the API's answer ended a run: its status (0 when none came) and
/// what its error body said, cut short. Never a credential: the provider's
/// message is about the request, and requests hold the key only in a
/// header, which no error repeats.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApiError {
    pub status: u16,
    pub problem: String,
}

impl ApiError {
    /// A 429 or a 5xx (or no answer): the run backs off before the next.
    pub fn backs_off(&self) -> bool {
        self.status == 429 || self.status == 0 || self.status >= 500
    }

    pub(super) fn of(response: &ApiResponse, message: Option<String>) -> ApiError {
        let problem = message
            .map(|message| {
                message
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(200)
                    .collect()
            })
            .unwrap_or_else(|| format!("the API answered {}", response.status));
        ApiError {
            status: response.status,
            problem,
        }
    }

    pub(super) fn unreadable(what: &str) -> ApiError {
        ApiError {
            status: 200,
            problem: format!("the API's answer could not be read: {what}"),
        }
    }
}

/// The span of creation times a run lists, Unix seconds, both ends in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    pub from: u64,
    pub to: u64,
}

impl Window {
    pub fn contains(&self, unix_seconds: u64) -> bool {
        (self.from..=self.to).contains(&unix_seconds)
    }
}

/// One event as the API listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedEvent {
    /// The provider's event id.
    pub id: String,
    pub event_type: String,
    /// When the provider says it happened, Unix seconds.
    pub created: u64,
    /// The body its webhook has: what the route's key sources read, and,
    /// where idemgate delivers it, what the origin gets.
    pub body: Vec<u8>,
    /// Where the provider is asked to re-send it (a notification, event or
    /// delivery id), for a provider that does.
    pub resend_id: Option<String>,
    /// Whether the provider itself records a delivery that reached the
    /// route (GitHub, whose key idemgate cannot derive from the list).
    pub delivered_per_provider: Option<bool>,
    /// Whether everything the list says of it has been read: always, but
    /// for a GitHub event listed so far only by its redeliveries, whose
    /// first delivery (and perhaps the 2xx the route gave it) is on a later
    /// page.
    pub complete: bool,
}

/// One page of the list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    pub events: Vec<ListedEvent>,
    /// The cursor of the next page; `None` on the last.
    pub next: Option<String>,
}

/// The first string found at one of `pointers` in a JSON body.
pub(super) fn json_text(body: &[u8], pointers: &[&str]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    pointers.iter().find_map(|pointer| {
        value
            .pointer(pointer)
            .and_then(|found| found.as_str())
            .map(str::to_string)
    })
}

/// `url`, if it is on `base` (a next-page link must not send the key to
/// another host).
pub(crate) fn on_base(url: &str, base: &str) -> Option<String> {
    let rest = url.strip_prefix(base)?;
    (rest.starts_with('/') || rest.starts_with('?')).then(|| url.to_string())
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
pub(super) fn query_value(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                encoded.push(byte as char)
            }
            other => encoded.push_str(&format!("%{other:02X}")),
        }
    }
    encoded
}

/// `Authorization: Bearer <credential>` and JSON.
pub(super) fn bearer(credential: &str) -> Vec<(String, String)> {
    vec![
        ("authorization".into(), format!("Bearer {credential}")),
        ("accept".into(), "application/json".into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_link_off_the_base_is_not_followed() {
        let base = "https://api.paddle.com";
        assert!(on_base("https://api.paddle.com/notifications?after=x", base).is_some());
        assert!(on_base("https://api.paddle.com.evil.example/n", base).is_none());
        assert!(on_base("https://evil.example/?https://api.paddle.com", base).is_none());
    }

    #[test]
    fn an_error_is_short_and_has_no_control_characters() {
        let response = ApiResponse {
            status: 401,
            headers: vec![],
            body: format!(
                "{{\"error\":{{\"message\":\"bad\\nkey {}\"}}}}",
                "x".repeat(500)
            )
            .into_bytes(),
        };
        let message = json_text(&response.body, &["/error/message"]);
        let error = ApiError::of(&response, message);
        assert_eq!(error.problem.chars().count(), 200);
        assert!(!error.problem.contains('\n'));
        assert!(!error.backs_off());
        assert!(ApiError {
            status: 503,
            problem: String::new()
        }
        .backs_off());
        assert!(ApiError {
            status: 429,
            problem: String::new()
        }
        .backs_off());
    }
}
