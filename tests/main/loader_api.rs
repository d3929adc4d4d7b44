//! The loader as a library: diagnostics, formats, the container view, hostile inputs.
//!
//! Each test builds a small tree with [`Tree`], loads it and checks one story: what Claude
//! Code drops and why, what each output format looks like, and that hostile inputs (huge,
//! binary, looping, unreadable, endless) end quickly with a diagnostic instead of a panic.

use std::io;
use std::path::{Path, PathBuf};

use clawmd::loader::fs::{DirEntry, Metadata, ReadOutcome};
use clawmd::loader::{
    DiagnosticCode as D, ExternalImports, Format, HostFs, LoadOptions, Memory, MemoryFs,
    MemoryKind, Origin, Severity, load, render,
};
use clawmd::runtime::mounted::{Mount, MountedFs};

/// A temporary tree to load memory from (printed when the test fails).
use crate::support::TempTree as Tree;

/// Loading memory from a [`Tree`].
trait LoadFrom {
    /// Options for a load from `cwd` (created) with `home/` as the home and no managed dir.
    fn options(&self, cwd: &str) -> LoadOptions;
    /// [`load`] with [`LoadFrom::options`].
    fn load(&self, cwd: &str) -> Memory;
}

impl LoadFrom for Tree {
    fn options(&self, cwd: &str) -> LoadOptions {
        std::fs::create_dir_all(self.path(cwd)).unwrap();
        let mut opts = LoadOptions::new(self.path(cwd), Some(self.path("home")));
        opts.managed_dir = None;
        opts
    }

    #[track_caller]
    fn load(&self, cwd: &str) -> Memory {
        load(&HostFs, &self.options(cwd)).unwrap()
    }
}

fn codes(m: &Memory) -> Vec<D> {
    m.diagnostics.iter().map(|d| d.code).collect()
}

#[track_caller]
fn diag(m: &Memory, code: D) -> &clawmd::loader::Diagnostic {
    m.diagnostics
        .iter()
        .find(|d| d.code == code)
        .unwrap_or_else(|| panic!("no {code:?} in {:#?}", m.diagnostics))
}

fn shown(m: &Memory, root: &Path) -> Vec<String> {
    m.files
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(root)
                .unwrap_or(&f.path)
                .display()
                .to_string()
        })
        .collect()
}

#[test]
fn every_dropped_import_has_a_reason() {
    let t = Tree::new();
    t.file(
        "p/CLAUDE.md",
        "@./missing.md\n@../outside.md\n@./chain1.md\n@./picture.png\n@./folder\n`@./in-code.md`\n<!-- @./in-comment.md -->\n@./a.md\n",
    )
    .file("outside.md", "OUT\n")
    .file("p/picture.png", "PNG\n")
    .file("p/folder/x.md", "X\n")
    .file("p/a.md", "A\n@./b.md\n")
    .file("p/b.md", "B\n@./a.md\n");
    for i in 1..=6 {
        t.file(
            &format!("p/chain{i}.md"),
            format!("C{i}\n@./chain{}.md\n", i + 1),
        );
    }
    let m = t.load("p");
    assert_eq!(
        diag(&m, D::ImportMissing).import.as_deref(),
        Some("./missing.md")
    );
    assert_eq!(diag(&m, D::ImportExternal).path, t.path("outside.md"));
    assert_eq!(
        diag(&m, D::ImportTooDeep).import.as_deref(),
        Some("./chain5.md")
    );
    assert_eq!(diag(&m, D::ImportNotText).path, t.path("p/picture.png"));
    assert_eq!(diag(&m, D::ImportNotAFile).path, t.path("p/folder"));
    assert_eq!(
        diag(&m, D::ImportInCode).import.as_deref(),
        Some("./in-code.md")
    );
    assert_eq!(
        diag(&m, D::ImportInComment).import.as_deref(),
        Some("./in-comment.md")
    );
    let cycle = diag(&m, D::ImportCycle);
    assert_eq!(
        (cycle.path.clone(), cycle.from.clone()),
        (t.path("p/a.md"), Some(t.path("p/b.md")))
    );
    assert!(m.has_warnings());
    // What loads: CLAUDE.md, chain1..chain4 (depth 1..4), a, b.
    let loaded = shown(&m, t.root());
    assert_eq!(
        loaded,
        [
            "p/CLAUDE.md",
            "p/chain1.md",
            "p/chain2.md",
            "p/chain3.md",
            "p/chain4.md",
            "p/a.md",
            "p/b.md"
        ]
    );
    assert_eq!(m.files[4].depth, 4);
    assert_eq!(m.files[4].origin, Origin::Import);
}

#[test]
fn a_repeated_import_is_information_not_a_warning() {
    let t = Tree::new();
    t.file("p/CLAUDE.md", "@./x.md\n@./sub/../x.md\n")
        .file("p/x.md", "X\n");
    let m = t.load("p");
    assert_eq!(codes(&m), [D::ImportRepeated]);
    assert_eq!(m.diagnostics[0].severity, Severity::Info);
    assert!(!m.has_warnings());
}

#[test]
fn empty_files_conditional_rules_and_agents_md_are_explained() {
    let t = Tree::new();
    t.file("p/CLAUDE.md", "<!-- only a comment -->\n\n")
        .file(
            "p/.claude/rules/ts.md",
            "---\npaths: src/**/*.ts\n---\nTS\n",
        )
        .file("p/AGENTS.md", "AGENTS\n");
    let m = t.load("p");
    assert_eq!(diag(&m, D::FileEmpty).path, t.path("p/CLAUDE.md"));
    assert_eq!(
        diag(&m, D::ConditionalRule).path,
        t.path("p/.claude/rules/ts.md")
    );
    assert_eq!(diag(&m, D::AgentsMdFallback).path, t.path("p/AGENTS.md"));
    assert_eq!(shown(&m, t.root()), ["p/AGENTS.md"]);
    assert_eq!(m.files[0].origin, Origin::AgentsMd);
}

#[test]
fn size_limits() {
    let t = Tree::new();
    t.file("p/CLAUDE.md", "@./huge.md\n@./long.md\n@./fine.md\n")
        .file("p/long.md", "x".repeat(50_000))
        .file("p/fine.md", "y".repeat(39_000));
    // 50 MB, sparse: the loader must refuse it from its size, without reading it.
    let huge = std::fs::File::create(t.path("p/huge.md")).unwrap();
    huge.set_len(50 << 20).unwrap();
    let m = t.load("p");
    assert_eq!(diag(&m, D::FileTooLarge).path, t.path("p/huge.md"));
    assert_eq!(diag(&m, D::FileOversized).path, t.path("p/long.md"));
    assert!(!codes(&m).contains(&D::MemoryOversized));
    assert_eq!(
        shown(&m, t.root()),
        ["p/CLAUDE.md", "p/long.md", "p/fine.md"]
    );

    let t = Tree::new();
    let imports: String = (0..4).map(|i| format!("@./part{i}.md\n")).collect();
    t.file("p/CLAUDE.md", imports);
    for i in 0..4 {
        t.file(&format!("p/part{i}.md"), "z".repeat(35_000));
    }
    assert!(codes(&t.load("p")).contains(&D::MemoryOversized));
}

#[test]
fn binary_and_invalid_utf8_are_read_as_claude_code_reads_them() {
    let t = Tree::new();
    t.file(
        "p/CLAUDE.md",
        b"ok \xff bad \xc3\xa9 good\r\nnext\0line\n".as_slice(),
    );
    let m = t.load("p");
    // The CRLF stays: without `<!--` in the text Claude Code keeps `\r` as is (case 37).
    assert_eq!(
        m.files[0].body,
        "ok \u{fffd} bad \u{e9} good\r\nnext\0line\n"
    );
}

#[test]
fn special_files_and_loops_do_not_hang() {
    let t = Tree::new();
    t.file("p/CLAUDE.md", "@./pipe.md\n@./loop.md\nEND\n")
        .symlink("p/loop.md", "loop.md");
    t.fifo("p/pipe.md");
    let m = t.load("p");
    assert_eq!(diag(&m, D::ImportNotAFile).path, t.path("p/pipe.md"));
    assert_eq!(diag(&m, D::SymlinkLoop).path, t.path("p/loop.md"));
    assert_eq!(m.files.len(), 1);
}

/// A filesystem that refuses to read one path, as an unreadable file would (tests run as
/// root, where permissions do not apply).
struct Refusing<'a> {
    inner: HostFs,
    refused: &'a Path,
}

impl MemoryFs for Refusing<'_> {
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.inner.symlink_metadata(path)
    }
    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.inner.metadata(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.read_link(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.canonicalize(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.read_dir(path)
    }
    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome> {
        if path == self.refused {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        self.inner.read_limited(path, limit)
    }
}

#[test]
fn unreadable_files_are_skipped_with_a_warning() {
    let t = Tree::new();
    t.file("p/CLAUDE.md", "@./secret.md\nOK\n")
        .file("p/secret.md", "S\n");
    let secret = t.path("p/secret.md");
    let fs = Refusing {
        inner: HostFs,
        refused: &secret,
    };
    let m = load(&fs, &t.options("p")).unwrap();
    assert_eq!(diag(&m, D::FileUnreadable).path, secret);
    assert_eq!(m.files.len(), 1);
}

#[test]
fn import_chains_and_fans_are_handled_without_recursion() {
    let t = Tree::new();
    // A 10,000-file chain: only depth 0..4 load, the rest is never even read.
    for i in 0..10_000 {
        t.file(&format!("p/c{i}.md"), format!("C{i} @./c{}.md\n", i + 1));
    }
    t.file("p/CLAUDE.md", "@./c0.md\n");
    let m = t.load("p");
    assert_eq!(m.files.len(), 5);
    // A fan of 2,000 imports from one file: all load, in order.
    let t = Tree::new();
    let imports: String = (0..2_000).map(|i| format!("@./f{i}.md\n")).collect();
    t.file("p/CLAUDE.md", imports);
    for i in 0..2_000 {
        t.file(&format!("p/f{i}.md"), format!("F{i}\n"));
    }
    let m = t.load("p");
    assert_eq!(m.files.len(), 2_001);
    assert_eq!(m.files[2_000].body, "F1999\n");
}

#[test]
fn markdown_nested_beyond_claude_codes_stack_drops_the_file() {
    let t = Tree::new();
    // Lists nest one level per `- `; Claude Code's stack gives out near 8,690 levels
    // (measured: 8,672 load, 8,707 do not).
    t.file("p/CLAUDE.md", format!("{}@./x.md\n", "- ".repeat(8_800)))
        .file(
            "p/CLAUDE.local.md",
            format!("{} @./x.md\n", ">".repeat(1_000)),
        )
        .file("p/x.md", "X\n");
    let m = t.load("p");
    assert_eq!(diag(&m, D::FileUnparsable).path, t.path("p/CLAUDE.md"));
    assert_eq!(shown(&m, t.root()), ["p/CLAUDE.local.md", "p/x.md"]);
}

#[test]
fn loading_twice_gives_the_same_memory() {
    let t = Tree::new();
    t.file("p/CLAUDE.md", "@./a.md\n")
        .file("p/a.md", "A\n")
        .file("p/.claude/rules/r.md", "R\n");
    assert_eq!(t.load("p"), t.load("p"));
}

#[test]
fn options_are_validated() {
    let opts = LoadOptions::new("relative/dir", None);
    let err = load(&HostFs, &opts).unwrap_err();
    assert!(
        err.to_string().contains("must be an absolute path"),
        "{err}"
    );
    let t = Tree::new();
    let mut opts = t.options("p");
    opts.cwd = t.path("p/missing");
    assert!(
        load(&HostFs, &opts)
            .unwrap_err()
            .to_string()
            .contains("p/missing")
    );
}

#[test]
fn sdk_setting_sources_leave_out_local_memory() {
    let t = Tree::new();
    t.file("p/CLAUDE.md", "P\n")
        .file("p/CLAUDE.local.md", "L\n")
        .file("home/.claude/CLAUDE.md", "U\n");
    let mut opts = t.options("p");
    opts.load_local = false;
    let m = load(&HostFs, &opts).unwrap();
    assert_eq!(
        m.files.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [MemoryKind::User, MemoryKind::Project]
    );
}

fn small_memory() -> (Tree, Memory) {
    let t = Tree::new();
    t.file(
        "p/CLAUDE.md",
        "# Rules\nSee @./style.md for style.\n\n- also @./more.md\n",
    )
    .file("p/style.md", "Tabs, not spaces.\n@./deep.md\n")
    .file("p/deep.md", "Deep detail.\n")
    .file("p/more.md", "More.\n")
    .file("p/CLAUDE.local.md", "Local note.\n");
    let m = t.load("p");
    (t, m)
}

#[test]
fn claude_format_is_the_system_reminder_block() {
    let (t, m) = small_memory();
    let text = render(&m, Format::Claude).replace(&t.root().display().to_string(), "{ROOT}");
    insta::assert_snapshot!(text, @r"
    <system-reminder>
    Codebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly as written.

    Contents of {ROOT}/p/CLAUDE.md (project instructions, checked into the codebase):

    # Rules
    See @./style.md for style.

    - also @./more.md

    Contents of {ROOT}/p/style.md (project instructions, checked into the codebase):

    Tabs, not spaces.
    @./deep.md

    Contents of {ROOT}/p/deep.md (project instructions, checked into the codebase):

    Deep detail.

    Contents of {ROOT}/p/more.md (project instructions, checked into the codebase):

    More.

    Contents of {ROOT}/p/CLAUDE.local.md (user's private project instructions, not checked in):

    Local note.
    </system-reminder>
    ");
}

#[test]
fn flat_format_inlines_imports_after_the_line_that_imports_them() {
    let (t, m) = small_memory();
    let text = render(&m, Format::Flat).replace(&t.root().display().to_string(), "{ROOT}");
    insta::assert_snapshot!(text, @r"
    <!-- Claude Code memory for {ROOT}/p, flattened by clawmd: 5 files, imports inlined. Generated; do not edit. -->

    <!-- {ROOT}/p/CLAUDE.md (project instructions, checked into the codebase) -->
    # Rules
    See @./style.md for style.
    <!-- begin @./style.md: {ROOT}/p/style.md -->
    Tabs, not spaces.
    @./deep.md
    <!-- begin @./deep.md: {ROOT}/p/deep.md -->
    Deep detail.
    <!-- end @./deep.md -->
    <!-- end @./style.md -->

    - also @./more.md
    <!-- begin @./more.md: {ROOT}/p/more.md -->
    More.
    <!-- end @./more.md -->

    <!-- {ROOT}/p/CLAUDE.local.md (user's private project instructions, not checked in) -->
    Local note.
    ");
}

#[test]
fn messages_format_is_one_user_message() {
    let (_t, m) = small_memory();
    let text = render(&m, Format::Messages);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let list = value.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["role"], "user");
    let content = list[0]["content"].as_str().unwrap();
    assert_eq!(Some(content.to_string()), clawmd::loader::claude_block(&m));
    assert!(
        content.ends_with("</system-reminder>"),
        "the exact text part, no trailing newline"
    );
}

#[test]
fn the_structured_result_serialises_for_check() {
    let (t, m) = small_memory();
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(
        json["files"][1]["parent"],
        t.path("p/CLAUDE.md").display().to_string()
    );
    assert_eq!(json["files"][1]["import"], "./style.md");
    assert_eq!(json["files"][1]["kind"], "project");
    assert_eq!(json["files"][1]["origin"], "import");
    assert_eq!(json["files"][4]["kind"], "local");
}

#[test]
fn a_group_renders_as_its_container_sees_it() {
    let t = Tree::new();
    t.file("container/CLAUDE.md", "Shared base.\n")
        .file(
            "container/skills/web/instructions.md",
            "Browse carefully.\n",
        )
        // The composed CLAUDE.md is in the group's bind folder, bound over the group's own.
        .file("groups/main/CLAUDE.md", "MOUNT POINT, NEVER SEEN\n")
        .file(
            "groups/.clawmd/binds/main/CLAUDE.md",
            "@./.claude-shared.md\n@./.claude-fragments/web.md\n@./.claude-fragments/mcp-db.md\n",
        )
        .file("groups/main/.claude-fragments/mcp-db.md", "Read-only DB.\n")
        .file("groups/main/CLAUDE.local.md", "Group memory.\n")
        .symlink("groups/main/.claude-shared.md", "/app/CLAUDE.md")
        .symlink(
            "groups/main/.claude-fragments/web.md",
            "/app/skills/web/instructions.md",
        );
    let layout = clawmd::layout::Layout::under_root(t.root());
    let needs = clawmd::layout::MountNeeds {
        entry_point: "CLAUDE.md",
        fragments: true,
        managed: false,
        app: true,
        config: false,
    };
    let mounts = clawmd::view::container_mounts(&layout, "main", &needs);
    let fs = MountedFs::new(mounts);
    let mut opts = LoadOptions::new("/workspace/agent", None);
    opts.managed_dir = None;
    opts.external_imports = ExternalImports::Denied;
    let m = load(&fs, &opts).unwrap();
    assert_eq!(
        m.files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect::<Vec<_>>(),
        [
            "/workspace/agent/CLAUDE.md",
            "/workspace/agent/.claude-fragments/mcp-db.md",
            "/workspace/agent/CLAUDE.local.md"
        ]
    );
    let dropped: Vec<_> = m
        .diagnostics
        .iter()
        .filter(|d| d.code == D::ImportExternal)
        .map(|d| d.import.clone().unwrap())
        .collect();
    assert_eq!(
        dropped,
        ["./.claude-shared.md", "./.claude-fragments/web.md"]
    );

    opts.external_imports = ExternalImports::Approved;
    let m = load(&fs, &opts).unwrap();
    assert_eq!(m.files.len(), 5);
    assert_eq!(
        m.files[1].path,
        Path::new("/workspace/agent/.claude-shared.md")
    );
    assert_eq!(m.files[1].real_path, Path::new("/app/CLAUDE.md"));
    assert_eq!(m.files[1].body, "Shared base.\n");
}

#[test]
fn container_home_and_approval_come_through_the_mounts() {
    let t = Tree::new();
    t.file("groups/g/CLAUDE.md", "@./link.md\n")
        .symlink("groups/g/link.md", "/app/x.md")
        .file("app/x.md", "X\n")
        .file("home/.claude/CLAUDE.md", "User memory.\n")
        .file(
            "home/.claude.json",
            r#"{"projects":{"/workspace/agent":{"hasClaudeMdExternalIncludesApproved":true}}}"#,
        );
    let fs = MountedFs::new([
        Mount::new("/workspace/agent", t.path("groups/g")),
        Mount::new("/app", t.path("app")),
        Mount::new("/home/node", t.path("home")),
    ]);
    let mut opts = LoadOptions::new("/workspace/agent", Some("/home/node".into()));
    opts.managed_dir = None;
    let m = load(&fs, &opts).unwrap();
    assert!(m.external_imports_approved);
    assert_eq!(
        m.files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect::<Vec<_>>(),
        [
            "/home/node/.claude/CLAUDE.md",
            "/workspace/agent/CLAUDE.md",
            "/workspace/agent/link.md"
        ]
    );
}

#[test]
fn discover_lists_the_places_in_order() {
    let mut opts = LoadOptions::new("/a/b", Some("/home/u".into()));
    opts.managed_dir = Some("/etc/claude-code".into());
    let places: Vec<String> = clawmd::loader::discover(&opts)
        .into_iter()
        .map(|c| format!("{}{}", c.path.display(), if c.rules_dir { "/" } else { "" }))
        .collect();
    assert_eq!(
        places,
        [
            "/etc/claude-code/CLAUDE.md",
            "/etc/claude-code/.claude/rules/",
            "/home/u/.claude/CLAUDE.md",
            "/home/u/.claude/rules/",
            "/a/CLAUDE.md",
            "/a/.claude/CLAUDE.md",
            "/a/.claude/rules/",
            "/a/CLAUDE.local.md",
            "/a/b/CLAUDE.md",
            "/a/b/.claude/CLAUDE.md",
            "/a/b/.claude/rules/",
            "/a/b/CLAUDE.local.md",
        ]
    );
}

#[test]
fn device_and_process_files_are_never_read_but_proc_version_is() {
    let t = Tree::new();
    t.file(
        "p/CLAUDE.md",
        "@/proc/self/environ\n@/proc/version\n@/dev/stdin\nP\n",
    );
    let mut opts = t.options("p");
    opts.external_imports = ExternalImports::Approved;
    let m = load(&HostFs, &opts).unwrap();
    assert_eq!(
        m.files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect::<Vec<_>>(),
        [
            t.path("p/CLAUDE.md").display().to_string(),
            "/proc/version".to_string()
        ]
    );
    let refused: Vec<_> = m
        .diagnostics
        .iter()
        .filter(|d| d.code == D::ImportNotAFile)
        .map(|d| d.path.clone())
        .collect();
    assert_eq!(
        refused,
        [Path::new("/proc/self/environ"), Path::new("/dev/stdin")]
    );
}

/// Counts the filesystem calls of a load, to assert that hostile input costs bounded work.
struct Counting {
    calls: std::cell::Cell<usize>,
}

impl Counting {
    fn new() -> Self {
        Counting {
            calls: std::cell::Cell::new(0),
        }
    }
    fn tick(&self) {
        self.calls.set(self.calls.get() + 1);
    }
}

impl MemoryFs for Counting {
    fn symlink_metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.tick();
        HostFs.symlink_metadata(path)
    }
    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.tick();
        HostFs.metadata(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.tick();
        HostFs.read_link(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.tick();
        HostFs.canonicalize(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.tick();
        HostFs.read_dir(path)
    }
    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<ReadOutcome> {
        self.tick();
        HostFs.read_limited(path, limit)
    }
}

#[track_caller]
fn budget_diag<'m>(m: &'m Memory, budget: &str) -> &'m clawmd::loader::Diagnostic {
    m.diagnostics
        .iter()
        .find(|d| d.code == D::BudgetExceeded && d.message.contains(&format!("{budget} budget")))
        .unwrap_or_else(|| panic!("no {budget} budget diagnostic in {:#?}", m.diagnostics))
}

/// Brace expansion in a rule's `paths:` (issue 8: 3.5 MB asked for 17 GB and aborted): the
/// expansion stops at the glob budgets, the rule stays conditional, the diagnostic names it.
#[test]
fn a_brace_bomb_in_paths_frontmatter_is_cut_at_the_glob_budget() {
    let bomb = "{a,b}".repeat(60_000); // 300 KB; before: 1,000 copies of it (300 MB)
    let rule = format!("---\npaths: \"src/{bomb}.rs\"\n---\nConditional.\n");
    let parsed = clawmd::loader::content::parse(&rule).unwrap();
    assert!(parsed.paths_truncated);
    let globs = parsed.paths.expect("still conditional");
    let bytes: usize = globs.iter().map(String::len).sum();
    assert!(
        bytes <= 1 << 20 && globs.len() <= 10_000,
        "{} globs, {bytes} bytes",
        globs.len()
    );
    // Ordinary braces are untouched.
    let parsed =
        clawmd::loader::content::parse("---\npaths: \"{a,b}/{c,d}.rs\"\n---\nX\n").unwrap();
    assert!(!parsed.paths_truncated);
    assert_eq!(
        parsed.paths.unwrap(),
        ["a/c.rs", "a/d.rs", "b/c.rs", "b/d.rs"]
    );
    // A bomb of `**` only (after the budget) still reads as conditional when anything else is
    // there, and through the loader the rule is held back with both diagnostics.
    let t = Tree::new();
    t.file("p/CLAUDE.md", "P\n")
        .file("p/.claude/rules/r.md", &rule);
    let m = t.load("p");
    assert_eq!(m.files.len(), 1);
    assert_eq!(
        diag(&m, D::ConditionalRule).path,
        t.path("p/.claude/rules/r.md")
    );
    let d = budget_diag(&m, "glob patterns");
    assert_eq!(d.path, t.path("p/.claude/rules/r.md"));
    assert!(d.message.contains("incomplete"), "{}", d.message);
}

/// A huge `claudeMdExcludes` list (issue 8: 1.9 MB of globs, 1 GB): only the first 1,000
/// patterns are applied, the diagnostic names the settings file, and those still work.
#[test]
fn a_huge_exclude_list_is_cut_at_the_exclude_budget() {
    let t = Tree::new();
    let mut patterns = vec![format!("{}/p/skipped.md", t.root().display())];
    patterns.extend((0..3_000).map(|i| format!("**/d{i}/*.md")));
    let settings = serde_json::json!({ "claudeMdExcludes": patterns });
    t.file("p/CLAUDE.md", "P @./skipped.md\n")
        .file("p/skipped.md", "S\n")
        .file("p/.claude/settings.json", settings.to_string());
    let m = t.load("p");
    assert_eq!(shown(&m, t.root()), ["p/CLAUDE.md"]);
    let d = budget_diag(&m, "exclude patterns");
    assert_eq!(d.path, t.path("p/.claude/settings.json"));
    assert!(d.message.contains("2001 more pattern(s)"), "{}", d.message);
}

/// Hard links to one big file, all imported (issue 8: 64 links to 4 MiB, 750 MB): reading
/// stops at the bytes budget (16 MiB), and the diagnostic names the first file left out.
#[test]
fn hard_links_to_a_big_file_stop_at_the_bytes_budget() {
    let t = Tree::new();
    let big = "x".repeat(4 * 1024 * 1024 - 100) + "\n";
    t.file("p/big.md", &big);
    let mut imports = String::from("P\n@./big.md\n");
    for i in 1..12 {
        std::fs::hard_link(t.path("p/big.md"), t.path(&format!("p/h{i}.md"))).unwrap();
        imports += &format!("@./h{i}.md\n");
    }
    t.file("p/CLAUDE.md", imports);
    let m = t.load("p");
    let loaded: usize = m.files.iter().map(|f| f.body.len()).sum();
    assert!(loaded <= 16 * 1024 * 1024, "{loaded} bytes loaded");
    assert_eq!(m.files.len(), 1 + 4, "CLAUDE.md and 4 copies fit in 16 MiB");
    let d = budget_diag(&m, "bytes");
    assert_eq!(d.path, t.path("p/h4.md"));
    assert!(
        m.diagnostics
            .iter()
            .any(|d| d.message.contains("bytes budget was reached 7 more")),
        "{:#?}",
        m.diagnostics
    );
}

/// Deeply nested rules folders (issue 8: 500 levels took 10 s, cubic): folders past the
/// rules-depth budget are not read, and the filesystem work stays small.
#[test]
fn deeply_nested_rules_folders_stop_at_the_rules_depth_budget() {
    let t = Tree::new();
    let mut dir = String::from("p/.claude/rules");
    for level in 1..=120 {
        dir += "/d";
        if level == 10 || level == 100 {
            t.file(&format!("{dir}/r{level}.md"), format!("R{level}\n"));
        }
    }
    std::fs::create_dir_all(t.path(&dir)).unwrap();
    let fs = Counting::new();
    let m = load(&fs, &t.options("p")).unwrap();
    assert_eq!(
        m.files.iter().map(|f| f.body.as_str()).collect::<Vec<_>>(),
        ["R10\n"]
    );
    let d = budget_diag(&m, "rules depth");
    assert!(
        d.path
            .ends_with(format!(".claude/rules{}", "/d".repeat(65))),
        "{}",
        d.path.display()
    );
    assert!(
        fs.calls.get() < 2_000,
        "{} filesystem calls",
        fs.calls.get()
    );
}

/// Many missing imports in one file (issue 8: 468k in 4 MiB took 15.7 s and 400 MB): only
/// the first 5,000 imports are followed, so the work and the diagnostics stay bounded.
#[test]
fn many_missing_imports_stop_at_the_imports_per_file_budget() {
    let t = Tree::new();
    let imports: String = (0..20_000).map(|i| format!("@./m{i}.md\n")).collect();
    t.file("p/CLAUDE.md", imports);
    let fs = Counting::new();
    let m = load(&fs, &t.options("p")).unwrap();
    let missing = m
        .diagnostics
        .iter()
        .filter(|d| d.code == D::ImportMissing)
        .count();
    assert_eq!(missing, 5_000);
    assert_eq!(
        budget_diag(&m, "imports per file").path,
        t.path("p/CLAUDE.md")
    );
    assert!(
        fs.calls.get() < 5_000 * 3,
        "{} filesystem calls",
        fs.calls.get()
    );
}

/// Budgets are options: tiny ones cut early, each with its diagnostic, and never abort.
#[test]
fn every_budget_is_an_option_and_reports_when_reached() {
    let t = Tree::new();
    let imports: String = (0..30).map(|i| format!("@./f{i}.md\n")).collect();
    t.file("p/CLAUDE.md", imports);
    for i in 0..30 {
        t.file(&format!("p/f{i}.md"), format!("F{i} @./missing{i}.md\n"));
    }
    let mut opts = t.options("p");
    opts.budgets.files = 10;
    let m = load(&HostFs, &opts).unwrap();
    assert_eq!(m.files.len(), 10);
    budget_diag(&m, "files");
    let mut opts = t.options("p");
    opts.budgets.imports = 12;
    let m = load(&HostFs, &opts).unwrap();
    budget_diag(&m, "imports");
    assert!(m.files.len() <= 13);
    let mut opts = t.options("p");
    opts.budgets.diagnostics = 5;
    let m = load(&HostFs, &opts).unwrap();
    assert_eq!(m.files.len(), 31);
    assert_eq!(m.diagnostics.len(), 6, "{:#?}", m.diagnostics);
    assert!(m.diagnostics[5].message.contains("25 more diagnostic(s)"));
    // Matching excludes is budgeted work (path bytes × patterns): long paths against many
    // patterns stop being matched, with a diagnostic; before that, excludes apply.
    let mut opts = t.options("p");
    opts.excludes = vec!["**/f0.md".into(), "**/nothing/*.md".into()];
    let m = load(&HostFs, &opts).unwrap();
    assert_eq!(m.files.len(), 30, "f0.md excluded");
    opts.budgets.exclude_work = 400;
    let m = load(&HostFs, &opts).unwrap();
    assert_eq!(
        m.files.len(),
        31,
        "the budget is spent before f0.md is matched"
    );
    budget_diag(&m, "exclude matching");
}

/// Imports of very deep paths (found while attacking this work: 998 imports 2,000 folders
/// deep in one 4 MiB file took 20 s of CPU through the container view): each path component
/// costs one lookup, the view stops at its budget of lookups with a diagnostic, and a path of
/// `PATH_MAX` bytes or more fails as it does in the kernel.
#[test]
fn imports_of_very_deep_paths_stop_at_the_path_steps_budget() {
    let t = Tree::new();
    let mut deep = t.path("groups/g");
    for _ in 0..300 {
        deep.push("a");
    }
    std::fs::create_dir_all(&deep).unwrap();
    let dirs = "a/".repeat(300);
    let imports: String = (0..200).map(|i| format!("@./{dirs}m{i}.md\n")).collect();
    t.file(
        "groups/g/CLAUDE.md",
        format!("Deep.\n@./{dirs}found.md\n{imports}"),
    );
    t.file(&format!("groups/g/{dirs}found.md"), "FOUND\n");
    let fs = MountedFs::new([Mount::new("/workspace/agent", t.path("groups/g"))])
        .with_step_budget(20_000);
    let mut opts = LoadOptions::new("/workspace/agent", None);
    opts.managed_dir = None;
    let m = load(&fs, &opts).unwrap();
    assert_eq!(m.files.len(), 2, "{:#?}", m.diagnostics);
    assert_eq!(m.files[1].body, "FOUND\n");
    let d = budget_diag(&m, "path steps");
    assert!(d.message.contains("20000 path components"), "{}", d.message);
    // Linear: at most the budget and a few more lookups, never one per byte of path.
    assert!(fs.steps() <= 20_000 + 1_000, "{} steps", fs.steps());
    let missing = m
        .diagnostics
        .iter()
        .filter(|d| d.code == D::ImportMissing)
        .count();
    assert!(
        missing > 0 && missing < 200,
        "{missing} imports looked at before the budget"
    );
    // A path as long as PATH_MAX does not exist, as in the kernel.
    let long = format!("/workspace/agent/{}x.md", "a/".repeat(2048));
    let err = fs.metadata(Path::new(&long)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(36), "ENAMETOOLONG: {err}");
}
