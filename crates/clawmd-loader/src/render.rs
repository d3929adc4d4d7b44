//! Turning a loaded [`Memory`] into text for an agent.
//!
//! Three shapes, because agents differ: Claude Code's own `<system-reminder>` block
//! (byte-identical to the real binary), a flat markdown file with every import inlined (for
//! agents that do not follow `@imports`: Codex, Gemini, opencode) and a JSON list of chat
//! messages (the memory as one user message, for SDK-style loaders). See `docs/loader.md`.

use super::markdown::js_trim;
use super::model::{LoadedFile, Memory};
use super::version::Behaviour;

/// What releases before 2.1.268 put between `<system-reminder>` and the preamble.
const OLD_WRAPPER_HEAD: &str =
    "As you answer the user's questions, you can use the following context:\n# claudeMd\n";

/// … and after the last section (`{date}` is the session's date).
const OLD_WRAPPER_TAIL: &str = "\n# currentDate\nToday's date is {date}.\n\n      IMPORTANT: this context may or may not be relevant to your tasks. You should not respond to this context unless it is highly relevant to your task.\n";

/// … and, in releases without the date in the context, after the last section.
const OLD_WRAPPER_END: &str = "\n\n      IMPORTANT: this context may or may not be relevant to your tasks. You should not respond to this context unless it is highly relevant to your task.\n";

/// Claude Code's fixed preamble.
pub const PREAMBLE: &str = "Codebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly as written.";

/// Output formats of [`render`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Claude Code's `<system-reminder>` block followed by a newline, exactly as
    /// `claude-view` prints it; empty when no memory file loads.
    #[default]
    Claude,
    /// One markdown document, imports inlined after the line that imports them.
    Flat,
    /// A JSON array of chat messages: `[{"role":"user","content":"<system-reminder>…"}]`,
    /// or `[]`.
    Messages,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "claude" => Ok(Format::Claude),
            "flat" => Ok(Format::Flat),
            "messages" => Ok(Format::Messages),
            other => Err(format!(
                "unknown format {other:?} (expected claude, flat or messages)"
            )),
        }
    }
}

/// Render `memory` in `format`.
///
/// ```
/// use clawmd_loader::{render, Format, LoadOptions, Memory};
///
/// let empty = Memory {
///     cwd: "/w".into(),
///     external_imports_approved: false,
///     files: vec![],
///     diagnostics: vec![],
///     claude_version: Default::default(),
///     current_date: "2026-01-01".into(),
///     settings: Default::default(),
/// };
/// assert_eq!(render(&empty, Format::Claude), "");
/// assert_eq!(render(&empty, Format::Messages), "[]\n");
/// ```
pub fn render(memory: &Memory, format: Format) -> String {
    match format {
        // As `claude-view` prints the text part: a newline added unless it ends with one.
        Format::Claude => claude_block(memory)
            .map(|b| if b.ends_with('\n') { b } else { b + "\n" })
            .unwrap_or_default(),
        Format::Flat => flat(memory),
        Format::Messages => messages(memory),
    }
}

/// The exact text part Claude Code puts first in the first user message, or `None` when it
/// sends no memory at all.
pub fn claude_block(memory: &Memory) -> Option<String> {
    if memory.files.is_empty() {
        return None;
    }
    let sections: Vec<String> = memory
        .files
        .iter()
        .map(|f| {
            // Bodies are trimmed since 2.1.79.
            let body = if memory.claude_version.has(Behaviour::BodiesTrimmed) {
                js_trim(&f.body)
            } else {
                &f.body
            };
            // The release's own label (before 2.1.136 the managed file has the user's).
            let label = memory.label_of(f);
            format!("Contents of {} ({label}):\n\n{body}", f.path.display())
        })
        .collect();
    if !memory.claude_version.has(Behaviour::CurrentDateInContext) {
        return Some(format!(
            "<system-reminder>\n{OLD_WRAPPER_HEAD}{PREAMBLE}\n\n{}{OLD_WRAPPER_END}</system-reminder>",
            sections.join("\n\n")
        ));
    }
    if !memory.claude_version.has(Behaviour::SystemReminderWrapper) {
        let tail = OLD_WRAPPER_TAIL.replace("{date}", &memory.current_date);
        return Some(format!(
            "<system-reminder>\n{OLD_WRAPPER_HEAD}{PREAMBLE}\n\n{}{tail}</system-reminder>\n\n",
            sections.join("\n\n")
        ));
    }
    Some(format!(
        "<system-reminder>\n{PREAMBLE}\n\n{}\n</system-reminder>",
        sections.join("\n\n")
    ))
}

fn messages(memory: &Memory) -> String {
    let list: Vec<serde_json::Value> = claude_block(memory)
        .into_iter()
        .map(|content| serde_json::json!({ "role": "user", "content": content }))
        .collect();
    let mut s = serde_json::to_string_pretty(&list).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}

fn flat(memory: &Memory) -> String {
    if memory.files.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<!-- Claude Code memory for {}, flattened by clawmd: {} files, imports inlined. Generated; do not edit. -->\n",
        memory.cwd.display(),
        memory.files.len()
    );
    for (i, f) in memory.files.iter().enumerate() {
        if f.depth > 0
            && memory.files[..i]
                .iter()
                .any(|g| Some(&g.path) == f.parent.as_ref())
        {
            continue; // inlined into its importer
        }
        out.push_str(&format!(
            "\n<!-- {} ({}) -->\n",
            f.path.display(),
            memory.label_of(f)
        ));
        out.push_str(&flatten_file(memory, i));
        out.push('\n');
    }
    out
}

/// A file's trimmed body with its imports expanded after the line of their first mention.
fn flatten_file(memory: &Memory, index: usize) -> String {
    let file = &memory.files[index];
    let body = js_trim(&file.body);
    let children: Vec<usize> = memory
        .files
        .iter()
        .enumerate()
        .skip(index + 1)
        .filter(|(_, g)| {
            g.depth == file.depth + 1 && g.parent.as_deref() == Some(file.path.as_path())
        })
        .map(|(j, _)| j)
        .collect();
    if children.is_empty() {
        return body.to_string();
    }
    let lines: Vec<&str> = body.split('\n').collect();
    let mut after_line: Vec<Vec<usize>> = vec![Vec::new(); lines.len()];
    let mut cursor = 0;
    for &c in &children {
        let written = memory.files[c].import.as_deref().unwrap_or("");
        let at = find_mention(&lines, written, cursor)
            .or_else(|| find_mention(&lines, written, 0))
            .unwrap_or(lines.len() - 1);
        cursor = at;
        after_line[at].push(c);
    }
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        out.push_str(line);
        for &c in &after_line[n] {
            out.push_str(&inlined(memory, c));
        }
    }
    out
}

fn inlined(memory: &Memory, index: usize) -> String {
    let f: &LoadedFile = &memory.files[index];
    let written = f.import.as_deref().unwrap_or("");
    format!(
        "\n<!-- begin @{written}: {} -->\n{}\n<!-- end @{written} -->",
        f.path.display(),
        flatten_file(memory, index)
    )
}

/// The first line at or after `from` that mentions `@written` as Claude Code would read it.
fn find_mention(lines: &[&str], written: &str, from: usize) -> Option<usize> {
    (from..lines.len()).find(|&n| {
        super::markdown::at_mentions(lines[n])
            .into_iter()
            .filter_map(super::content::import_path)
            .any(|p| p == written)
    })
}
