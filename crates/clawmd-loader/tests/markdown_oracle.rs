//! Differential test of the markdown port against the real lexer.
//!
//! `tests/fixtures/markdown-oracle.json` holds inputs (three hand-written documents and
//! generated mixes of markdown-significant fragments) with what Claude Code 2.1.328's own
//! lexer, comment stripper and import walk produced for them: the body kept after comment
//! stripping and the import paths in order. The vectors were produced by running the
//! functions extracted from the installed binary under Node; this test needs neither.

#![allow(clippy::disallowed_methods)] // tests lay out and read their trees with std::fs

use clawmd_loader::ClaudeVersion;
use clawmd_loader::content::scan_markdown_as;
use serde::Deserialize;

#[derive(Deserialize)]
struct Vector {
    src: String,
    content: String,
    imports: Vec<String>,
}

#[test]
fn markdown_port_matches_claude_code() {
    // CLAWMD_ORACLE_VECTORS points at a freshly generated (larger) vector file, if wanted.
    let path = std::env::var("CLAWMD_ORACLE_VECTORS").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/markdown-oracle.json"
        )
        .into()
    });
    let text = std::fs::read_to_string(path).expect("oracle vectors");
    let vectors: Vec<Vector> = serde_json::from_str(&text).expect("valid vectors");
    let mut failures = Vec::new();
    // The vectors come from 2.1.328's functions (its line-ending rule differs from 2.1.330's).
    let recorded_on = ClaudeVersion::new(2, 1, 328);
    for (i, v) in vectors.iter().enumerate() {
        let scan = scan_markdown_as(&v.src, recorded_on).expect("parses");
        if scan.body != v.content || scan.imports != v.imports {
            failures.push(format!(
                "#{i} src={:?}\n  body   want {:?}\n         got  {:?}\n  imports want {:?}\n          got  {:?}",
                v.src, v.content, scan.body, v.imports, scan.imports
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors differ:\n{}",
        failures.len(),
        vectors.len(),
        failures
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
