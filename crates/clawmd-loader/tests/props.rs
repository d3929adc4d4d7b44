//! Property tests: whatever bytes a memory file holds and however a small tree is linked,
//! the loader neither panics nor loops, and its results keep their basic invariants.

#![allow(clippy::disallowed_methods)] // tests lay out and read their trees with std::fs

use std::collections::HashSet;
use std::path::Path;

use clawmd_loader::content::{parse, scan_markdown};
use clawmd_loader::{HostFs, LoadOptions, MAX_IMPORT_DEPTH, load, render};
use proptest::prelude::*;

/// Fragments that matter to the markdown lexer, so random text reaches its corners.
fn markdownish() -> impl Strategy<Value = String> {
    let frag = prop::sample::select(vec![
        "@a.md",
        "@./b.md",
        "@~/c.md",
        "@/d",
        "@",
        "`",
        "```",
        "~~~",
        "    ",
        "\t",
        "- ",
        "* ",
        "1. ",
        ">",
        "#",
        "<!--",
        "-->",
        "<div>",
        "</div>",
        "<pre>",
        "[x]",
        "(y)",
        "[x]: /u",
        "*",
        "_",
        "**",
        "\\",
        "!",
        "<",
        ">",
        "\n",
        "\n\n",
        " ",
        "a",
        "é",
        "\u{a0}",
        "\u{2028}",
        "\r\n",
        "\r",
        "---",
        "===",
        "\u{feff}",
        "&amp;",
        "<a href=\"x\">",
        "user@x.com",
        "`@c.md`",
    ]);
    prop::collection::vec(frag, 0..60).prop_map(|v| v.concat())
}

/// `text` with every closed `<!-- … -->` taken out.
fn without_inline_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        let Some(end) = rest[start + 4..].find("-->") else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + 4 + end + 3..];
    }
    out.push_str(rest);
    out
}

/// `text` with every `<!--` broken up (repeatedly: `<!---` becomes `<!--` again).
fn no_comment(mut text: String) -> String {
    while text.contains("<!--") {
        text = text.replace("<!--", "<!-");
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse(&text);
    }

    #[test]
    fn random_markdown_never_panics_and_imports_come_from_the_text(text in markdownish()) {
        if let Ok(file) = parse(&text) {
            let unique: HashSet<&String> = file.imports.iter().collect();
            prop_assert_eq!(unique.len(), file.imports.len());
            // The real CLI reads a mention across an inline comment it strips:
            // `- <!---->@a.md<!---->@a.md` imports `a.md@a.md` (2.1.328, claude-view,
            // 2026-11-26); so an import is in the text, or in the text without its inline
            // comments.
            let stripped = without_inline_comments(&text);
            for import in &file.imports {
                // An import is written after an `@` somewhere in the file (possibly with
                // `\ ` for spaces, which the path shows unescaped).
                let escaped = import.replace(' ', "\\ ");
                let found = |text: &str| text.contains(import.as_str()) || text.contains(&escaped);
                prop_assert!(found(&text) || found(&stripped), "{import:?} not in {text:?}");
            }
        }
    }

    #[test]
    fn text_without_comments_keeps_its_body(text in markdownish().prop_map(no_comment)) {
        prop_assert_eq!(scan_markdown(&text).unwrap().body, text);
    }
}

/// One file of a random tree: its name, and either content or a link target.
#[derive(Debug, Clone)]
enum Entry {
    File(String, String),
    Link(String, String),
}

fn tree() -> impl Strategy<Value = Vec<Entry>> {
    let names = prop::sample::select(vec![
        "p/CLAUDE.md",
        "p/CLAUDE.local.md",
        "p/.claude/CLAUDE.md",
        "p/a.md",
        "p/b.md",
        "p/sub/c.md",
        "d.md",
        "p/AGENTS.md",
        "p/.claude/rules/r.md",
        "p/.claude/rules/s/t.md",
        "home/.claude/CLAUDE.md",
    ]);
    let targets = prop::sample::select(vec![
        "a.md",
        "b.md",
        "../d.md",
        "sub/c.md",
        "CLAUDE.md",
        "missing.md",
        "/etc/hostname",
        "../p",
        ".",
        "b.md/",
    ]);
    let body = prop::collection::vec(
        prop_oneof![
            targets.clone().prop_map(|t| format!("@{t}\n")),
            targets.clone().prop_map(|t| format!("@./{t}\n")),
            Just("text\n".to_string()),
            Just("```\n@a.md\n```\n".to_string()),
            Just("---\npaths: x\n---\n".to_string()),
            Just("<!-- c -->\n".to_string()),
        ],
        0..6,
    )
    .prop_map(|v| v.concat());
    let entry = prop_oneof![
        3 => (names.clone(), body).prop_map(|(n, b)| Entry::File(n.into(), b)),
        1 => (names, targets).prop_map(|(n, t)| Entry::Link(n.into(), t.into())),
    ];
    prop::collection::vec(entry, 0..10)
}

fn build(root: &Path, entries: &[Entry]) {
    for e in entries {
        let (name, result) = match e {
            Entry::File(name, body) => {
                let p = root.join(name);
                let _ = std::fs::create_dir_all(p.parent().unwrap());
                // create_new never follows a link planted at the name earlier in the tree (an
                // earlier entry may have linked it to /etc/hostname): a clash is skipped.
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&p)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, body.as_bytes()));
                (name, written)
            }
            Entry::Link(name, target) => {
                let p = root.join(name);
                let _ = std::fs::create_dir_all(p.parent().unwrap());
                (name, std::os::unix::fs::symlink(target, &p))
            }
        };
        let _ = (name, result); // clashes (a name used twice) are part of the fun
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_trees_load_without_panics_or_loops(entries in tree(), approve in any::<bool>()) {
        let tree = tempfile::tempdir().unwrap();
        let root = tree.path().to_path_buf();
        build(&root, &entries);
        std::fs::create_dir_all(root.join("p")).unwrap();
        let mut opts = LoadOptions::new(root.join("p"), Some(root.join("home")));
        opts.managed_dir = None;
        opts.external_imports = if approve {
            clawmd_loader::ExternalImports::Approved
        } else {
            clawmd_loader::ExternalImports::Denied
        };
        let memory = load(&HostFs, &opts).unwrap();
        // Each printed path appears once. (A real file can appear twice: the AGENTS.md plugin
        // keeps its own "already loaded" set, so a user file that links to a file an
        // AGENTS.md imports shows up twice in Claude Code too: case 36.)
        let mut seen = HashSet::new();
        for f in &memory.files {
            prop_assert!(f.depth < MAX_IMPORT_DEPTH);
            prop_assert!(seen.insert(f.path.clone()), "{} printed twice", f.path.display());
            prop_assert!(!f.body.trim().is_empty());
        }
        let _ = render(&memory, clawmd_loader::Format::Flat);
        let _ = render(&memory, clawmd_loader::Format::Messages);
    }
}
