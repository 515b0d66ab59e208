//! The repository's demo origin (`crates/demo-origin`), run as its own
//! process on a fresh SQLite file. `scripts/test` builds it first.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct DemoOrigin {
    pub url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let binary = target.join("debug/demo-origin");
    assert!(
        binary.exists(),
        "{} is missing: run scripts/test, which builds it",
        binary.display()
    );
    binary
}

impl DemoOrigin {
    pub async fn start(forward_secret: &str) -> DemoOrigin {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(binary())
            .args(["--port", &port.to_string(), "--db"])
            .arg(dir.path().join("ledger.sqlite"))
            .env("FORWARD_SECRET", forward_secret)
            .stdout(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let origin = DemoOrigin {
            url: format!("http://127.0.0.1:{port}"),
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while reqwest::get(format!("{}/payments", origin.url))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the demo origin did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        origin
    }

    pub async fn payments(&self) -> Vec<serde_json::Value> {
        let response = reqwest::get(format!("{}/payments", self.url))
            .await
            .unwrap();
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }
}

impl Drop for DemoOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
