//! `verify-audit FILE [--head HEAD]`: checks an audit chain exported from
//! idemgate (a JSON array oldest first, a page's `{"entries": [...]}`, or
//! JSON Lines; `-` reads standard input). Prints `ok: N entries, head SEQ
//! HASH` and exits 0, or names the first broken entry and exits 1; 2 when
//! the file or the head cannot be read (not UTF-8, not JSON nor JSON
//! Lines, a page naming a member twice, nested too deep). Entries are read
//! strictly: see `idemgate_origin::audit::read_export`.
//!
//! `HEAD` is one of:
//! - a hash (64 lowercase hex digits): the export must end at it (the head
//!   the summary showed when the export was taken);
//! - `SEQ:HASH`: a checkpoint, the entry at `SEQ` must carry `HASH`;
//! - a file holding a checkpoint as a `json` alert sink received it
//!   (`{"type":"idemgate.audit_head","seq":..,"hash":..,"at":..}`).
//!
//! Against a checkpoint, the export may have grown since, but it must
//! reach its `seq` (else `truncated`) and agree with its hash (else
//! `checkpoint`): see `idemgate_origin::audit::verify_chain_at`.

use std::io::Read;
use std::process::ExitCode;

use idemgate_origin::audit::{
    is_hash, read_export, verify_export, verify_export_at, Checkpoint, Fault,
};

const USAGE: &str = "usage: verify-audit FILE|- [--head HASH|SEQ:HASH|CHECKPOINT_FILE]";

/// What `--head` names.
enum Head {
    Hash(String),
    Checkpoint(Checkpoint),
}

/// A hash, `SEQ:HASH`, or else a checkpoint file.
fn read_head(arg: &str) -> Result<Head, String> {
    if is_hash(arg) {
        return Ok(Head::Hash(arg.to_string()));
    }
    if let Ok(checkpoint) = arg.parse::<Checkpoint>() {
        return Ok(Head::Checkpoint(checkpoint));
    }
    let text = std::fs::read_to_string(arg).map_err(|error| {
        format!("neither a hash, SEQ:HASH nor a readable checkpoint file: {error}")
    })?;
    Checkpoint::from_json(&text)
        .map(Head::Checkpoint)
        .map_err(|error| format!("not a checkpoint: {error}"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut file, mut head) = (None, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--head" => match args.next() {
                Some(value) => head = Some(value.clone()),
                None => {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => file = Some(other.to_string()),
        }
    }
    let Some(file) = file else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let head = match head.as_deref().map(read_head).transpose() {
        Ok(head) => head,
        Err(error) => {
            eprintln!("verify-audit: --head {}: {error}", head.unwrap_or_default());
            return ExitCode::from(2);
        }
    };
    let mut text = String::new();
    let read = match file.as_str() {
        "-" => std::io::stdin().read_to_string(&mut text).map(|_| ()),
        path => std::fs::read_to_string(path).map(|read| text = read),
    };
    if let Err(error) = read {
        eprintln!("verify-audit: {file}: {error}");
        return ExitCode::from(2);
    }
    let entries = match read_export(&text) {
        Ok(entries) => entries,
        Err(error) => {
            eprintln!("verify-audit: {file}: {error}");
            return ExitCode::from(2);
        }
    };
    let verdict = match &head {
        None => verify_export(&entries, None),
        Some(Head::Hash(hash)) => verify_export(&entries, Some(hash)),
        Some(Head::Checkpoint(checkpoint)) => verify_export_at(&entries, checkpoint),
    };
    match verdict {
        Ok(verified) => {
            println!(
                "ok: {} entries, head {} {}",
                verified.entries, verified.head_seq, verified.head_hash
            );
            ExitCode::SUCCESS
        }
        Err(broken) => {
            let why = match (broken.fault, &head) {
                (Fault::Truncated, Some(Head::Checkpoint(checkpoint))) => format!(
                    " (the export ends at seq {}, before the checkpoint's seq {})",
                    broken.index, checkpoint.seq
                ),
                (Fault::Checkpoint, _) => " (its hash disagrees with the checkpoint's)".into(),
                _ => String::new(),
            };
            println!("broken: {broken}{why}");
            ExitCode::from(1)
        }
    }
}
