//! The loader against the real Claude Code releases: every case of the conformance corpus
//! recorded on the host filesystem (`support/conformance.rs` says how a case is replayed).

#![allow(clippy::disallowed_methods)] // the harness lays each case out with std::fs

#[path = "support/conformance.rs"]
mod harness;

#[test]
fn every_case_matches_the_real_binary() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conformance");
    harness::every_case_matches_the_real_binary(&fixtures, None);
}
