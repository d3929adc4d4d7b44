//! What Claude Code makes of one memory file's text: frontmatter, HTML comments, imports.
//!
//! This is the pure, I/O-free half of loading a file (JS `Pht`, `HZr`, `qc`, `GZr`): the
//! loader reads bytes, this module turns them into the body Claude Code shows and the list of
//! `@path` imports it will follow. It is public so that other tools (for example `check`
//! scanning inline MCP instructions for `@path`) see text exactly as Claude Code does.

/// The raw `@` captures of a text as Claude Code's import regex finds them
/// (`/(?:^|\s)@((?:[^\s\\]|\\ )+)/g`), and JavaScript's `trim`: for tools that scan text the
/// way the loader does, outside a memory file (an inline section, a shared source).
pub use crate::markdown::{at_mentions, js_trim};

mod pieces;

use crate::frontmatter;
use crate::markdown::{self, Place};
use crate::path_policy::is_special_path;
use crate::version::{Behaviour, ClaudeVersion};

/// `bytes` as text, each invalid UTF-8 sequence replaced by U+FFFD (what
/// `String::from_utf8_lossy` gives): valid text (nearly every file) is checked with `from_utf8`
/// first, several times faster than the lossy walk, and borrowed.
///
/// ```
/// use clawmd_loader::content::lossy_text;
///
/// assert_eq!(lossy_text(b"caf\xc3\xa9"), "caf\u{e9}");
/// assert_eq!(lossy_text(b"a\xffb"), "a\u{fffd}b");
/// ```
pub fn lossy_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The result of reading one file's text the way Claude Code does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFile {
    /// The body as Claude Code keeps it: frontmatter removed, whole-block HTML comments
    /// stripped (line endings become `\n` only when the text holds `<!--`; since 2.1.330,
    /// only when a comment block was stripped).
    /// Claude Code trims it when rendering.
    pub body: String,
    /// The `paths:` globs of the frontmatter, when it makes the file conditional (a rule with
    /// them is only loaded when Claude reads a matching file, so never at start-up).
    pub paths: Option<Vec<String>>,
    /// Import paths as written (after `#fragment` removal and `\ ` unescaping), deduplicated,
    /// in the order Claude Code follows them. Not yet resolved against a directory.
    pub imports: Vec<String>,
    /// `@path` mentions that are not imports because of where they stand.
    pub ignored: Vec<IgnoredMention>,
    /// The `paths:` globs expand past the glob budgets: `paths` holds only those within them
    /// (the file is still conditional exactly when it would be).
    pub paths_truncated: bool,
}

/// An `@path` mention Claude Code does not follow, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredMention {
    /// The mention as written after the `@`.
    pub text: String,
    /// Why it is not an import.
    pub reason: IgnoredReason,
}

/// Why an `@` mention is not an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IgnoredReason {
    /// Inside a code span, fenced block or indented code block.
    InCode,
    /// Inside an HTML comment.
    InComment,
}

/// The markdown half of [`parse`]: comment stripping and import extraction, no frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownScan {
    /// The text with whole-block HTML comments removed (unchanged when there were none).
    pub body: String,
    /// Import paths in order, deduplicated.
    pub imports: Vec<String>,
    /// Mentions skipped because they are in code or comments.
    pub ignored: Vec<IgnoredMention>,
}

/// Why Claude Code cannot read a file's markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Block quotes, lists or emphasis nested deeper than Claude Code's parser can follow
    /// (its JavaScript stack overflows and the file is dropped).
    #[error("nested deeper than Claude Code's markdown parser can follow, so it drops the file")]
    TooDeep,
}

/// Read `text` (a whole file, already decoded) as Claude Code reads a memory file.
///
/// ```
/// use clawmd_loader::content::parse;
///
/// let file = parse("---\npaths: src/**/*.rs\n---\n<!-- note -->\nSee @docs/a.md and `@b.md`.\n").unwrap();
/// assert_eq!(file.body, "See @docs/a.md and `@b.md`.\n");
/// assert_eq!(file.imports, vec!["docs/a.md"]);
/// assert_eq!(file.paths, Some(vec!["src/**/*.rs".to_string()]));
/// ```
pub fn parse(text: &str) -> Result<ParsedFile, ParseError> {
    parse_within(text, &crate::Budgets::default())
}

/// [`parse`] as Claude Code release `version` reads the file.
pub fn parse_as(text: &str, version: ClaudeVersion) -> Result<ParsedFile, ParseError> {
    parse_as_within(text, version, &crate::Budgets::default())
}

/// [`parse`] with the glob budgets of `budgets` (`glob_patterns`, `glob_bytes`) instead of
/// the defaults: `paths:` brace expansion stops there (see [`ParsedFile::paths_truncated`]).
pub fn parse_within(text: &str, budgets: &crate::Budgets) -> Result<ParsedFile, ParseError> {
    parse_as_within(text, ClaudeVersion::default(), budgets)
}

/// [`parse_as`] within `budgets`.
pub fn parse_as_within(
    text: &str,
    version: ClaudeVersion,
    budgets: &crate::Budgets,
) -> Result<ParsedFile, ParseError> {
    let (
        body,
        frontmatter::Paths {
            paths,
            truncated: paths_truncated,
        },
    ) = frontmatter::split(text, version, budgets);
    let scan = scan_markdown_as(body, version)?;
    Ok(ParsedFile {
        body: scan.body,
        paths,
        imports: scan.imports,
        ignored: scan.ignored,
        paths_truncated,
    })
}

/// Nesting allowed on the caller's thread (about 170 quote or 40 list levels), as a share
/// of what Claude Code's parser allows; deeper text is parsed again on a thread of its own.
const SHALLOW_NESTING: f64 = 0.02;

/// Stack for that thread: enough for the deepest nesting Claude Code accepts. It is virtual
/// memory, touched only as deep as the text actually nests.
const DEEP_STACK_BYTES: usize = 1 << 30;

/// Comment stripping and import extraction on text without frontmatter (JS: `Pht` body).
///
/// ```
/// use clawmd_loader::content::scan_markdown;
///
/// let scan = scan_markdown("a @x.md, b\n```\n@y.md\n```\n").unwrap();
/// assert_eq!(scan.imports, vec!["x.md,"]); // punctuation is part of the path
/// ```
pub fn scan_markdown(text: &str) -> Result<MarkdownScan, ParseError> {
    scan_markdown_as(text, ClaudeVersion::default())
}

/// [`scan_markdown`] as Claude Code release `version` does it.
pub fn scan_markdown_as(text: &str, version: ClaudeVersion) -> Result<MarkdownScan, ParseError> {
    if !text.contains("<!--") && !text.contains('@') {
        return Ok(MarkdownScan {
            body: text.to_string(),
            imports: Vec::new(),
            ignored: Vec::new(),
        });
    }
    if let Some(scan) = recent::get(text, version) {
        return Ok(scan);
    }
    // A text scanned in pieces is not kept whole as well: scanning it again is a lookup of
    // its pieces.
    if let Some(scan) = pieces::scan(text, version) {
        return Ok(scan);
    }
    let scan = match scan_with_limit(text, SHALLOW_NESTING, version) {
        Ok(scan) => scan,
        Err(markdown::TooDeep) => scan_deep(text, version)?,
    };
    recent::put(text, version, &scan);
    Ok(scan)
}

/// The last few scans of texts of a few KiB or more, in this process. One text is often
/// scanned many times in a run: compose verifies every group whose local memory differs by
/// loading the group's generated document, the same for groups of one config; a file imported
/// under several names is parsed for each. A scan is a pure function of the text and the
/// release, so a text found here gets exactly what scanning it again would give (the text is
/// compared whole, not by a hash). What is kept is bounded by [`recent::MAX_KEPT_BYTES`]:
/// large texts (hostile ones) are scanned every time rather than held.
mod recent {
    use std::sync::Mutex;

    use super::{ClaudeVersion, MarkdownScan};

    /// Texts shorter than this are scanned every time (cheaper than keeping them).
    const MIN_TEXT_BYTES: usize = 2048;
    /// The most texts kept.
    const MAX_ENTRIES: usize = 4;
    /// The most bytes kept in all (texts, bodies and imports).
    pub(super) const MAX_KEPT_BYTES: usize = 1 << 20;

    struct Entry {
        version: ClaudeVersion,
        text: String,
        scan: MarkdownScan,
        bytes: usize,
    }

    static RECENT: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    fn lock() -> std::sync::MutexGuard<'static, Vec<Entry>> {
        RECENT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn size(text: &str, scan: &MarkdownScan) -> usize {
        text.len()
            + scan.body.len()
            + scan.imports.iter().map(|i| i.len() + 24).sum::<usize>()
            + scan
                .ignored
                .iter()
                .map(|m| m.text.len() + std::mem::size_of::<super::IgnoredMention>())
                .sum::<usize>()
    }

    pub(super) fn get(text: &str, version: ClaudeVersion) -> Option<MarkdownScan> {
        if text.len() < MIN_TEXT_BYTES || text.len() > MAX_KEPT_BYTES / 2 {
            return None;
        }
        lock()
            .iter()
            .find(|e| e.version == version && e.text == text)
            .map(|e| e.scan.clone())
    }

    pub(super) fn put(text: &str, version: ClaudeVersion, scan: &MarkdownScan) {
        if text.len() < MIN_TEXT_BYTES {
            return;
        }
        let bytes = size(text, scan);
        if bytes > MAX_KEPT_BYTES / 2 {
            return;
        }
        let mut recent = lock();
        if recent
            .iter()
            .any(|e| e.version == version && e.text == text)
        {
            return;
        }
        // The oldest go first.
        while recent.len() >= MAX_ENTRIES
            || recent.iter().map(|e| e.bytes).sum::<usize>() + bytes > MAX_KEPT_BYTES
        {
            recent.remove(0);
        }
        recent.push(Entry {
            version,
            text: text.to_owned(),
            scan: scan.clone(),
            bytes,
        });
    }
}

/// Parse on a thread with a large stack, allowing Claude Code's full nesting.
fn scan_deep(text: &str, version: ClaudeVersion) -> Result<MarkdownScan, ParseError> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("clawmd-deep-markdown".into())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(scope, || scan_with_limit(text, 1.0, version));
        match worker.map(|h| h.join()) {
            Ok(Ok(Ok(scan))) => Ok(scan),
            _ => Err(ParseError::TooDeep),
        }
    })
}

/// Lex, strip and walk; the token tree is dropped here, on the thread that built it.
/// JS `Pht`: the body is rebuilt from the tokens (whose text has CR and CRLF as LF) when the
/// text holds `<!--`; since 2.1.330 only when a comment block was actually removed, and
/// before 2.1.72 (no comment stripping) never.
fn scan_with_limit(
    text: &str,
    limit: f64,
    version: ClaudeVersion,
) -> Result<MarkdownScan, markdown::TooDeep> {
    let tokens = markdown::lex(text, limit)?;
    let body = if strips_comments(text, version) {
        let (stripped, removed_any) = markdown::strip_comments(&tokens);
        if keeps_rebuilt(removed_any, version) {
            stripped
        } else {
            text.to_string()
        }
    } else {
        text.to_string()
    };
    let mentions = markdown::import_mentions(&tokens)?;
    Ok(scan_of(body, mentions, version))
}

/// Whether release `version` rebuilds `text` from its top-level tokens without its comment
/// blocks (JS `Pht`): from 2.1.72, and only for a text holding `<!--`.
fn strips_comments(text: &str, version: ClaudeVersion) -> bool {
    version.has(Behaviour::CommentBlocksStripped) && text.contains("<!--")
}

/// Whether release `version`, having rebuilt a text ([`strips_comments`]), keeps the rebuilt
/// text (its line endings LF) rather than the text itself: since 2.1.330 only when a comment
/// block was removed (`removed_any`).
fn keeps_rebuilt(removed_any: bool, version: ClaudeVersion) -> bool {
    removed_any || !version.has(Behaviour::CrNormalisedOnlyWhenStripped)
}

/// The scan of a text whose body is `body` and whose `@` mentions are `mentions` (in order,
/// where each was found): the imports, deduplicated, and the mentions passed over.
fn scan_of(body: String, mentions: Vec<(Place, String)>, version: ClaudeVersion) -> MarkdownScan {
    let mut imports: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut ignored = Vec::new();
    for (place, capture) in mentions {
        let Some(path) = import_path_as(&capture, version) else {
            continue;
        };
        // Text after a comment block's comments is searched since 2.1.72 (bisected).
        let place = match place {
            Place::CommentBlockText if version.has(Behaviour::CommentBlockTextSearched) => {
                Place::Text
            }
            Place::CommentBlockText => Place::Comment,
            other => other,
        };
        match place {
            Place::Text => {
                if seen.insert(path.clone()) {
                    imports.push(path);
                }
            }
            Place::Code => ignored.push(IgnoredMention {
                text: path,
                reason: IgnoredReason::InCode,
            }),
            Place::Comment | Place::CommentBlockText => ignored.push(IgnoredMention {
                text: path,
                reason: IgnoredReason::InComment,
            }),
        }
    }
    MarkdownScan {
        body,
        imports,
        ignored,
    }
}

/// JS: the filter in `GZr` — turn a raw `@` capture ([`at_mentions`]) into an import path,
/// or reject it, as the default release does.
pub fn import_path(capture: &str) -> Option<String> {
    import_path_as(capture, ClaudeVersion::default())
}

/// [`import_path`] as release `version` does it: the `#…` cut came in 2.1.41.
pub fn import_path_as(capture: &str, version: ClaudeVersion) -> Option<String> {
    let cut = if version.has(Behaviour::ImportFragmentCut) {
        capture.split('#').next().unwrap_or("")
    } else {
        capture
    };
    if cut.is_empty() {
        return None;
    }
    let path = cut.replace("\\ ", " ");
    if path.is_empty() || is_special_path(&path) {
        return None;
    }
    let first = path.as_bytes()[0];
    let ok = path.starts_with("./")
        || path.starts_with("~/")
        || (path.starts_with('/') && path != "/")
        || (first.is_ascii_alphanumeric() || matches!(first, b'.' | b'_' | b'-'));
    ok.then_some(path)
}

#[cfg(test)]
mod tests {
    /// A text scanned again (kept by `recent`) gets what scanning it the first time gave, and
    /// a text that differs by one byte, or a different release, is scanned for itself.
    #[test]
    fn a_kept_scan_is_the_scan_of_that_very_text() {
        let mut text = String::new();
        for n in 0..200 {
            text.push_str(&format!(
                "line {n} @./f{n}.md <!-- c -->\n`@./code{n}.md`\n"
            ));
        }
        let first = scan_markdown(&text).unwrap();
        assert_eq!(scan_markdown(&text).unwrap(), first);
        let other = text.replacen("@./f7.md", "@./g7.md", 1);
        let scanned = scan_markdown(&other).unwrap();
        assert!(scanned.imports.contains(&"./g7.md".to_owned()));
        assert!(!scanned.imports.contains(&"./f7.md".to_owned()));
        assert_eq!(scan_markdown(&text).unwrap(), first);
        let old = ClaudeVersion::new(2, 0, 77);
        assert_eq!(
            scan_markdown_as(&text, old).unwrap(),
            scan_with_limit(&text, 1.0, old).unwrap()
        );
        assert_eq!(
            first,
            scan_with_limit(&text, 1.0, ClaudeVersion::default()).unwrap()
        );
    }

    use super::*;

    #[test]
    fn frontmatter_is_stripped_with_following_whitespace() {
        let f = parse("---\ntitle: x\n---\n\n  body\n").unwrap();
        assert_eq!(f.body, "body\n");
        assert_eq!(f.paths, None);
    }

    #[test]
    fn frontmatter_needs_a_newline_after_the_opener() {
        assert_eq!(parse("--- x\n---\nbody").unwrap().body, "--- x\n---\nbody");
    }

    #[test]
    fn bom_before_frontmatter() {
        assert_eq!(parse("\u{feff}---\na: 1\n---\nB").unwrap().body, "B");
        assert_eq!(parse("\u{feff}B").unwrap().body, "\u{feff}B");
    }

    #[test]
    fn line_endings_follow_the_release() {
        let v328 = ClaudeVersion::new(2, 1, 328);
        let v330 = ClaudeVersion::new(2, 1, 330);
        let body = |t: &str, v| parse_as(t, v).unwrap().body;
        // No `<!--`: kept as is (case 37).
        assert_eq!(body("a\r\nb\rc", v328), "a\r\nb\rc");
        // `<!--` in a code span: 2.1.328 normalises, 2.1.330 does not (case 38).
        assert_eq!(body("a\r\n`<!--`\r\n", v328), "a\n`<!--`\n");
        assert_eq!(body("a\r\n`<!--`\r\n", v330), "a\r\n`<!--`\r\n");
        // A comment block stripped: both normalise (case 39).
        assert_eq!(body("a\r\n<!-- c -->\r\nb\r\n", v330), "a\nb\n");
        // Before comment stripping (2.1.72) nothing changes.
        let old = ClaudeVersion::new(2, 1, 71);
        assert_eq!(body("a\r\n<!-- c -->\r\n", old), "a\r\n<!-- c -->\r\n");
    }

    #[test]
    fn import_filter() {
        assert_eq!(import_path("a.md#sec").as_deref(), Some("a.md"));
        assert_eq!(import_path("#x"), None);
        assert_eq!(import_path("/"), None);
        assert_eq!(import_path("(x)"), None);
        assert_eq!(import_path("~"), None);
        assert_eq!(import_path("//host/share"), None);
        assert_eq!(import_path("/net/host"), None);
        assert_eq!(import_path("a\\ b.md").as_deref(), Some("a b.md"));
        let before = ClaudeVersion::new(2, 1, 40);
        assert_eq!(import_path_as("a.md#s", before).as_deref(), Some("a.md#s"));
    }
}
