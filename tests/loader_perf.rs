//! Timings for docs/loader.md (not assertions: machines differ). Run with
//! `cargo test --release --test loader_perf -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use clawmd::loader::{Format, HostFs, LoadOptions, load, render};

fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
#[ignore]
fn timings() {
    // A small group: composed entry point, shared base, two skills, an MCP note, local memory.
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    write(&root, "g/CLAUDE.md", "<!-- generated -->\n@./base.md\n@./skills/a.md\n@./skills/b.md\n@./mcp-db.md\n");
    write(&root, "g/base.md", &"Be concise. Use tools carefully. @not-a-file\n".repeat(40));
    write(&root, "g/skills/a.md", &"- Skill A step with `code`.\n".repeat(20));
    write(&root, "g/skills/b.md", &"Skill B: **bold** and _em_ text.\n".repeat(20));
    write(&root, "g/mcp-db.md", "Read-only database.\n");
    write(&root, "g/CLAUDE.local.md", &"Remember: the user prefers tabs.\n".repeat(30));
    let mut opts = LoadOptions::new(root.join("g"), None);
    opts.managed_dir = None;
    let small = best_of(50, || {
        let m = load(&HostFs, &opts).unwrap();
        let _ = render(&m, Format::Claude);
    });

    // 1,000 files: 100 chains of 10 imports each (5 load per chain), plus the files.
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut entry = String::new();
    for c in 0..100 {
        entry.push_str(&format!("@./c{c}/f0.md\n"));
        for i in 0..10 {
            let body = format!("# Chain {c} file {i}\nSome text with `code` and *emphasis*.\n@./f{}.md\n", i + 1);
            write(&root, &format!("p/c{c}/f{i}.md"), &body.repeat(3));
        }
    }
    write(&root, "p/CLAUDE.md", &entry);
    let mut opts = LoadOptions::new(root.join("p"), None);
    opts.managed_dir = None;
    let mut files = 0;
    let big = best_of(10, || {
        let m = load(&HostFs, &opts).unwrap();
        files = m.files.len();
        let _ = render(&m, Format::Claude);
    });
    // 1,000 files that all load: ten top files importing 99 files each.
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut top = String::new();
    for t in 0..10 {
        top.push_str(&format!("@./t{t}.md\n"));
        let imports: String = (0..99).map(|i| format!("See @./t{t}/f{i}.md here.\n")).collect();
        write(&root, &format!("p/t{t}.md"), &imports);
        for i in 0..99 {
            write(&root, &format!("p/t{t}/f{i}.md"), &format!("File {i} of {t}: `x` *y* [z](u)\n").repeat(5));
        }
    }
    write(&root, "p/CLAUDE.md", &top);
    let mut opts = LoadOptions::new(root.join("p"), None);
    opts.managed_dir = None;
    let mut all = 0;
    let fan = best_of(10, || {
        let m = load(&HostFs, &opts).unwrap();
        all = m.files.len();
        let _ = render(&m, Format::Claude);
    });
    println!("small group: {small:?}; 1,000-file chains ({files} loaded): {big:?}; 1,000-file fan ({all} loaded): {fan:?}");
}
