//! Loader benchmark (run: `cargo bench --bench loader`): how long `render` takes, in process.
//!
//! * an example group (the repository's `groups/main`, composed with copy delivery), loaded
//!   through the container's mount table and rendered as Claude Code's block;
//! * a generated tree of over 1,000 memory files with import chains down to the depth limit,
//!   loaded from the innermost of 10 nested project folders.
//!
//! * the markdown scan alone (`scan_markdown_as`: comment stripping and import extraction)
//!   and the whole read of a memory file (`parse_as`: frontmatter too), in MB/s, on a corpus
//!   of real-world-like markdown: the repository's `docs/`, `container/` and `tests/fixtures/`
//!   markdown files and the sources of the equivalence corpus, each file scanned on its own
//!   as the loader does.
//!
//! Prints Markdown tables for docs/performance.md (medians over many runs).

#![allow(clippy::disallowed_methods)] // tests build their trees with std::fs (clippy.toml)

use std::path::Path;
use std::time::{Duration, Instant};

use clawmd::Layout;
use clawmd::compose::{ComposeOptions, compose};
use clawmd::deployment::Selection;
use clawmd::loader::content::{parse_as, scan_markdown_as};
use clawmd::loader::{ClaudeVersion, Format, HostFs, LoadOptions, load, render};
use clawmd::plan::Delivery;
use clawmd::view::{ViewOptions, load_group};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time_many(runs: usize, mut f: impl FnMut()) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn example_group() -> tempfile::TempDir {
    let temp = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_dir(&repo.join("container"), &temp.path().join("container"));
    for name in ["container.json", "CLAUDE.local.md"] {
        let to = temp.path().join("groups/main");
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(repo.join("groups/main").join(name), to.join(name)).unwrap();
    }
    let options = ComposeOptions {
        settings: clawmd::delivery::DeliverySettings::with_delivery(Delivery::Copy),
        ..ComposeOptions::default()
    };
    let layout = Layout::under_root(temp.path());
    assert!(compose(&layout, &Selection::All, &options).unwrap().ok);
    temp
}

/// A project 10 folders deep whose innermost `CLAUDE.md` fans out through imports: 10 files,
/// each importing 10, each of those importing 9 (1,011 files), plus a chain running past the
/// depth limit; every ancestor folder has a `CLAUDE.md` of its own.
fn generated_tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let mut dir = temp.path().to_path_buf();
    for level in 0..10 {
        dir = dir.join(format!("d{level}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("CLAUDE.md"), format!("# Level {level}\n")).unwrap();
    }
    let write = |name: String, body: String| std::fs::write(dir.join(name), body).unwrap();
    let mut root = String::from("# Project\n@./chain1.md\n");
    for a in 0..10 {
        root.push_str(&format!("@./a{a}.md\n"));
        let mut a_body = format!("Part {a}.\n");
        for b in 0..10 {
            a_body.push_str(&format!("See @./b{a}-{b}.md for detail {b}.\n"));
            let mut b_body = format!("Detail {a}.{b}.\n");
            for c in 0..9 {
                b_body.push_str(&format!("@./c{a}-{b}-{c}.md\n"));
                write(
                    format!("c{a}-{b}-{c}.md"),
                    format!("Leaf {a}.{b}.{c}: {}\n", "words ".repeat(8)),
                );
            }
            write(format!("b{a}-{b}.md"), b_body);
        }
        write(format!("a{a}.md"), a_body);
    }
    for depth in 1..=6 {
        write(
            format!("chain{depth}.md"),
            format!("Chain {depth}.\n@./chain{}.md\n", depth + 1),
        );
    }
    std::fs::write(dir.join("CLAUDE.md"), root).unwrap();
    (temp, dir)
}

/// The markdown corpus: every `*.md` under `docs/`, `container/` and `tests/fixtures/`, then
/// the markdown files of the equivalence corpus's sources (generated to hold every construct
/// the lexer must get right: fences, comments, HTML blocks, lists, quotes, frontmatter).
fn markdown_corpus() -> Vec<String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["docs", "container", "tests/fixtures"] {
        let mut paths: Vec<_> = walkdir::WalkDir::new(repo.join(dir))
            .into_iter()
            .map(Result::unwrap)
            .filter(|entry| entry.file_type().is_file()) // not the fixtures' links
            .map(walkdir::DirEntry::into_path)
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .collect();
        paths.sort();
        // (A few fixtures are not UTF-8 on purpose: decoded as the loader decodes them.)
        files.extend(
            paths
                .iter()
                .map(|path| String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()),
        );
    }
    let corpus: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join("tests/fixtures/equivalence/2.1.328.json")).unwrap(),
    )
    .unwrap();
    for source in corpus["sources"].as_array().unwrap() {
        for (name, text) in source["files"].as_object().unwrap() {
            if name.ends_with(".md") {
                files.push(text.as_str().unwrap().to_owned());
            }
        }
    }
    files
}

/// Megabytes (10^6 bytes) per second.
fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e6
}

fn main() {
    let corpus = markdown_corpus();
    let corpus_bytes: usize = corpus.iter().map(String::len).sum();
    // Texts of 2 KiB or more are kept by the scan's small cache of recent texts (4 of them):
    // with more such files than that, scanning the corpus in turn never finds one there.
    let large = corpus.iter().filter(|text| text.len() >= 2048).count();
    assert!(large > 8, "{large} files of 2 KiB or more");
    let version = ClaudeVersion::default();
    let mut imports = 0;
    let scan = time_many(40, || {
        imports = corpus
            .iter()
            .map(|text| scan_markdown_as(text, version).unwrap().imports.len())
            .sum::<usize>();
    });
    let parse = time_many(40, || {
        for text in &corpus {
            std::hint::black_box(parse_as(text, version).unwrap());
        }
    });

    println!(
        "Markdown corpus: {} files, {corpus_bytes} bytes ({large} of 2 KiB or more), {imports} imports found; release {version}\n",
        corpus.len()
    );
    println!("| read of each corpus file | median | throughput |");
    println!("|---|---:|---:|");
    println!(
        "| `scan_markdown_as` (comments stripped, imports found) | {:.2} ms | {:.0} MB/s |",
        scan.as_secs_f64() * 1e3,
        mb_per_s(corpus_bytes, scan)
    );
    println!(
        "| `parse_as` (a memory file: frontmatter, then the scan) | {:.2} ms | {:.0} MB/s |",
        parse.as_secs_f64() * 1e3,
        mb_per_s(corpus_bytes, parse)
    );
    if std::env::args().any(|arg| arg == "markdown") {
        return; // `cargo bench --bench loader -- markdown`: the markdown figures only
    }
    let group = example_group();
    let layout = Layout::under_root(group.path());
    let view = ViewOptions::default();
    let mut bytes = 0;
    let example = time_many(2000, || {
        let (memory, _) = load_group(&layout, "main", &view).unwrap();
        bytes = render(&memory, Format::Claude).len();
    });

    let (tree, deepest) = generated_tree();
    let home = tree.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut options = LoadOptions::new(&deepest, Some(home));
    options.managed_dir = None;
    let mut files = 0;
    let deep = time_many(50, || {
        let memory = load(&HostFs, &options).unwrap();
        files = memory.files.len();
        let _ = render(&memory, Format::Claude);
    });

    println!();
    println!("| case | files loaded | output | median |");
    println!("|---|---:|---:|---:|");
    println!(
        "| example group `main` (copy delivery, through the mount table) | 7 | {bytes} bytes | {:.3} ms |",
        example.as_secs_f64() * 1e3
    );
    println!(
        "| generated tree: 10 nested folders, 1,011-file import fan-out, chains to the depth limit | {files} | | {:.1} ms |",
        deep.as_secs_f64() * 1e3
    );
}
