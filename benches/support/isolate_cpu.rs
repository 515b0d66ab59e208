//! The isolate's own CPU time, from V8's sampling profiler through the
//! devtools inspector of `wrangler dev` (`benches/tools/profile.mjs --busy`): what
//! the worker and its Durable Objects ran, without wrangler's proxy, the
//! load client or the rest of workerd that the process's CPU time counts.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::Value;

/// A profile being taken; [`Profile::stop`] ends it.
pub struct Profile {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Profile {
    /// Starts sampling the isolate behind `inspector_port`; `None` (with a
    /// warning) when the inspector does not answer.
    pub fn start(root: &Path, inspector_port: u16) -> Option<Profile> {
        let mut child = Command::new("node")
            .arg("--experimental-websocket")
            .arg(root.join("benches/tools/profile.mjs"))
            .args(["--busy", &inspector_port.to_string()])
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let mut stdout = BufReader::new(child.stdout.take()?);
        let mut line = String::new();
        stdout.read_line(&mut line).ok()?;
        if line.trim() != "profiling" {
            eprintln!("bench: the inspector on port {inspector_port} did not start a profile");
            let _ = child.kill();
            return None;
        }
        Some(Profile { child, stdout })
    }

    /// Stops sampling: milliseconds busy (and in wasm, JavaScript, the
    /// runtime's native code and garbage collection), idle, and not
    /// sampled (the isolate not running).
    pub fn stop(mut self) -> Option<Value> {
        drop(self.child.stdin.take());
        let mut line = String::new();
        self.stdout.read_line(&mut line).ok()?;
        let _ = self.child.wait();
        serde_json::from_str(&line).ok()
    }
}

/// The profile's milliseconds per request, each figure.
pub fn per_request(profile: &Value, requests: f64) -> Value {
    let mut out = serde_json::Map::new();
    for name in [
        "busy_ms",
        "wasm",
        "javascript",
        "program",
        "gc",
        "unsampled",
    ] {
        if let Some(ms) = profile[name].as_f64() {
            out.insert(name.to_string(), Value::from(ms / requests));
        }
    }
    Value::Object(out)
}
