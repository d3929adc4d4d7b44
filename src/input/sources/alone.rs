//! Each source as Claude Code loads that file on its own, and how a composed document holds it.
//!
//! A shared base, a skill's `instructions.md` or a module fragment is written to be loaded by
//! Claude Code as a memory file: its own frontmatter is stripped, its HTML comment blocks too,
//! its `@imports` are followed from its own folder up to Claude Code's depth limit, and it
//! ends where the file ends. A composed document (inline, managed, copy fragments, flat
//! `AGENTS.md` / `GEMINI.md`) must give the agent that same text, no more and no less, and
//! nothing one source leaves open (a fence, a comment) may change how the next is read.
//!
//! So clawmd does not paste the source: it loads it alone with the loader
//! ([`crate::loader::load_alone`], the release the settings name) inside the container's view
//! of the files it may import ([`SourceTree`]), and places each file Claude Code would show,
//! in order, as the document's text ([`delivered`]): line endings as the composed document
//! has them (`\n` wherever comment blocks are stripped, since the document's own section
//! comments are), import mentions shown as text (the document must import nothing), and
//! whatever the text leaves open closed after it (the closing fence, `-->`, …), checked by
//! reading the result back with the same loader.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::input::sources::expand::neutralise;
use crate::loader::content::{at_mentions, js_trim};
use crate::loader::content::{import_path_as, scan_markdown_as};
use crate::loader::fs::{MemoryFs, ReadOutcome};
use crate::loader::paths::resolve_import;
use crate::loader::{
    Behaviour, ClaudeVersion, Diagnostic, DiagnosticCode, MAX_FILE_BYTES, MAX_IMPORT_DEPTH,
    load_alone,
};
use crate::plan::snapshot::Snapshot;

/// The most files one source's imports may bring into its tree (Claude Code's own budgets
/// stop far below this for any real source; the owner's folder is trusted, but bounded all
/// the same).
const MAX_TREE_FILES: usize = 256;

/// What a file of a [`SourceTree`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeNode {
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A link to another path of the tree.
    Link(PathBuf),
}

/// A source and every file its imports may reach (to Claude Code's depth limit), as the
/// container shows them: enough to load the source alone for any release, without touching
/// the disk again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTree {
    /// The source's own path in the container (e.g. `/app/skills/web/instructions.md`).
    pub root: PathBuf,
    /// Every file, by container path.
    pub files: BTreeMap<PathBuf, TreeNode>,
}

/// One file Claude Code shows when it loads a source alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownFile {
    /// Its path as Claude Code prints it.
    pub path: PathBuf,
    /// Its body as Claude Code shows it (trimmed where the release trims).
    pub body: String,
}

impl SourceTree {
    /// A text of clawmd's own (an MCP server's fenced instructions, a skill index, a group
    /// file already shown as text): one file, importing nothing.
    pub fn single(bytes: &[u8]) -> Self {
        let root = PathBuf::from("/clawmd/section.md");
        SourceTree {
            files: BTreeMap::from([(root.clone(), TreeNode::File(bytes.to_vec()))]),
            root,
        }
    }

    /// The source at `root` (container path) whose bytes are `bytes`, and every file its
    /// imports may reach in `fs`, read generously (every `@` mention, with and without its
    /// `#…` suffix, whatever the release would make of it) so that loading it alone for any
    /// release finds what that release would.
    pub fn gather(fs: &impl MemoryFs, root: &Path, bytes: Vec<u8>) -> Self {
        let mut files = BTreeMap::new();
        let mut queue: VecDeque<(PathBuf, usize)> = VecDeque::new();
        let real_root = fs.canonicalize(root).unwrap_or_else(|_| root.to_owned());
        if real_root != root {
            files.insert(root.to_owned(), TreeNode::Link(real_root.clone()));
        }
        files.insert(real_root.clone(), TreeNode::File(bytes));
        queue.push_back((real_root, 0));
        while let Some((path, depth)) = queue.pop_front() {
            if depth + 1 >= MAX_IMPORT_DEPTH {
                continue;
            }
            let Some(TreeNode::File(bytes)) = files.get(&path) else {
                continue;
            };
            let text = String::from_utf8_lossy(bytes).into_owned();
            let base = path.parent().unwrap_or(Path::new("/")).to_owned();
            let mut written: Vec<String> = Vec::new();
            for capture in at_mentions(&text) {
                for version in [ClaudeVersion::new(2, 1, 41), ClaudeVersion::new(2, 1, 40)] {
                    if let Some(path) = import_path_as(capture, version)
                        && !written.contains(&path)
                    {
                        written.push(path);
                    }
                }
            }
            for import in written {
                if files.len() >= MAX_TREE_FILES {
                    break;
                }
                let Some(target) = resolve_import(&import, &base, None) else {
                    continue;
                };
                if files.contains_key(&target) {
                    continue;
                }
                let Ok(real) = fs.canonicalize(&target) else {
                    continue;
                };
                if real != target {
                    files.insert(target.clone(), TreeNode::Link(real.clone()));
                }
                if files.contains_key(&real) {
                    continue;
                }
                if let Ok(ReadOutcome::Bytes(bytes)) = fs.read_limited(&real, MAX_FILE_BYTES) {
                    files.insert(real.clone(), TreeNode::File(bytes));
                    queue.push_back((real, depth + 1));
                }
            }
        }
        SourceTree {
            root: root.to_owned(),
            files,
        }
    }

    /// The tree as a filesystem.
    pub fn snapshot(&self) -> Snapshot {
        let mut fs = Snapshot::new();
        self.add_to(&mut fs, |_| true);
        fs
    }

    /// Adds the files of the tree that `keep` accepts to `fs`.
    pub fn add_to(&self, fs: &mut Snapshot, keep: impl Fn(&Path) -> bool) {
        for (path, node) in self.files.iter().filter(|(path, _)| keep(path)) {
            match node {
                TreeNode::File(bytes) => fs.file(path, bytes.clone()),
                TreeNode::Link(target) => fs.link(path, target),
            }
        }
    }

    /// What Claude Code `version` shows loading the source alone: the source, then each
    /// file it imports, in its order; with the diagnostics of what does not load.
    pub fn shown(&self, version: ClaudeVersion) -> (Vec<ShownFile>, Vec<Diagnostic>) {
        let (files, diagnostics) = load_alone(&self.snapshot(), &self.root, version);
        let trimmed = version.has(Behaviour::BodiesTrimmed);
        let shown = files
            .into_iter()
            .map(|file| ShownFile {
                body: match trimmed {
                    true => js_trim(&file.body).to_owned(),
                    false => file.body,
                },
                path: file.path,
            })
            .collect();
        (shown, diagnostics)
    }
}

/// A source placed in a composed document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedSource {
    /// The section's text in the document.
    pub text: String,
    /// The text of each file Claude Code shows loading the source alone, as the agent reads
    /// it in the document (each must be found there, whole).
    pub expected: Vec<String>,
    /// The section's own bytes are delivered as they are (`text` is them read as UTF-8).
    pub original: bool,
    /// `text` is sealed ([`crate::input::sources::Section::sealed`]): every file was closed, read
    /// back importing nothing, and no link reference is defined in it.
    pub sealed: bool,
}

/// The files `shown` (a source loaded alone, [`SourceTree::shown`]) as the text of a section
/// of a composed document read by Claude Code `version`: each file's body with `\n` line
/// endings where the release strips comment blocks (the document's section comments make it
/// rebuild the text), its import mentions shown as text, and what it leaves open closed
/// after it; the files after the first each after a comment naming them.
pub fn delivered(shown: &[ShownFile], version: ClaudeVersion) -> PlacedSource {
    let normalise = version.has(Behaviour::CommentBlocksStripped);
    let mut parts: Vec<String> = Vec::new();
    let mut expected = Vec::new();
    let mut sealed = true;
    for (index, file) in shown.iter().enumerate() {
        let mut body = js_trim(&file.body).to_owned();
        if normalise && body.contains('\r') {
            body = body.replace("\r\n", "\n").replace('\r', "\n");
        }
        let body = js_trim(&neutralise(&body)).to_owned();
        if index > 0 {
            parts.push(format!(
                "<!-- clawmd: {}, imported above, as Claude Code loads it -->",
                comment_safe(&file.path.to_string_lossy())
            ));
        }
        let (body, closed, was_closed) = close_open(&body, version);
        sealed &= was_closed;
        parts.push(closed);
        expected.push(body);
    }
    let mut text = parts.join("\n\n");
    text.push('\n');
    PlacedSource {
        sealed: sealed && !may_define_link_reference(&text),
        text,
        expected,
        original: false,
    }
}

/// Whether `text` may define a link reference (`[label]: destination`): a definition
/// anywhere in a document (marked keeps them in one table) turns a `[text][label]` of
/// another section into a link whose text is searched for imports. Every definition holds
/// `]:`, so a text without it defines none.
fn may_define_link_reference(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"]:").is_some()
}

/// `text` safe inside an HTML comment (no `--`, no line break).
fn comment_safe(text: &str) -> String {
    text.replace("--", "- -").replace(['\n', '\r'], " ")
}

/// What clawmd writes after a text that leaves something open, in the order tried (besides
/// a fence run as long as the one left open).
pub const CLOSERS: &[&str] = &[
    "-->",
    "</pre>",
    "</script>",
    "</style>",
    "</textarea>",
    "?>",
    "]]>",
    ">",
];

/// `text` as the document holds it, and that with what it leaves open (a code fence, an HTML
/// block) closed after it, so that what follows it in a document is read as it would be on its
/// own and `text` itself is read as it is. Unchanged when nothing is open. An HTML block that
/// no closer can end without changing how it reads (an unclosed `<!--`, which Claude Code shows
/// as text in a file of its own, would become a comment and vanish) has its opener broken by a
/// zero-width space after its `<` (`<\u{200B}!--`), so that it opens nothing and reads as the
/// same text. The third value says whether that worked (the result imports nothing and leaves
/// nothing open); when nothing works the text is returned as it is (and the verdict, which
/// reads the document, says the source does not reach the agent whole).
pub fn close_open(text: &str, version: ClaudeVersion) -> (String, String, bool) {
    // A text the release cannot read at all (nested past its stack, or deriving more text
    // than the lexer's cap: an agent's 2,000,000 nested quotes) stays unreadable whatever is
    // put after it (what follows a text only adds to what lexing it derives) or whichever
    // HTML opener is neutralised (that only exposes more to the lexer): none of the dozens of
    // closings below is tried, each a lexing of the whole text (seconds, for a hostile one).
    match closed_state(text, text, version) {
        None => return (text.to_owned(), text.to_owned(), false),
        Some(true) => return (text.to_owned(), text.to_owned(), true),
        Some(false) => {}
    }
    if let Some(closed) = close_with(text, version) {
        return (text.to_owned(), closed, true);
    }
    let mut current = text.to_owned();
    for _ in 0..4 {
        let Some(at) = last_html_opener(&current) else {
            break;
        };
        current.replace_range(at..at + 1, "<\u{200B}");
        if let Some(closed) = close_with(&current, version) {
            return (current, closed, true);
        }
    }
    (text.to_owned(), text.to_owned(), false)
}

/// Where the last HTML block opener of `text` that runs past blank lines starts.
fn last_html_opener(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    [
        "<!--",
        "<?",
        "<![cdata[",
        "<pre",
        "<script",
        "<style",
        "<textarea",
        "<!",
    ]
    .iter()
    .filter_map(|opener| lower.rfind(opener))
    .max()
}

/// `text` closed with what it leaves open, or `None` when no closer does it.
fn close_with(text: &str, version: ClaudeVersion) -> Option<String> {
    let mut current = text.to_owned();
    for _ in 0..4 {
        if is_closed(&current, text, version) {
            return Some(current);
        }
        let mut candidates: Vec<String> = fence_openers(&current);
        candidates.extend(CLOSERS.iter().map(|c| (*c).to_owned()));
        let next = candidates
            .iter()
            .map(|closer| format!("{current}\n{closer}"))
            .find(|closed| is_closed(closed, text, version));
        match next {
            Some(closed) => return Some(closed),
            // Close the innermost fence and try again (a fence inside an HTML block, …).
            None => current = format!("{current}\n{}", fence_openers(&current).first()?),
        }
    }
    is_closed(&current, text, version).then_some(current)
}

/// Whether `closed` (holding `original`) leaves nothing open and imports nothing: `original`
/// is read as it is, and a comment block and a line after it are read fresh (the line's
/// mention is the only import).
fn is_closed(closed: &str, original: &str, version: ClaudeVersion) -> bool {
    closed_state(closed, original, version) == Some(true)
}

/// [`is_closed`], or `None` when the release cannot read `closed` (with the probe after it)
/// at all.
fn closed_state(closed: &str, original: &str, version: ClaudeVersion) -> Option<bool> {
    const PROBE: &str = "clawmd-probe-9f2c.md";
    let probe = format!("{closed}\n\n<!-- clawmd probe -->\n@{PROBE}\n");
    let scan = scan_markdown_as(&probe, version).ok()?;
    Some(
        scan.imports == [PROBE]
            && scan.body.contains(original)
            && (!version.has(Behaviour::CommentBlocksStripped)
                || !scan.body.contains("clawmd probe")),
    )
}

/// The fence runs that open a line of `text` (three or more backticks or tildes after at most
/// three spaces), the last first, each once.
fn fence_openers(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines().rev() {
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() > 3 {
            continue;
        }
        for mark in ['`', '~'] {
            let run = trimmed.len() - trimmed.trim_start_matches(mark).len();
            if run >= 3 {
                let fence = mark.to_string().repeat(run);
                if !out.contains(&fence) {
                    out.push(fence);
                }
            }
        }
    }
    out
}

/// Where a section's text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SectionForm {
    /// Into one document with other sections (inline, managed, flat `AGENTS.md`/`GEMINI.md`).
    Document,
    /// Into a file of its own, imported by the entry point (copy delivery).
    OwnFile,
    /// Link delivery: a section with an owner's file is that file itself.
    Link,
}

/// Makes `section` what a group's plan delivers for Claude Code `version` in `form`: its text
/// the source composed as that release loads it alone ([`delivered`], [`own_file`]), and
/// what the agent must find of it ([`crate::input::sources::Section::expected`]). In link delivery a
/// section with an owner's file is that file itself, loaded by Claude Code through the link:
/// its text stays the owner's bytes and what must be found is what that release shows of it
/// alone.
pub fn prepare(
    section: &mut crate::input::sources::Section,
    version: ClaudeVersion,
    form: SectionForm,
) {
    section.size = section.text.len() as u64;
    let single;
    let tree = match &section.tree {
        Some(tree) => tree.as_ref(),
        None => {
            single = SourceTree::single(&section.text);
            &single
        }
    };
    let (shown, diagnostics) = tree.shown(version);
    let skipped_whole = shown.is_empty()
        && !section.text.is_empty()
        && diagnostics
            .iter()
            .any(|d| d.code == DiagnosticCode::FileTooLarge && d.path == tree.root);
    if skipped_whole {
        // Over Claude Code's size limit for a memory file: no form of it loads, as a file of
        // its own or in a document (one that holds it is over the limit too). Its text stays
        // as it is and all of it must be found, so the verdict says it does not reach the
        // agent (it was an empty section that reached it "complete").
        section.expected = vec![js_trim(&String::from_utf8_lossy(&section.text)).to_owned()];
        section.sealed = false;
        return;
    }
    let out = match form {
        SectionForm::Link if section.link.is_some() => {
            section.expected = shown.into_iter().map(|file| file.body).collect();
            return;
        }
        SectionForm::OwnFile => own_file(&shown, version, section),
        _ => delivered(&shown, version),
    };
    if !out.original {
        section.text = out.text.into_bytes();
    }
    section.expected = out.expected;
    section.sealed = out.sealed;
}

/// The files `shown` as a file of their own (a copy fragment): a source that imports nothing
/// is copied byte for byte (Claude Code reads the copy as it reads the source: frontmatter,
/// comments, line endings); a single file whose shown text reads back as itself is written as
/// that text; otherwise the document form after a comment naming the section (so
/// that nothing at its start is read as frontmatter again).
pub fn own_file(
    shown: &[ShownFile],
    version: ClaudeVersion,
    section: &crate::input::sources::Section,
) -> PlacedSource {
    if let [file] = shown {
        // The source's own bytes, when they import nothing: the same bytes are read the same
        // way wherever the file is (bytes that are not UTF-8 too: Claude Code reads them as
        // U+FFFD either way).
        let original = String::from_utf8_lossy(&section.text);
        let same = crate::loader::content::parse_as(&original, version).is_ok_and(|parsed| {
            parsed.imports.is_empty() && js_trim(&parsed.body) == js_trim(&file.body)
        });
        if same {
            return PlacedSource {
                text: original.into_owned(),
                expected: vec![js_trim(&file.body).to_owned()],
                original: true,
                sealed: false,
            };
        }
        let body = js_trim(&neutralise(js_trim(&file.body))).to_owned();
        let reads_back = crate::loader::content::parse_as(&body, version)
            .is_ok_and(|parsed| js_trim(&parsed.body) == body && parsed.imports.is_empty());
        if reads_back {
            return PlacedSource {
                text: format!("{body}\n"),
                expected: vec![body],
                original: false,
                sealed: false,
            };
        }
    }
    let out = delivered(shown, version);
    PlacedSource {
        text: format!(
            "<!-- clawmd section {}: from {} -->\n{}",
            crate::safe_name::display_name(section.id.as_str()),
            crate::safe_name::display_name(&section.origin),
            out.text
        ),
        expected: out.expected,
        original: false,
        sealed: false,
    }
}

/// Shares one tree between the sections and plans that use it.
pub type SharedTree = Arc<SourceTree>;

/// What [`prepare`] made of the sections of one run (or of a `clawmd serve`, which keeps its
/// sources between spawns), so that each is composed once per release and form for every
/// group that includes it: the shared sources read from `container/` (with a [`SourceTree`])
/// and the text a group's config gives (an MCP server's instructions, which most groups keep
/// from one spawn to the next). [`prepare`] is a pure function of the section's text, tree,
/// name, origin and link, which a use checks against what it was made from.
#[derive(Default)]
pub struct Prepared(std::sync::Mutex<Kept>);

/// The most sections a [`Prepared`] keeps (a deployment has tens of shared sources, and a few
/// group files and config texts per group: about five thousand for nanoclaw's 2,000 groups,
/// whose persona and MCP instructions each make one); when full it starts afresh.
const MAX_PREPARED: usize = 16384;

/// The most bytes of text a [`Prepared`] keeps (what each section was made from and what it
/// became); when full it starts afresh. A group's file or config text is the agent's or the
/// runner's to make large: memory stays bounded whatever they hold.
const MAX_KEPT_BYTES: usize = 64 << 20;

/// A section larger than this is made every time, not kept.
const MAX_KEPT_SECTION_BYTES: usize = 1 << 20;

/// What a [`Prepared`] holds: each section as made, by name and a hash of its text, release
/// and form, and the bytes of text that holds.
#[derive(Default)]
struct Kept {
    made: std::collections::HashMap<(String, ClaudeVersion, SectionForm), Arc<Made>>,
    bytes: usize,
}

impl Kept {
    /// Keeps `made` under `key`, within [`MAX_PREPARED`] and [`MAX_KEPT_BYTES`] (starting
    /// afresh when it would go over them); a section over [`MAX_KEPT_SECTION_BYTES`] is not
    /// kept.
    fn keep(&mut self, key: (String, ClaudeVersion, SectionForm), made: Arc<Made>) {
        let bytes = made.bytes();
        if bytes > MAX_KEPT_SECTION_BYTES {
            return;
        }
        if let Some(old) = self.made.remove(&key) {
            self.bytes -= old.bytes();
        }
        if self.made.len() >= MAX_PREPARED || self.bytes + bytes > MAX_KEPT_BYTES {
            self.made.clear();
            self.bytes = 0;
        }
        self.bytes += bytes;
        self.made.insert(key, made);
    }
}

/// One section as [`prepare`] made it, with what it was made from.
struct Made {
    from: (Vec<u8>, Option<SharedTree>, String, Option<PathBuf>),
    text: Vec<u8>,
    expected: Vec<String>,
    size: u64,
    sealed: bool,
}

impl Made {
    /// The bytes of text it holds (what it was made from, what it became, what must be found).
    fn bytes(&self) -> usize {
        self.from.0.len() + self.text.len() + self.expected.iter().map(String::len).sum::<usize>()
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prepared")
    }
}

/// A run's memo is not part of what the sources are: a copy starts empty, and any two are
/// equal.
impl Clone for Prepared {
    fn clone(&self) -> Self {
        Prepared::default()
    }
}

impl PartialEq for Prepared {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Prepared {}

/// A hash of a section's text, to tell texts under one name apart in [`Prepared`]'s keys (not
/// to vouch for one: that is the whole text compared).
fn text_hash(text: &[u8]) -> u64 {
    crate::quick_hash::quick_hash(text)
}

impl Prepared {
    /// [`prepare`], once per section: `section` becomes what it made.
    pub fn prepare(
        &self,
        section: &mut crate::input::sources::Section,
        version: ClaudeVersion,
        form: SectionForm,
    ) {
        if section.text.len() > MAX_KEPT_SECTION_BYTES {
            return prepare(section, version, form); // never kept ([`Kept::keep`])
        }
        let tree = section.tree.clone();
        // A hash of the text is part of the key: a shared source with a memory note has one
        // text per backend, and every group has its own persona and MCP instructions under
        // the same names (`persona`, `mcp:srv0`); a use still checks the whole text (`same`).
        let key = (
            format!("{}\0{:x}", section.id.as_str(), text_hash(&section.text)),
            version,
            form,
        );
        let known = self.lock().made.get(&key).cloned();
        let same = |made: &Made| {
            made.from.0 == section.text
                && match (&made.from.1, &tree) {
                    (Some(made), Some(tree)) => Arc::ptr_eq(made, tree),
                    (None, None) => true,
                    _ => false,
                }
                && made.from.2 == section.origin
                && made.from.3 == section.link
        };
        if let Some(made) = known.filter(|made| same(made)) {
            section.text = made.text.clone();
            section.expected = made.expected.clone();
            section.size = made.size;
            section.sealed = made.sealed;
            return;
        }
        let from = (
            section.text.clone(),
            tree,
            section.origin.clone(),
            section.link.clone(),
        );
        prepare(section, version, form);
        let made = Arc::new(Made {
            from,
            text: section.text.clone(),
            expected: section.expected.clone(),
            size: section.size,
            sealed: section.sealed,
        });
        self.lock().keep(key, made);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::content::scan_markdown_as;

    const V: ClaudeVersion = ClaudeVersion::new(2, 1, 330);

    /// A memo gives every group what [`prepare`] gives it alone, and makes a section again
    /// when what it was made from differs (another text, tree, release or form): a shared
    /// source's and a config's text (no tree) alike, one name and length with other text too.
    #[test]
    fn texts_of_one_length_under_one_name_are_each_kept() {
        // Every group has a `persona` and an `mcp:srv0`: two groups' texts of one length must
        // not take each other's place.
        let memo = Prepared::default();
        for _ in 0..2 {
            for text in ["persona A\n", "persona B\n"] {
                let mut section = crate::input::sources::Section::builtin(
                    crate::input::sources::SectionId::shared_base(),
                    text.as_bytes(),
                );
                memo.prepare(&mut section, V, SectionForm::Document);
            }
        }
        assert_eq!(memo.lock().made.len(), 2);
    }

    #[test]
    fn prepared_once_is_what_prepare_gives() {
        let memo = Prepared::default();
        let shared = Arc::new(tree(&[
            ("/app/CLAUDE.md", "# Base\n<!-- open\n@./more.md\n"),
            ("/app/more.md", "MORE\n```\n"),
        ]));
        let section = |text: &str, tree: Option<&SharedTree>| {
            let mut section = crate::input::sources::Section::builtin(
                crate::input::sources::SectionId::shared_base(),
                text.as_bytes(),
            );
            section.tree = tree.cloned();
            section
        };
        let other = Arc::new(tree(&[("/app/CLAUDE.md", "OTHER\n")]));
        for form in [
            SectionForm::Document,
            SectionForm::OwnFile,
            SectionForm::Link,
        ] {
            for version in [V, ClaudeVersion::new(2, 0, 77)] {
                for (text, tree) in [
                    ("# Base\n", Some(&shared)),
                    ("# Base\n", Some(&shared)),
                    ("changed\n", Some(&shared)),
                    ("changed\n", Some(&other)),
                    ("changed\n", None),
                    ("changed\n", None),
                    ("@./x.md\n", None),
                    ("<!-- a\n", None),
                    ("changed\n", Some(&other)),
                ] {
                    let mut alone = section(text, tree);
                    prepare(&mut alone, version, form);
                    let mut memoised = section(text, tree);
                    memo.prepare(&mut memoised, version, form);
                    assert_eq!(memoised, alone, "{form:?} {version} {text:?}");
                }
            }
        }
    }

    /// What a memo keeps stays within its bounds of sections and bytes, whatever it is given;
    /// a section too large to keep is not kept, and one kept again is counted once.
    #[test]
    fn prepared_keeps_within_its_bounds() {
        let made = |bytes: usize| {
            Arc::new(Made {
                from: (vec![b'x'; bytes / 2], None, String::new(), None),
                text: vec![b'y'; bytes - bytes / 2],
                expected: Vec::new(),
                size: 0,
                sealed: true,
            })
        };
        let key = |n: usize| (format!("mcp:s{n}\0{n}"), V, SectionForm::Document);
        let mut kept = Kept::default();
        kept.keep(key(0), made(MAX_KEPT_SECTION_BYTES + 1));
        assert!(kept.made.is_empty() && kept.bytes == 0);
        kept.keep(key(1), made(100));
        kept.keep(key(1), made(300));
        assert_eq!((kept.made.len(), kept.bytes), (1, 300));
        for n in 0..200 {
            kept.keep(key(n), made(MAX_KEPT_SECTION_BYTES));
            assert!(kept.bytes <= MAX_KEPT_BYTES, "{n}: {}", kept.bytes);
            let counted: usize = kept.made.values().map(|m| m.bytes()).sum();
            assert_eq!(counted, kept.bytes);
        }
        let mut kept = Kept::default();
        for n in 0..MAX_PREPARED + 10 {
            kept.keep(key(n), made(10));
            assert!(kept.made.len() <= MAX_PREPARED);
        }
        assert!(kept.made.contains_key(&key(MAX_PREPARED + 9)));
    }

    fn tree(files: &[(&str, &str)]) -> SourceTree {
        let mut snapshot = Snapshot::new();
        for (path, text) in files {
            snapshot.file(Path::new(path), text.as_bytes().to_vec());
        }
        let (root, text) = files[0];
        SourceTree::gather(&snapshot, Path::new(root), text.as_bytes().to_vec())
    }

    fn bodies(tree: &SourceTree) -> Vec<String> {
        tree.shown(V).0.into_iter().map(|f| f.body).collect()
    }

    #[test]
    fn frontmatter_and_comments_are_the_files_own() {
        let t = tree(&[(
            "/app/skills/a/instructions.md",
            "---\ndescription: x\n---\n<!-- c -->\nDo this.\n",
        )]);
        assert_eq!(bodies(&t), ["Do this."]);
        let t = tree(&[("/app/CLAUDE.md", "\u{feff}---\na: 1\n---\nB\n")]);
        assert_eq!(bodies(&t), ["B"]);
        assert_eq!(
            t.shown(ClaudeVersion::new(2, 1, 238)).0[0].body,
            "---\na: 1\n---\nB",
            "before 2.1.239 frontmatter after a BOM stays (and JS trim drops the BOM)"
        );
    }

    #[test]
    fn imports_follow_the_depth_limit_from_the_sources_folder() {
        let mut files = vec![("/app/CLAUDE.md".to_owned(), "BASE @./l1.md\n".to_owned())];
        for n in 1..=7 {
            files.push((format!("/app/l{n}.md"), format!("L{n} @./l{}.md\n", n + 1)));
        }
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let shown = bodies(&tree(&files));
        assert_eq!(shown.len(), MAX_IMPORT_DEPTH, "{shown:?}");
        assert!(shown[4].starts_with("L4"));
    }

    #[test]
    fn what_a_source_leaves_open_is_closed_after_it() {
        for text in [
            "a\n```\n<!-- inside -->",
            "a\n~~~~\nx",
            "a\n<pre>\nopen",
            "  ```python\ncode",
        ] {
            let (read, closed, was_closed) = close_open(text, V);
            assert!(was_closed, "{text:?}");
            assert_eq!(read, text);
            assert_ne!(closed, text);
            assert!(closed.starts_with(text));
            let doc = format!("{closed}\n\n<!-- marker -->\nnext\n");
            let scan = scan_markdown_as(&doc, V).unwrap();
            assert!(!scan.body.contains("marker"), "{text:?}: {}", scan.body);
            assert!(scan.body.contains(text), "{text:?}");
        }
        let plain = "plain\n\n- list";
        assert_eq!(
            close_open(plain, V),
            (plain.to_owned(), plain.to_owned(), true)
        );
        // An unclosed comment is text in a file of its own: closing it would hide it.
        let open = "a\n\n<!-- left open";
        let (read, closed, was_closed) = close_open(open, V);
        assert!(was_closed);
        assert_eq!(read, "a\n\n<\u{200B}!-- left open");
        let doc = format!("{closed}\n\n<!-- marker -->\nnext\n");
        let body = scan_markdown_as(&doc, V).unwrap().body;
        assert!(body.contains(&read) && !body.contains("marker"), "{body}");
    }

    #[test]
    fn delivered_text_imports_nothing_and_holds_every_file() {
        let t = tree(&[
            ("/app/CLAUDE.md", "---\nx: 1\n---\nBASE @./more.md\r\n```\n"),
            ("/app/more.md", "MORE <!-- keep -->\n"),
        ]);
        let (shown, _) = t.shown(V);
        let out = delivered(&shown, V);
        let scan = scan_markdown_as(&out.text, V).unwrap();
        assert!(scan.imports.is_empty(), "{}", out.text);
        for part in &out.expected {
            assert!(
                scan.body.contains(part.as_str()),
                "{part:?} in {}",
                scan.body
            );
        }
        assert!(!out.text.contains("x: 1"));
    }
}
