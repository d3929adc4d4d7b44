//! The harness's own promises: what a failing test prints about its tree.

use crate::support::{Deployment, TempTree, dump};

/// The dump lists every kind without following a link or opening anything but a small regular
/// file (a FIFO would block the dump), escapes content, and skips big files' content.
#[test]
fn the_failure_dump_lists_kinds_sizes_targets_and_small_contents() {
    let t = TempTree::new();
    t.file("a/small.md", "tab\there \x07 \u{e9}\n")
        .file("a/big.md", "x".repeat(10_000))
        .symlink("a/link.md", "/nowhere/at/all");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        t.path("a/fifo"),
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    std::fs::hard_link(t.path("a/small.md"), t.path("a/hard.md")).unwrap();
    // Whatever the umask.
    use std::os::unix::fs::PermissionsExt;
    for (rel, mode) in [("a", 0o755), ("a/big.md", 0o644), ("a/small.md", 0o600)] {
        std::fs::set_permissions(t.path(rel), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let out = dump(t.root());
    let root = t.root().display().to_string();
    insta::with_settings!({filters => vec![(root.as_str(), "[ROOT]")]}, {
        insta::assert_snapshot!(out, @r#"
        --- tree at [ROOT] (the test failed)
          a/  dir 755
          a/big.md  file 10000 B 644
          a/fifo  fifo
          a/hard.md  file 14 B 600, 2 links  "tab\there \x07 \xc3\xa9\n"
          a/link.md -> /nowhere/at/all
          a/small.md  file 14 B 600, 2 links  "tab\there \x07 \xc3\xa9\n"
        ---
        "#);
    });
}

/// A deployment is a tree: it derefs to one and so is dumped too.
#[test]
fn a_deployment_is_dumped_like_any_tree() {
    let d = Deployment::standard();
    assert!(dump(d.root()).contains("container/skills/web/instructions.md  file 4 B"));
}
