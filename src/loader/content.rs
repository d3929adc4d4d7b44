//! What Claude Code makes of one memory file's text: frontmatter, HTML comments, imports.
//!
//! This is the pure, I/O-free half of loading a file (JS `Pht`, `HZr`, `qc`, `GZr`): the
//! loader reads bytes, this module turns them into the body Claude Code shows and the list of
//! `@path` imports it will follow. It is public so that other tools (for example `check`
//! scanning inline MCP instructions for `@path`) see text exactly as Claude Code does.

use crate::loader::markdown::{self, Place};

/// The result of reading one file's text the way Claude Code does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFile {
    /// The body as Claude Code keeps it: frontmatter removed, whole-block HTML comments
    /// stripped (line endings are normalised to `\n` only when a comment was present).
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
/// use clawmd::loader::content::parse;
///
/// let file = parse("---\npaths: src/**/*.rs\n---\n<!-- note -->\nSee @docs/a.md and `@b.md`.\n").unwrap();
/// assert_eq!(file.body, "See @docs/a.md and `@b.md`.\n");
/// assert_eq!(file.imports, vec!["docs/a.md"]);
/// assert_eq!(file.paths, Some(vec!["src/**/*.rs".to_string()]));
/// ```
pub fn parse(text: &str) -> Result<ParsedFile, ParseError> {
    parse_within(text, &crate::loader::Budgets::default())
}

/// [`parse`] with the glob budgets of `budgets` (`glob_patterns`, `glob_bytes`) instead of
/// the defaults: `paths:` brace expansion stops there (see [`ParsedFile::paths_truncated`]).
pub fn parse_within(
    text: &str,
    budgets: &crate::loader::Budgets,
) -> Result<ParsedFile, ParseError> {
    let (body, yaml) = split_frontmatter(text);
    let (paths, paths_truncated) = match yaml {
        Some(yaml) => frontmatter_paths(yaml, budgets.glob_patterns, budgets.glob_bytes),
        None => (None, false),
    };
    let scan = scan_markdown(body)?;
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
/// use clawmd::loader::content::scan_markdown;
///
/// let scan = scan_markdown("a @x.md, b\n```\n@y.md\n```\n").unwrap();
/// assert_eq!(scan.imports, vec!["x.md,"]); // punctuation is part of the path
/// ```
pub fn scan_markdown(text: &str) -> Result<MarkdownScan, ParseError> {
    if !text.contains("<!--") && !text.contains('@') {
        return Ok(MarkdownScan {
            body: text.to_string(),
            imports: Vec::new(),
            ignored: Vec::new(),
        });
    }
    match scan_with_limit(text, SHALLOW_NESTING) {
        Ok(scan) => Ok(scan),
        Err(markdown::TooDeep) => scan_deep(text),
    }
}

/// Parse on a thread with a large stack, allowing Claude Code's full nesting.
fn scan_deep(text: &str) -> Result<MarkdownScan, ParseError> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("clawmd-deep-markdown".into())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(scope, || scan_with_limit(text, 1.0));
        match worker.map(|h| h.join()) {
            Ok(Ok(Ok(scan))) => Ok(scan),
            _ => Err(ParseError::TooDeep),
        }
    })
}

/// Lex, strip and walk; the token tree is dropped here, on the thread that built it.
fn scan_with_limit(text: &str, limit: f64) -> Result<MarkdownScan, markdown::TooDeep> {
    let tokens = markdown::lex(text, limit)?;
    let body = if text.contains("<!--") {
        markdown::strip_comments(&tokens)
    } else {
        text.to_string()
    };
    let mut imports: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut ignored = Vec::new();
    for (place, capture) in markdown::import_mentions(&tokens) {
        let Some(path) = import_path(&capture) else {
            continue;
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
            Place::Comment => ignored.push(IgnoredMention {
                text: path,
                reason: IgnoredReason::InComment,
            }),
        }
    }
    Ok(MarkdownScan {
        body,
        imports,
        ignored,
    })
}

/// JS: the filter in `GZr` — turn a raw `@` capture into an import path, or reject it.
pub(crate) fn import_path(capture: &str) -> Option<String> {
    let cut = capture.split('#').next().unwrap_or("");
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

/// JS: `O1` — paths Claude Code never opens: UNC-like `//x`, `\\?\`-style prefixes, the
/// `/net` automount root and macOS `/.vol`-style paths.
pub(crate) fn is_special_path(p: &str) -> bool {
    let b = p.as_bytes();
    if b.len() >= 2 && matches!(b[0], b'/' | b'\\') && matches!(b[1], b'/' | b'\\') {
        return true;
    }
    if b.len() >= 4
        && matches!(b[0], b'/' | b'\\')
        && &b[1..3] == b"??"
        && matches!(b[3], b'/' | b'\\')
    {
        return true;
    }
    if !p.starts_with('/') {
        return false;
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let first = parts.first().map(|s| s.to_ascii_lowercase());
    let net = matches!(first.as_deref(), Some("net")) && parts.len() <= 2;
    let mac = matches!(
        first.as_deref(),
        Some(".vol" | ".file" | ".nofollow" | ".resolve")
    );
    net || mac
}

/// JS: `rO`/`X6e` — a device or process file Claude Code refuses to read (`/dev/stdin`,
/// `/proc/self/environ`, a path climbing out of `/proc/<pid>` with `..`, …). Plain procfs
/// files such as `/proc/version` are read. Also refused, as observed (case 35), is any path
/// through `/proc/<pid>/root/`.
pub(crate) fn is_device_or_process_file(p: &str) -> bool {
    if p.starts_with('/') && p.contains("/..") {
        let mut stack: Vec<&str> = Vec::new();
        for seg in p.split('/') {
            match seg {
                ".." => {
                    if stack.len() >= 2
                        && (stack[0] == "proc" || (stack[0] == "dev" && stack[1] != "shm"))
                    {
                        return true;
                    }
                    stack.pop();
                }
                "" | "." => {}
                s => stack.push(s),
            }
        }
    }
    let mut o = crate::loader::paths::normalize(std::path::Path::new(p))
        .to_string_lossy()
        .into_owned();
    for round in 0..=8 {
        let under = |root: &str| o == root || o.starts_with(&format!("{root}/"));
        if !under("/proc") && !under("/dev") {
            return false;
        }
        if proc_seg(&o, "root").is_some() || refused_proc_or_dev(&o) {
            return true;
        }
        if round == 8 {
            return true;
        }
        // /proc/<x>/task/<y>/… is /proc/<x>/…
        match proc_seg(&o, "task") {
            Some((pid, rest)) if rest.contains('/') => {
                let after = &rest[rest.find('/').unwrap_or(rest.len())..];
                o = format!("/proc/{pid}{after}");
            }
            _ => return false,
        }
    }
    true
}

/// `/proc/<pid>/<name>/<rest>` → `(pid, rest)`.
fn proc_seg<'a>(o: &'a str, name: &str) -> Option<(&'a str, &'a str)> {
    let rest = o.strip_prefix("/proc/")?;
    let (pid, rest) = rest.split_once('/')?;
    let rest = rest.strip_prefix(name)?.strip_prefix('/')?;
    Some((pid, rest))
}

/// The fixed lists and shapes of JS `rO` (`Jz`, `eO`, `nO`, `tO`, `sO` and the per-process
/// files).
fn refused_proc_or_dev(o: &str) -> bool {
    const FILES: &[&str] = &[
        "/dev/zero",
        "/dev/random",
        "/dev/urandom",
        "/dev/full",
        "/dev/hwrng",
        "/dev/stdin",
        "/dev/tty",
        "/dev/console",
        "/proc/kmsg",
        "/dev/kmsg",
        "/proc/kcore",
        "/proc/vmcore",
        "/dev/core",
        "/dev/mem",
        "/dev/kmem",
        "/dev/port",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/fd/0",
        "/dev/fd/1",
        "/dev/fd/2",
    ];
    const PER_PROCESS: &[&str] = &[
        "environ",
        "cmdline",
        "auxv",
        "maps",
        "smaps",
        "smaps_rollup",
        "numa_maps",
        "pagemap",
        "mem",
        "stat",
        "statm",
        "status",
        "syscall",
        "stack",
    ];
    if FILES.contains(&o) {
        return true;
    }
    let segs: Vec<&str> = o.split('/').skip(1).collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match segs.as_slice() {
        // eO: a /proc cwd or fd link, or /dev/fd/N or /dev/std*, used as a folder
        ["proc", _, "cwd", _, ..] => true,
        ["proc", _, "fd", n, _, ..] | ["dev", "fd", n, _, ..] if digits(n) => true,
        ["dev", "stdin" | "stdout" | "stderr", _, ..] => true,
        // nO: terminals
        ["dev", "pts", n] if digits(n) || *n == "ptmx" => true,
        ["dev", "ptmx"] => true,
        ["dev", t] if t.starts_with("tty") => true,
        // tO: map_files
        ["proc", _, "map_files", ..] => true,
        // sO and the standard streams of any process
        ["proc", _, "fd", n] if digits(n) => true,
        ["proc", _, f] if PER_PROCESS.contains(f) => true,
        _ => false,
    }
}

/// JS: `qc` + `HZr` — strip a leading `---` block and read its `paths:`.
///
/// The block is matched like Claude Code's `/^---\s*\n([\s\S]*?)---\s*\n?/` on the text
/// without a leading BOM: the closing `---` need not start a line, and the whitespace after
/// it (blank lines, the next line's indentation) goes with it.
fn split_frontmatter(text: &str) -> (&str, Option<&str>) {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    // JS checks `indexOf("---", 3)` first; the regex needs a leading `---` anyway.
    let Some(after_open) = t.strip_prefix("---") else {
        return (text, None);
    };
    if !after_open.contains("---") {
        return (text, None);
    }
    let ws = after_open.len() - after_open.trim_start_matches(markdown::is_js_space).len();
    // `\s*\n`: greedy whitespace that must end with a newline (backtracking to the last one).
    let Some(nl) = after_open[..ws].rfind('\n') else {
        return (text, None);
    };
    let inner_start = 3 + nl + 1;
    let Some(close) = t[inner_start..].find("---") else {
        return (text, None);
    };
    let yaml = &t[inner_start..inner_start + close];
    let mut end = inner_start + close + 3;
    let rest = &t[end..];
    let ws = rest.len() - rest.trim_start_matches(markdown::is_js_space).len();
    end += ws;
    // `\n?` after a greedy `\s*` never adds anything: `\s` already took every newline.
    (&t[end..], Some(yaml))
}

/// The `paths:` entry of a frontmatter block, expanded as Claude Code does (`Cxn`): a string
/// splits on top-level commas, `{a,b}` braces expand, a trailing `/**` is dropped; none left,
/// or only `**`, means unconditional.
///
/// Expansion stops at `max_patterns` globs or `max_bytes` of glob text (the second value is
/// then `true`); the globs beyond are only looked at to decide whether the file is
/// conditional, so a hostile brace bomb costs linear time and bounded memory.
fn frontmatter_paths(
    yaml: &str,
    max_patterns: usize,
    max_bytes: usize,
) -> (Option<Vec<String>>, bool) {
    let Some(value) = yaml_key(yaml, "paths") else {
        return (None, false);
    };
    let mut globs: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    let mut truncated = false;
    let mut conditional_beyond = false;
    for glob in value.iter().flat_map(|v| split_globs(v)) {
        if !truncated {
            let budget = Budget {
                patterns: max_patterns.saturating_sub(globs.len()),
                bytes: max_bytes.saturating_sub(bytes),
            };
            let (expanded, cut) = expand_braces(glob, budget);
            for g in expanded {
                let g = g.strip_suffix("/**").map(str::to_string).unwrap_or(g);
                if !g.is_empty() {
                    bytes += g.len();
                    globs.push(g);
                }
            }
            truncated = cut;
            if !cut {
                continue;
            }
        }
        // Beyond the budget: is this glob anything but `**` (or empty)?
        let g = glob.strip_suffix("/**").unwrap_or(glob);
        conditional_beyond |= !g.is_empty() && g != "**";
    }
    if !conditional_beyond && (globs.is_empty() || globs.iter().all(|g| g == "**")) {
        return (None, truncated);
    }
    (Some(globs), truncated)
}

/// A small YAML reader for one top-level key whose value is a scalar, a flow sequence or a
/// block sequence of scalars. Anything else reads as absent (Claude Code's YAML parser
/// would then ignore the key too, or fail and ignore the whole block).
fn yaml_key(yaml: &str, key: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = yaml.lines().collect();
    let idx = lines.iter().position(|l| {
        l.strip_prefix(key)
            .is_some_and(|r| r.trim_start_matches([' ', '\t']).starts_with(':'))
    })?;
    let after = lines[idx][key.len()..].trim_start_matches([' ', '\t']);
    let value = strip_comment(after[1..].trim());
    if !value.is_empty() {
        if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            return Some(
                inner
                    .split(',')
                    .map(unquote)
                    .filter(|s| !s.is_empty())
                    .collect(),
            );
        }
        return Some(vec![unquote(value)]);
    }
    let mut items = Vec::new();
    for line in &lines[idx + 1..] {
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        match t.strip_prefix('-') {
            Some(item) if line.starts_with([' ', '\t', '-']) => {
                items.push(unquote(strip_comment(item.trim())))
            }
            _ => break,
        }
    }
    Some(items)
}

fn strip_comment(v: &str) -> &str {
    if v.starts_with(['"', '\'']) {
        return v;
    }
    match v.find(" #") {
        Some(i) => v[..i].trim_end(),
        None => v,
    }
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner.to_string();
        }
    }
    v.to_string()
}

/// JS: `Us` on a string — split on commas outside braces, trim, drop empties.
fn split_globs(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                let t = s[start..i].trim();
                if !t.is_empty() {
                    out.push(t);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    let t = s[start..].trim();
    if !t.is_empty() {
        out.push(t);
    }
    out
}

/// What one brace expansion may still produce.
#[derive(Clone, Copy)]
struct Budget {
    patterns: usize,
    bytes: usize,
}

/// Expand `{a,b}` alternatives (first group first, recursively), capped like Claude Code at
/// 1,000 results, and within `budget`: when the strings pending or produced would pass it,
/// expansion stops and the second value is `true`.
fn expand_braces(g: &str, budget: Budget) -> (Vec<String>, bool) {
    const LIMIT: usize = 1000;
    let mut out: Vec<String> = Vec::new();
    let mut out_bytes = 0usize;
    if g.len() > budget.bytes || budget.patterns == 0 {
        return (out, true);
    }
    let mut work = vec![g.to_string()];
    let mut work_bytes = g.len();
    while let Some(s) = work.pop() {
        work_bytes -= s.len();
        if out.len() + work.len() >= LIMIT {
            out_bytes += s.len();
            out.push(s);
            continue;
        }
        let Some((open, close)) = brace_group(&s) else {
            out_bytes += s.len();
            out.push(s);
            continue;
        };
        let (head, body, tail) = (&s[..open], &s[open + 1..close], &s[close + 1..]);
        let alts = split_top(body);
        if alts.len() < 2 {
            out_bytes += s.len();
            out.push(s);
            continue;
        }
        let grown: usize = alts.iter().map(|a| head.len() + a.len() + tail.len()).sum();
        if out_bytes + work_bytes + grown > budget.bytes
            || out.len() + work.len() + alts.len() > budget.patterns
        {
            return (out, true);
        }
        for alt in alts.iter().rev() {
            work_bytes += head.len() + alt.len() + tail.len();
            work.push(format!("{head}{alt}{tail}"));
        }
    }
    if out.len() > budget.patterns || out_bytes > budget.bytes {
        out.truncate(budget.patterns);
        return (out, true);
    }
    (out, false)
}

fn brace_group(s: &str) -> Option<(usize, usize)> {
    let open = s.find('{')?;
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((open, open + i));
                }
            }
            _ => {}
        }
    }
    None
}

fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

#[cfg(test)]
mod tests {
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
    fn paths_forms() {
        let paths = |yaml: &str| frontmatter_paths(yaml, 10_000, 1 << 20).0;
        assert_eq!(
            paths("paths: \"a/**, {b,c}.ts\"\n"),
            Some(vec!["a".into(), "b.ts".into(), "c.ts".into()])
        );
        assert_eq!(
            paths("paths:\n  - x/*.md\n  - '**'\n"),
            Some(vec!["x/*.md".into(), "**".into()])
        );
        assert_eq!(paths("paths: [\"**\"]\n"), None);
        assert_eq!(paths("title: x\n"), None);
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
    }
}
