//! A long text scanned piece by piece, each piece's scan kept for the next text holding it.
//!
//! A generated document is a run of sections (clawmd's: a `<!-- … -->` marker and a `# `
//! heading each), and from one spawn to the next most of them are the same text: when one
//! MCP server's instructions change, one section of a 30 KB document does. Lexing the whole
//! document again costs what lexing every section does; a section found here costs a lookup.
//!
//! The pieces start at lines opening with `# ` or `<!--` right after a blank line (`\n\n`).
//! Claude Code's lexer reads a text left to right, and what it makes of a piece is what it
//! makes of that piece alone, unless a block of the piece reaches past the blank line into
//! the next: an unclosed fence or HTML block (`<!--`, `<script>`, …) runs on to whatever
//! closes it, while a paragraph, a list, a quote, indented code or a setext heading ends at
//! a blank line followed by an unindented line that is neither a list item nor a quote. So
//! each piece but the last is lexed followed by a heading of its own ([`SENTINEL`]): when that
//! heading comes out as a token of its own, nothing of the piece reaches past its end, and
//! the tokens before it are the piece's tokens inside the whole text too. When it does not,
//! the piece is lexed together with the next one. What holds for a whole text besides its
//! tokens is kept as well: no piece may define a link (the inline pass of every piece reads
//! the whole text's definitions; and a definition's label or title can run across a blank
//! line, forming only once its closing `]`, quote or parenthesis is seen, so a text holding
//! `]:` is scanned whole), the derived-text caps apply to the pieces' sum, and the body is the
//! one the whole scan keeps (each piece's text as the comment stripper rebuilds it, which is
//! not always its source, where the release keeps the rebuilt text). Where any of this fails
//! the text is scanned whole; `tests` check the two ways agree on the
//! oracle's inputs joined in every way the pieces can be.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{MarkdownScan, SHALLOW_NESTING, keeps_rebuilt, scan_of, strips_comments};
use crate::markdown::{self, MAX_DERIVED_BYTES, Place};
use crate::version::{Behaviour, ClaudeVersion};

/// Texts shorter than this are lexed whole (a handful of sections; nothing to gain).
const MIN_TEXT_BYTES: usize = 1024;

/// The fewest bytes a piece holds (it runs on to the next start past them): a text of many
/// tiny pieces (an agent's file can be one) would cost more to look up piece by piece than to
/// lex whole, and fill the memo with them.
const MIN_PIECE_BYTES: usize = 512;

/// The heading each piece but the last is lexed followed by.
const SENTINEL: &str = "# clawmd-piece-end\n";

/// The most bytes of pieces and scans kept (two generations of half of it).
const MAX_KEPT_BYTES: usize = 32 << 20;

/// What lexing one piece gave.
enum Outcome {
    /// Its scan: the text the comment stripper rebuilds from its tokens (`None`: the piece
    /// itself, or comment blocks are not stripped), whether a comment block went, its `@`
    /// mentions in order, and what it counts against the block and inline caps.
    Scanned {
        rebuilt: Option<String>,
        removed_any: bool,
        mentions: Vec<(Place, String)>,
        block_derived: usize,
        inline_derived: usize,
    },
    /// A block of it reaches past its end: lex it with the next piece.
    Open,
    /// It cannot be scanned apart from the rest (it defines a link, or nests too deep for
    /// the caller's stack): scan the whole text.
    Whole,
}

/// The scan of `text`, made piece by piece, or `None` when it must be scanned whole.
pub(super) fn scan(text: &str, version: ClaudeVersion) -> Option<MarkdownScan> {
    if text.len() < MIN_TEXT_BYTES {
        return None;
    }
    scan_pieces(text, version, MIN_PIECE_BYTES)
}

/// [`scan`] of a text of any length, in pieces of at least `min_piece` bytes.
fn scan_pieces(text: &str, version: ClaudeVersion, min_piece: usize) -> Option<MarkdownScan> {
    // A link definition can run across a blank line (its label, or a title in quotes or
    // parentheses) and only forms when its closing `]`, quote or parenthesis is found: a piece
    // lexed without what follows would not see it. Every definition has a `]:`.
    if text.contains('\r') || text.contains("]:") {
        return None;
    }
    let starts = piece_starts(text, min_piece);
    if starts.is_empty() {
        return None;
    }
    let strip = version.has(Behaviour::CommentBlocksStripped);
    let mut scanned: Vec<(std::ops::Range<usize>, Arc<Outcome>)> = Vec::new();
    let mut lexed_bytes = 0;
    let mut start = 0;
    let mut next = 0;
    while start < text.len() {
        let mut end_index = next;
        let (end, outcome) = loop {
            let end = starts.get(end_index).copied().unwrap_or(text.len());
            // Pieces lexed together again and again: scan the text whole instead.
            lexed_bytes += end - start;
            if lexed_bytes > 2 * text.len() {
                return None;
            }
            let outcome = outcome_of(&text[start..end], end == text.len(), strip);
            match *outcome {
                Outcome::Open => end_index += 1,
                Outcome::Whole => return None,
                Outcome::Scanned { .. } => break (end, outcome),
            }
        };
        scanned.push((start..end, outcome));
        start = end;
        next = end_index + 1;
    }
    let mut mentions = Vec::new();
    let (mut block_derived, mut inline_derived, mut removed_any) = (0usize, 0usize, false);
    for (_, outcome) in &scanned {
        let Outcome::Scanned {
            mentions: piece_mentions,
            block_derived: block,
            inline_derived: inline,
            removed_any: removed,
            ..
        } = &**outcome
        else {
            unreachable!("only scanned pieces are kept");
        };
        mentions.extend(piece_mentions.iter().cloned());
        block_derived = block_derived.saturating_add(*block);
        inline_derived = inline_derived.saturating_add(*inline);
        removed_any |= removed;
    }
    if block_derived > MAX_DERIVED_BYTES || inline_derived > MAX_DERIVED_BYTES {
        return None;
    }
    // The body as the whole scan decides it (`scan_with_limit`): the stripper's text, rebuilt
    // from the top-level tokens, when the text holds `<!--` and a comment block went (or the
    // release keeps the rebuilt text anyway); else the text itself. The rebuilt text is not
    // always the source (a last blank of one space gains a line break, a quote's lazy lines
    // move), so each piece's is kept where it differs.
    let rebuild = strips_comments(text, version) && keeps_rebuilt(removed_any, version);
    let body = match rebuild {
        false => text.to_owned(),
        true => {
            let mut body = String::with_capacity(text.len());
            for (range, outcome) in &scanned {
                match &**outcome {
                    Outcome::Scanned {
                        rebuilt: Some(rebuilt),
                        ..
                    } => body.push_str(rebuilt),
                    _ => body.push_str(&text[range.clone()]),
                }
            }
            body
        }
    };
    Some(scan_of(body, mentions, version))
}

/// Where the pieces after the first start: each line opening with `# ` or `<!--` right after
/// a blank line (`\n\n`), at least `min_piece` bytes after the start before it.
fn piece_starts(text: &str, min_piece: usize) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut starts = Vec::new();
    let mut last = 0;
    for start in memchr::memchr_iter(b'\n', bytes).map(|newline| newline + 1) {
        if start >= 2
            && start - last >= min_piece.max(1)
            && bytes[start - 2] == b'\n'
            && (bytes[start..].starts_with(b"# ") || bytes[start..].starts_with(b"<!--"))
        {
            starts.push(start);
            last = start;
        }
    }
    starts
}

/// What lexing `piece` gives (`last`: nothing follows it), from the kept outcomes when it
/// was lexed before.
fn outcome_of(piece: &str, last: bool, strip: bool) -> Arc<Outcome> {
    let key = Key {
        last,
        strip,
        text: piece,
    };
    if let Some(found) = kept::get(&key) {
        return found;
    }
    let outcome = Arc::new(lex_piece(piece, last, strip));
    kept::put(&key, Arc::clone(&outcome));
    outcome
}

fn lex_piece(piece: &str, last: bool, strip: bool) -> Outcome {
    let lexed = if last {
        markdown::lex(piece, SHALLOW_NESTING)
    } else {
        markdown::lex(&format!("{piece}{SENTINEL}"), SHALLOW_NESTING)
    };
    let Ok(mut lexed) = lexed else {
        return Outcome::Whole;
    };
    // A text holding `]:` never gets here (`scan_pieces`); this stands behind that check.
    if lexed.defines_links() {
        return Outcome::Whole;
    }
    if !last && !lexed.pop_heading(SENTINEL) {
        return Outcome::Open;
    }
    let (rebuilt, removed_any) = match strip {
        true => {
            let (rebuilt, removed_any) = markdown::strip_comments(&lexed);
            ((rebuilt != piece).then_some(rebuilt), removed_any)
        }
        false => (None, false),
    };
    match markdown::import_mentions_counted(&lexed) {
        Ok((mentions, inline_derived)) => Outcome::Scanned {
            rebuilt,
            removed_any,
            mentions,
            block_derived: lexed.derived(),
            inline_derived,
        },
        Err(markdown::TooDeep) => Outcome::Whole,
    }
}

/// A piece as it is looked up: its text, whether it ends the text, whether comment blocks
/// are stripped.
struct Key<'a> {
    last: bool,
    strip: bool,
    text: &'a str,
}

impl Key<'_> {
    /// Which of the kept maps holds pieces of its kind.
    fn kind(&self) -> usize {
        usize::from(self.last) * 2 + usize::from(self.strip)
    }
}

impl Outcome {
    /// Bytes it holds, roughly.
    fn size(&self) -> usize {
        match self {
            Outcome::Scanned {
                rebuilt, mentions, ..
            } => {
                rebuilt.as_ref().map_or(0, String::len)
                    + mentions
                        .iter()
                        .map(|(_, text)| text.len() + std::mem::size_of::<(Place, String)>())
                        .sum::<usize>()
            }
            Outcome::Open | Outcome::Whole => 0,
        }
    }
}

/// The outcomes kept, in two generations: a lookup found in the older one moves to the
/// newer, and when the newer holds half of [`MAX_KEPT_BYTES`] it becomes the older (the
/// older dropped).
mod kept {
    use super::*;

    /// Outcomes by piece text, one map per kind of piece ([`Key::kind`]), hashed with
    /// foldhash (SipHash took as long as a lookup saves on a 30 KB document).
    type Maps = [HashMap<Box<str>, Arc<Outcome>, foldhash::quality::RandomState>; 4];

    #[derive(Default)]
    struct Generations {
        newer: Maps,
        older: Maps,
        newer_bytes: usize,
    }

    static KEPT: Mutex<Option<Generations>> = Mutex::new(None);

    fn with<T>(f: impl FnOnce(&mut Generations) -> T) -> T {
        let mut kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(kept.get_or_insert_with(Generations::default))
    }

    pub(super) fn get(key: &Key) -> Option<Arc<Outcome>> {
        with(|kept| {
            if let Some(found) = kept.newer[key.kind()].get(key.text) {
                return Some(Arc::clone(found));
            }
            let found = kept.older[key.kind()].remove(key.text)?;
            insert(kept, key, Arc::clone(&found));
            Some(found)
        })
    }

    pub(super) fn put(key: &Key, outcome: Arc<Outcome>) {
        with(|kept| insert(kept, key, outcome));
    }

    fn insert(kept: &mut Generations, key: &Key, outcome: Arc<Outcome>) {
        // The map's entry, the box and the outcome's own allocations, roughly.
        let bytes = key.text.len() + outcome.size() + 160;
        if bytes > MAX_KEPT_BYTES / 2 {
            return;
        }
        if kept.newer_bytes + bytes > MAX_KEPT_BYTES / 2 {
            // The newer generation starts as large as the one it replaces (no rehashing
            // while it fills again).
            let sized = (kept.newer.each_ref())
                .map(|map| HashMap::with_capacity_and_hasher(map.len(), Default::default()));
            kept.older = std::mem::replace(&mut kept.newer, sized);
            kept.newer_bytes = 0;
        }
        kept.newer_bytes += bytes;
        kept.newer[key.kind()].insert(key.text.into(), outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::scan_with_limit;

    /// The releases whose rules differ: no comment stripping (2.1.71), the oracle's (2.1.328),
    /// the rebuilt text kept only when a comment block went (2.1.330 on).
    fn releases() -> [ClaudeVersion; 3] {
        [
            ClaudeVersion::new(2, 1, 71),
            ClaudeVersion::new(2, 1, 328),
            ClaudeVersion::new(2, 1, 332),
        ]
    }

    /// Scanned in pieces (when it can be), it scans as whole: `Some(true)` if it was pieced.
    fn agrees(text: &str, version: ClaudeVersion) -> Option<bool> {
        let whole = scan_with_limit(text, SHALLOW_NESTING, version).ok()?;
        match scan_pieces(text, version, 1) {
            Some(pieced) => {
                assert_eq!(pieced, whole, "{version}: {text:?}");
                Some(true)
            }
            None => Some(false),
        }
    }

    /// What the pieces are joined by: blank lines, then a heading or a comment (a section
    /// marker, an unclosed comment), or nothing that starts a piece.
    const JOINS: [&str; 8] = [
        "\n\n# Section\n\n",
        "\n\n<!-- clawmd section x -->\n# Section\n\n",
        "\n\n<!-- note -->\n",
        "\n\n<!--\n",
        "\n\n# ",
        "\n\n\n# Section\n",
        "\n# Section\n\n",
        "\n\n",
    ];

    #[test]
    fn the_oracles_inputs_joined_scan_in_pieces_as_whole() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/markdown-oracle.json"
        );
        let vectors: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut sources: Vec<&str> = vectors.iter().map(|v| v["src"].as_str().unwrap()).collect();
        // Found by review: raw texts that do not join back into the source, and definitions
        // whose label or title runs across a blank line.
        sources.extend(RAW_QUIRKS);
        sources.extend([
            "[a]: /u \"t @m.md",
            "# x\"",
            "[a]: /u (t @m.md",
            "# x)",
            "[a @m.md",
        ]);
        let n = sources.len();
        let (mut pieced, mut compared) = (0, 0);
        for (i, first) in sources.iter().enumerate() {
            let second = sources[(i * 7 + 1) % n];
            let third = sources[(i * 13 + 5) % n];
            for (j, join) in JOINS.iter().enumerate() {
                let other = JOINS[(i + j + 1) % JOINS.len()];
                let text = format!("{first}{join}{second}{other}{third}\n");
                for version in releases() {
                    if let Some(was_pieced) = agrees(&text, version) {
                        compared += 1;
                        pieced += usize::from(was_pieced);
                    }
                }
            }
        }
        // The comparison means something only if many texts were scanned in pieces (those
        // holding a `]:`, a third of the oracle's fragments, are scanned whole).
        assert!(
            pieced * 3 > compared,
            "{pieced} of {compared} texts scanned in pieces"
        );
    }

    /// Texts whose top-level tokens' raw texts, joined, are not the source: a last blank of
    /// one space or tab gains a line break, a quote's lazy lines move.
    const RAW_QUIRKS: [&str; 4] = [
        "- item ",
        "> - item\n\t\n\n# T @t.md\n",
        "> Note:\n> - one \nlazy @l.md\n",
        "> - item\n\u{a0}\n\nmore @m.md\n",
    ];

    #[test]
    fn definitions_across_a_piece_end_and_rebuilt_raws_scan_as_whole() {
        let definitions = [
            "[a]: /u \"t @m.md\n\n# x\"\n",
            "[a]: /u (t @m.md\n\n# x)\n",
            "[a @m.md\n\n# x]: /u\n",
            "[a\n\n<!-- c -->\n]: /u\n",
        ];
        for text in definitions {
            for version in releases() {
                assert_eq!(
                    agrees(text, version),
                    Some(false),
                    "{text:?}: scanned whole"
                );
            }
        }
        for tail in RAW_QUIRKS {
            for head in [
                "<!-- c -->\n\n# S\n\n",
                "x <!-- c --> y\n\n# S\n\n",
                "# S\n\n",
            ] {
                let text = format!("{head}{tail}");
                for version in releases() {
                    assert!(agrees(&text, version).is_some(), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn blocks_reaching_past_a_piece_are_read_with_the_next() {
        let cases = [
            // An unclosed fence: the next section's import is code.
            "# A\n\n```\ncode\n\n# B\n\n@b.md\n\n```\n\n# C\n\n@c.md\n",
            // An unclosed comment closes in the next section's marker.
            "# A\n\n<!-- open\n\n<!-- clawmd section b -->\n# B\n\n@b.md\n",
            // A script block runs on to its end tag.
            "# A\n\n<script>\n\n# B @b.md\n</script>\n\n# C\n@c.md\n",
            // A list, indented code and a quote end at the blank line.
            "# A\n\n- item\n- @a.md\n\n# B\n\n    code @x.md\n\n# C\n\n> quote\n\n# D @d.md\n",
            // A setext underline right after a piece's start.
            "# A\n\ntext\n\n# B\n===\n\n<!-- c -->\n---\n",
            // A link definition in one section, its use in another.
            "# A\n\n[x]: /u\n\n# B\n\n![@b.md][x] and [@c.md][x]\n",
        ];
        for text in cases {
            for version in releases() {
                assert!(agrees(text, version).is_some(), "{text:?}");
            }
        }
        // The fence and the link definition cannot be scanned apart; the rest can.
        assert_eq!(agrees(cases[0], ClaudeVersion::new(2, 1, 332)), Some(true));
        assert_eq!(agrees(cases[5], ClaudeVersion::new(2, 1, 332)), Some(false));
    }

    #[test]
    fn a_piece_is_scanned_once_then_found() {
        let section = |n: usize| {
            let words = "words ".repeat(100);
            format!("<!-- clawmd section s{n} -->\n# S{n}\n\nSee @f{n}.md. {words}\n\n")
        };
        let text: String = (0..20).map(section).collect();
        let version = ClaudeVersion::new(2, 1, 332);
        let first = scan(&text, version).expect("pieced");
        let edited = text.replace("See @f7.md", "See @g7.md");
        let second = scan(&edited, version).expect("pieced");
        assert_eq!(
            second,
            scan_with_limit(&edited, SHALLOW_NESTING, version).unwrap()
        );
        assert_ne!(first.imports, second.imports);
        let key = Key {
            last: false,
            strip: true,
            text: &section(3),
        };
        assert!(kept::get(&key).is_some(), "an unchanged section is kept");
    }

    #[test]
    fn tiny_pieces_run_on_to_the_least_size() {
        let text = "# a\n\n# b\n\n<!-- c -->\n\n# d\n\n";
        assert_eq!(piece_starts(text, 1), [5, 10, 22]);
        assert_eq!(piece_starts(text, 6), [10, 22]);
        assert_eq!(piece_starts(text, 100), Vec::<usize>::new());
        // Many tiny pieces are scanned as a few, and the same as whole.
        let many: String = (0..2000).map(|i| format!("# {i} @a{i}.md\n\n")).collect();
        let version = ClaudeVersion::new(2, 1, 332);
        assert!(piece_starts(&many, MIN_PIECE_BYTES).len() <= many.len() / MIN_PIECE_BYTES);
        assert_eq!(
            scan(&many, version).expect("pieced"),
            scan_with_limit(&many, SHALLOW_NESTING, version).unwrap()
        );
    }
}
