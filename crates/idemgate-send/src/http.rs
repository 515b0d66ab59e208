//! The wire: posting a signed delivery, and serving the test certificate a
//! PayPal delivery names (or the test key Plaid's endpoint would give for
//! a Plaid delivery) while it is verified.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idemgate_core::signature::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An answer, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub elapsed: Duration,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        // Local work: never through a proxy of the environment.
        .no_proxy()
        .timeout(Duration::from_secs(70))
        .build()
        .expect("an HTTP client")
}

/// Posts `message` to `url`.
pub async fn post(client: &reqwest::Client, url: &str, message: &Message) -> Result<Reply, String> {
    let mut request = client.post(url).body(message.body.clone());
    for (name, value) in &message.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let started = Instant::now();
    let response = request.send().await.map_err(|error| {
        if error.is_connect() {
            format!("nothing answers at {url}: start the gateway with scripts/dev (or pass --url)")
        } else {
            format!("POST {url} failed: {error}")
        }
    })?;
    let status = response.status();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = response
        .bytes()
        .await
        .map_err(|error| format!("reading the answer of {url} failed: {error}"))?
        .to_vec();
    Ok(Reply {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("").to_string(),
        headers,
        body,
        elapsed: started.elapsed(),
    })
}

/// Serves the test certificate on a local port while a PayPal delivery is
/// sent: the gateway fetches it from there to verify (the route's
/// `signature_cert_hosts` allows the port). Stops when dropped.
pub struct CertificateServer {
    task: tokio::task::JoinHandle<()>,
    served: Arc<AtomicUsize>,
}

impl CertificateServer {
    pub async fn start(port: u16, pem: &'static str) -> Result<CertificateServer, String> {
        Self::serve(
            port,
            "application/x-pem-file",
            pem.to_string(),
            "the test certificate",
        )
        .await
    }

    /// Serves Plaid's answer with the test key, as
    /// `POST /webhook_verification_key/get` would (any request gets it: the
    /// gateway asks only for the kid the delivery names).
    pub async fn plaid_key(port: u16) -> Result<CertificateServer, String> {
        let answer = crate::sign::plaid_test_key_answer();
        Self::serve(port, "application/json", answer, "the test Plaid key").await
    }

    async fn serve(
        port: u16,
        content_type: &'static str,
        body: String,
        what: &'static str,
    ) -> Result<CertificateServer, String> {
        let body: Arc<str> = body.into();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|error| {
                format!(
                    "cannot serve {what} on 127.0.0.1:{port} ({error}); if something else serves it, pass --cert-url (PayPal) or stop it"
                )
            })?;
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counter = counter.clone();
                let body = body.clone();
                tokio::spawn(async move {
                    // The request's head; its path and body do not matter.
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !head.windows(4).any(|window| window == b"\r\n\r\n")
                        && head.len() < 16_384
                    {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => head.extend_from_slice(&buffer[..read]),
                        }
                    }
                    counter.fetch_add(1, Ordering::Relaxed);
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Ok(CertificateServer { task, served })
    }

    /// How many times the certificate was fetched.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::Relaxed)
    }
}

impl Drop for CertificateServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_certificate_is_served_while_the_server_lives() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = CertificateServer::start(port, crate::sign::TEST_CERTIFICATE)
            .await
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/v1/notifications/certs/CERT-test");
        let pem = client()
            .get(&url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(pem, crate::sign::TEST_CERTIFICATE);
        assert_eq!(server.served(), 1);
        // The port is taken while it serves.
        assert!(CertificateServer::start(port, "x").await.is_err());
        drop(server);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(client().get(&url).send().await.is_err());
    }
}
