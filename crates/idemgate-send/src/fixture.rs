//! Fixtures: sample deliveries, one file each under
//! `fixtures/<provider>/<event>.txt`. A fixture is written as the sender
//! posts it, before it is signed:
//!
//! ```text
//! # One line that says what it is (--list shows it).
//! # More comment lines: where its shape comes from.
//! Content-Type: application/json
//! X-Some-Header: {{uuid:delivery}}
//!
//! { "id": "evt_{{alnum:event}}", ... }
//! ```
//!
//! Comment lines, then header lines, a blank line and the body (its last
//! newline dropped); placeholders ([`crate::template`]) fill in fresh ids
//! and times. `FIXTURE` may also be a path: a `.txt` file in this format,
//! or any other file (a captured `payload.json`) as a body alone, sent
//! with the headers of the provider's default fixture.

use std::path::{Path, PathBuf};

use crate::template::{expand, Event};

/// The fixtures kept in the repository.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixture {
    /// `payment_intent.succeeded`, or the path it was read from.
    pub name: String,
    /// Its first comment line.
    pub description: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// A fixture rendered for one event: what is signed and sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Fixture {
    /// Reads a fixture file's text.
    pub fn parse(name: &str, text: &str) -> Result<Fixture, String> {
        let text = text.replace("\r\n", "\n");
        let mut description = String::new();
        let mut headers = Vec::new();
        let mut lines = text.split_inclusive('\n');
        let mut body_start = None;
        let mut offset = 0;
        for line in lines.by_ref() {
            offset += line.len();
            let content = line.trim_end_matches('\n');
            if let Some(comment) = content.strip_prefix('#') {
                if headers.is_empty() && description.is_empty() {
                    description = comment.trim().to_string();
                }
                continue;
            }
            if content.trim().is_empty() {
                body_start = Some(offset);
                break;
            }
            let (header, value) = content.split_once(':').ok_or_else(|| {
                format!("fixture {name}: {content:?} is not a `Name: value` header line (a blank line ends the headers)")
            })?;
            headers.push((header.trim().to_string(), value.trim().to_string()));
        }
        let body_start = body_start.ok_or_else(|| {
            format!("fixture {name}: no blank line between the headers and the body")
        })?;
        let body = text[body_start..]
            .strip_suffix('\n')
            .unwrap_or(&text[body_start..]);
        Ok(Fixture {
            name: name.to_string(),
            description,
            headers,
            body: body.to_string(),
        })
    }

    /// The fixture for one event: placeholders filled in.
    pub fn render(&self, event: &Event) -> Result<Rendered, String> {
        let fail = |error: String| format!("fixture {}: {error}", self.name);
        let headers = self
            .headers
            .iter()
            .map(|(name, value)| Ok((name.clone(), expand(value, event).map_err(fail)?)))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Rendered {
            headers,
            body: expand(&self.body, event).map_err(fail)?.into_bytes(),
        })
    }
}

/// Whether `fixture` is a thin event (`"object": "v2.core.event"`, as
/// Stripe's event destinations send them): what `--thin` sends.
pub fn is_thin(fixture: &Fixture) -> bool {
    let event = Event {
        seed: "thin".into(),
        created_ms: 0,
    };
    fixture
        .render(&event)
        .ok()
        .and_then(|rendered| serde_json::from_slice::<serde_json::Value>(&rendered.body).ok())
        .is_some_and(|body| body["object"] == "v2.core.event")
}

/// The fixtures of `provider` in `dir`, by name.
pub fn list(dir: &Path, provider: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(provider))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(|name| name.strip_suffix(".txt"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The fixture `name` of `provider` in `dir`: a fixture's name, or a path
/// to a fixture file (`.txt`) or to a body alone (any other file), which
/// takes the headers of `default`.
pub fn load(dir: &Path, provider: &str, name: &str, default: &str) -> Result<Fixture, String> {
    let kept = dir.join(provider).join(format!("{name}.txt"));
    if kept.is_file() {
        return read(&kept, name);
    }
    let path = Path::new(name);
    if path.is_file() {
        if path.extension().is_some_and(|ext| ext == "txt") {
            return read(path, name);
        }
        let body = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {name}: {error}"))?;
        let mut fixture = load(dir, provider, default, default)?;
        fixture.name = name.to_string();
        fixture.description = format!("the body of {name}, with the headers of {default}");
        fixture.body = body.strip_suffix('\n').unwrap_or(&body).to_string();
        return Ok(fixture);
    }
    Err(format!(
        "no fixture {name:?} for {provider} (and no such file); its fixtures: {}",
        list(dir, provider).join(", ")
    ))
}

fn read(path: &Path, name: &str) -> Result<Fixture, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    Fixture::parse(name, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_is_comments_headers_a_blank_line_and_a_body() {
        let fixture = Fixture::parse(
            "x",
            "# What it is.\n# Where from.\nContent-Type: application/json\nX-Id: {{uuid:id}}\n\n{\n  \"id\": \"{{alnum:id:4}}\"\n}\n",
        )
        .unwrap();
        assert_eq!(fixture.description, "What it is.");
        assert_eq!(fixture.headers.len(), 2);
        assert_eq!(fixture.body, "{\n  \"id\": \"{{alnum:id:4}}\"\n}");
        let event = Event {
            seed: "s".into(),
            created_ms: 0,
        };
        let rendered = fixture.render(&event).unwrap();
        assert_eq!(rendered.headers[1].1.len(), 36);
        assert!(!String::from_utf8(rendered.body).unwrap().contains("{{"));
    }

    #[test]
    fn malformed_fixtures_say_why() {
        assert!(Fixture::parse("x", "Content-Type: a\n{}\n")
            .unwrap_err()
            .contains("not a `Name: value`"));
        assert!(Fixture::parse("x", "Content-Type: a\n")
            .unwrap_err()
            .contains("no blank line"));
    }
}
