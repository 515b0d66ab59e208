pub mod access;
pub mod demo_origin;
pub mod gateway;
pub mod origin;
pub mod provider_api;
pub mod stripe_origin;

use reqwest::header::HeaderMap;

pub use demo_origin::DemoOrigin;
pub use gateway::Gateway;
pub use origin::TestOrigin;
pub use stripe_origin::StripeOrigin;

/// One response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub async fn read(response: reqwest::Response) -> Reply {
        Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.bytes().await.unwrap().to_vec(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts an RFC 9457 problem of this status and type name.
    pub fn assert_problem(&self, status: u16, name: &str) {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let problem = self.json();
        assert_eq!(problem["type"], format!("urn:idemgate:problem:{name}"));
        assert_eq!(problem["status"], status);
        assert!(problem["title"].is_string() && problem["detail"].is_string());
    }
}

/// Idle connections are dropped after 2 s: `wrangler dev` closes them at
/// about 5 s, and reusing one just as it closes fails the request
/// (`IncompleteMessage`) after any test that sleeps.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .pool_idle_timeout(std::time::Duration::from_secs(2))
        .build()
        .unwrap()
}

/// A JSON POST with an `Idempotency-Key`.
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: &str,
) -> Reply {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    Reply::read(request.send().await.unwrap()).await
}

/// A port on which nothing listens, outside the ephemeral range (see
/// [`gateway::free_port`]).
pub fn closed_port() -> u16 {
    gateway::free_port()
}

/// `GET /__idemgate/receipts` with the admin token.
pub async fn read_receipt(gateway: &Gateway, token: &str, key: &str, path: &str) -> Reply {
    operator(
        gateway,
        reqwest::Method::GET,
        token,
        &[("key", key), ("path", path)],
    )
    .await
}

/// An operator request to `/__idemgate/receipts` (or `/redrive` for POST).
pub async fn operator(
    gateway: &Gateway,
    method: reqwest::Method,
    token: &str,
    query: &[(&str, &str)],
) -> Reply {
    let path = if method == reqwest::Method::POST {
        "/__idemgate/receipts/redrive"
    } else {
        "/__idemgate/receipts"
    };
    let response = client()
        .request(method, gateway.url(path))
        .query(query)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    Reply::read(response).await
}

/// A route's reconciliation (`GET` its runs, `POST` a run now), with
/// `token`.
pub async fn reconcile(
    gateway: &Gateway,
    token: &str,
    method: reqwest::Method,
    route: &str,
) -> Reply {
    let response = client()
        .request(method, gateway.url("/__idemgate/reconcile"))
        .query(&[("route", route)])
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    Reply::read(response).await
}

/// Polls `check` every 100 ms until it holds, failing after `seconds`.
pub async fn eventually<F, Fut>(seconds: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "not within {seconds} s: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `GET /__idemgate/stats` with the admin token: the isolate's counters.
pub async fn read_stats(gateway: &Gateway, token: &str) -> serde_json::Value {
    operator_get(gateway, token, "/__idemgate/stats").await
}

/// `GET /__idemgate/summary` with the admin token: counts per route, and
/// each limited route's flow control.
/// `GET` of `path` on the gateway, with no token (health, a passthrough).
pub async fn get(gateway: &Gateway, path: &str) -> Reply {
    Reply::read(client().get(gateway.url(path)).send().await.unwrap()).await
}

pub async fn read_summary(gateway: &Gateway, token: &str) -> serde_json::Value {
    operator_get(gateway, token, "/__idemgate/summary").await
}

async fn operator_get(gateway: &Gateway, token: &str, path: &str) -> serde_json::Value {
    let response = client()
        .get(gateway.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    Reply::read(response).await.json()
}
