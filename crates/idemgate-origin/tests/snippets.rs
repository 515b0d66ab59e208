//! The standard-library verification snippets of `docs/origin.md` are the
//! files in `examples/origin/`, word for word; here they run against the
//! test vector.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn assert_in_docs(snippet: &str) {
    let page = std::fs::read_to_string(repository().join("docs/origin.md")).unwrap();
    let code = std::fs::read_to_string(repository().join("examples/origin").join(snippet)).unwrap();
    assert!(
        page.contains(code.trim_end()),
        "docs/origin.md must show examples/origin/{snippet} verbatim"
    );
}

fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .current_dir(repository().join("examples/origin"))
        .output()
        .unwrap_or_else(|error| panic!("{program} is needed for this test: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn node_snippet_verifies_the_test_vector() {
    assert_in_docs("verify.mjs");
    run("node", &["--test", "verify_test.mjs"]);
}

#[test]
fn python_snippet_verifies_the_test_vector() {
    assert_in_docs("verify.py");
    run("python3", &["-B", "test_verify.py"]);
}
