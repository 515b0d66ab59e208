//! One alert as each sink takes it: Slack's `{"text": ...}`, or the alert
//! as JSON signed as Standard Webhooks at the moment it is sent (a retry is
//! signed again: receivers refuse an old `webhook-timestamp`).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{Condition, Format, Sink};
use crate::headers::HeaderList;
use crate::origin::OutboundRequest;

/// What an alert says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// Unique per alert, the same on every attempt to send it: the JSON
    /// sink's `webhook-id`, by which a receiver drops a repeat.
    pub id: String,
    pub condition: Condition,
    pub route: String,
    pub state: AlertState,
    /// Signs since the last alert of this route and condition.
    pub count: u64,
    /// Since when the condition has been firing (ms).
    pub since: u64,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    Firing,
    Resolved,
}

impl Alert {
    /// The JSON sink's body.
    pub fn json(&self) -> String {
        serde_json::json!({
            "type": "idemgate.alert",
            "id": self.id,
            "condition": self.condition.name(),
            "route": self.route,
            "state": self.state,
            "count": self.count,
            "since": crate::time::rfc3339(self.since / 1_000),
            "detail": self.detail,
        })
        .to_string()
    }

    /// Slack's text: one line a person reads on a phone.
    pub fn slack_text(&self) -> String {
        let since = crate::time::rfc3339(self.since / 1_000);
        match self.state {
            AlertState::Firing => format!(
                ":rotating_light: idemgate `{}` on route `{}`: {} ({} since the last alert; firing since {since})",
                self.condition.name(),
                self.route,
                self.detail,
                self.count
            ),
            AlertState::Resolved => format!(
                ":white_check_mark: idemgate `{}` on route `{}` resolved (firing since {since})",
                self.condition.name(),
                self.route
            ),
        }
    }

    /// The request that sends this alert to `sink` at `now_seconds`, with
    /// the JSON sink's secret's value (`whsec_...`).
    pub fn request(
        &self,
        sink: &Sink,
        secret: Option<&str>,
        now_seconds: u64,
    ) -> Result<OutboundRequest, String> {
        let mut headers: HeaderList = vec![
            ("content-type".into(), "application/json".into()),
            ("user-agent".into(), "idemgate-alerts".into()),
        ];
        let body = match sink.format {
            Format::Slack => serde_json::json!({ "text": self.slack_text() }).to_string(),
            Format::Json => {
                let body = self.json();
                let secret = secret.ok_or("the sink's secret is not set")?;
                let timestamp = now_seconds.to_string();
                let signature = sign_v1(secret, &self.id, &timestamp, body.as_bytes())?;
                headers.push(("webhook-id".into(), self.id.clone()));
                headers.push(("webhook-timestamp".into(), timestamp));
                headers.push(("webhook-signature".into(), signature));
                body
            }
        };
        Ok(OutboundRequest {
            method: "POST".into(),
            url: sink.url.clone(),
            headers,
            body: body.into_bytes(),
            via: None,
        })
    }
}

/// The HMAC key of a `whsec_` secret (its base64 part).
pub fn whsec_key(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret
        .trim()
        .strip_prefix("whsec_")
        .ok_or("is not a whsec_ secret")?;
    STANDARD
        .decode(encoded)
        .ok()
        .filter(|key| !key.is_empty())
        .ok_or_else(|| "is not whsec_ followed by base64".to_string())
}

/// Standard Webhooks' `v1` signature of `<id>.<timestamp>.<body>`.
pub fn sign_v1(secret: &str, id: &str, timestamp: &str, body: &[u8]) -> Result<String, String> {
    use hmac::{Hmac, Mac};
    let key = whsec_key(secret)?;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("HMAC takes any key");
    mac.update(&crate::signature::standard_webhooks::signed_content(
        id, timestamp, body,
    ));
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}
