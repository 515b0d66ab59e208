//! The last event sent to each route, so `--same-event` can send it again
//! (the same ids, times and body; a fresh signature), as a sender's retry
//! does. Kept beside the variables file, under `.wrangler/` (which git
//! ignores).

use std::path::{Path, PathBuf};

use crate::template::Event;

/// Where the last events of the variables file `vars` are kept.
pub fn path_for(vars: &Path) -> PathBuf {
    let dir = vars.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    dir.join(".wrangler/idemgate-send/last-events.json")
}

fn read(path: &Path) -> serde_json::Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| serde_json::json!({}))
}

/// The fixture and event last sent to `route`.
pub fn last(path: &Path, route: &str) -> Option<(String, Event)> {
    let state = read(path);
    let entry = &state[route];
    Some((
        entry["fixture"].as_str()?.to_string(),
        Event {
            seed: entry["seed"].as_str()?.to_string(),
            created_ms: entry["created_ms"].as_u64()?,
        },
    ))
}

/// Records `event` of `fixture` as the last sent to `route`.
pub fn remember(path: &Path, route: &str, fixture: &str, event: &Event) -> Result<(), String> {
    let mut state = read(path);
    state[route] = serde_json::json!({
        "fixture": fixture,
        "seed": event.seed,
        "created_ms": event.created_ms,
    });
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(&state)? + "\n")
    };
    write().map_err(|error| format!("cannot write {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_event_of_each_route_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join(".dev.vars"));
        assert_eq!(last(&path, "stripe"), None);
        let event = Event {
            seed: "abc".into(),
            created_ms: 42,
        };
        remember(&path, "stripe", "payment_intent.succeeded", &event).unwrap();
        remember(&path, "github", "push", &Event::new(1)).unwrap();
        assert_eq!(
            last(&path, "stripe"),
            Some(("payment_intent.succeeded".to_string(), event))
        );
        assert_eq!(
            path_for(Path::new(".dev.vars")),
            Path::new("./.wrangler/idemgate-send/last-events.json")
        );
    }
}
