//! The repository's demo origin (`crates/demo-origin`), run as its own
//! process on a fresh SQLite file. `scripts/test` builds it first.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct DemoOrigin {
    pub url: String,
    child: Child,
    /// Every line the origin printed: one per request it answered.
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
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
    /// Starts on a port the kernel picks and the origin prints, so no
    /// other process can take it between a choice and a bind.
    pub async fn start(forward_secret: &str) -> DemoOrigin {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary())
            .args(["--port", "0", "--db"])
            .arg(dir.path().join("ledger.sqlite"))
            .env("FORWARD_SECRET", forward_secret)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let printed = lines.clone();
        std::thread::spawn(move || {
            // Keep reading, so the origin never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("demo-origin: listening on ") {
                    let url = rest.split(',').next().unwrap_or("").to_string();
                    let _ = sender.send(url);
                }
                printed.lock().unwrap().push(line);
            }
        });
        let url = receiver
            .recv_timeout(Duration::from_secs(20))
            .expect("the demo origin did not start");
        let origin = DemoOrigin {
            url,
            child,
            lines,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while reqwest::get(format!("{}/payments", origin.url))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the demo origin did not answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        origin
    }

    /// Lines the origin printed that contain `text`.
    pub fn printed(&self, text: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line.contains(text))
            .cloned()
            .collect()
    }

    /// Forwards that reached the ledger (charged, repeated or refused):
    /// the origin prints one line for each.
    pub fn forwards(&self) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|line| {
                line.contains(": charged ")
                    || line.contains(": repeat of ")
                    || line.contains(": refused ")
            })
            .count()
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
