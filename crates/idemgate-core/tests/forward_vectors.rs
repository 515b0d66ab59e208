//! The committed `tests/vectors/forwards.json` is what the example that
//! writes it prints now: a change to how forwards are signed cannot leave
//! the vectors the origin verifiers are tested against behind.

// The example's `main` prints the file; here only its functions are used.
#[allow(dead_code)]
#[path = "../examples/forward_vectors/main.rs"]
mod forward_vectors;

use std::path::PathBuf;

fn committed() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/forwards.json");
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_committed_vectors_are_what_the_generator_prints() {
    assert!(
        committed() == forward_vectors::forward_vectors_json(),
        "tests/vectors/forwards.json is stale; regenerate it with\n  \
         cargo run -p idemgate-core --example forward_vectors > tests/vectors/forwards.json"
    );
}

#[test]
fn vector_names_are_unique() {
    let vectors = forward_vectors::forward_vectors();
    let mut names: Vec<&str> = vectors.iter().map(|vector| vector.name).collect();
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "two vectors share a name");
}
