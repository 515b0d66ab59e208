//! `verify-audit FILE [--head HASH]`: checks an audit chain exported from
//! idemgate (a JSON array oldest first, a page's `{"entries": [...]}`, or
//! JSON Lines; `-` reads standard input). Prints `ok: N entries, head SEQ
//! HASH` and exits 0, or names the first broken entry and exits 1; 2 when
//! the file cannot be read (not UTF-8, not JSON nor JSON Lines, a page
//! naming a member twice, nested too deep). Entries are read strictly:
//! see `idemgate_origin::audit::read_export`.

use std::io::Read;
use std::process::ExitCode;

use idemgate_origin::audit::{read_export, verify_export};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut file, mut head) = (None, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--head" => head = args.next().cloned(),
            "-h" | "--help" => {
                println!("usage: verify-audit FILE|- [--head HASH]");
                return ExitCode::SUCCESS;
            }
            other => file = Some(other.to_string()),
        }
    }
    let Some(file) = file else {
        eprintln!("usage: verify-audit FILE|- [--head HASH]");
        return ExitCode::from(2);
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
    match verify_export(&entries, head.as_deref()) {
        Ok(verified) => {
            println!(
                "ok: {} entries, head {} {}",
                verified.entries, verified.head_seq, verified.head_hash
            );
            ExitCode::SUCCESS
        }
        Err(broken) => {
            println!("broken: {broken}");
            ExitCode::from(1)
        }
    }
}
