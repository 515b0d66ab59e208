//! `support/stripe-origin.mjs`: a Node.js payments origin that checks
//! Stripe's signature with the official `stripe` library and idemgate's
//! with the README's verifier, run as its own process.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::client;
use super::gateway::free_port;

pub struct StripeOrigin {
    pub url: String,
    child: Child,
}

impl StripeOrigin {
    pub async fn start(stripe_secret: &str, forward_secret: &str, tolerance: u64) -> StripeOrigin {
        let port = free_port();
        let child = Command::new("node")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/e2e/support/stripe-origin.mjs"
            ))
            .args([
                &port.to_string(),
                stripe_secret,
                forward_secret,
                &tolerance.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("node runs (scripts/test installs the stripe package)");
        let origin = StripeOrigin {
            url: format!("http://127.0.0.1:{port}"),
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while client().get(origin.log_url()).send().await.is_err() {
            assert!(Instant::now() < deadline, "the stripe origin did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        origin
    }

    fn log_url(&self) -> String {
        format!("{}/log", self.url)
    }

    /// Takes the origin down (503 to everything) or back up.
    pub async fn set_down(&self, down: bool) {
        let path = if down { "down" } else { "up" };
        let reply = client()
            .post(format!("{}/{path}", self.url))
            .send()
            .await
            .unwrap();
        assert!(reply.status().is_success());
    }

    /// Every request received: `path`, `status`, and (when up) the
    /// `stripe` and `idemgate` verdicts.
    pub async fn log(&self) -> Vec<serde_json::Value> {
        let reply = client().get(self.log_url()).send().await.unwrap();
        serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap()
    }
}

impl Drop for StripeOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
