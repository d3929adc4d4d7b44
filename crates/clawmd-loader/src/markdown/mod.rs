//! Markdown as Claude Code reads a memory file: which `@path` mentions are imports, and what
//! is left after HTML comments are stripped.
//!
//! Claude Code does not use a regex over lines: it runs its own markdown lexer (a linear-time
//! fork of `marked`, `gfm: false`) and walks the tokens. Whether `@x.md` is an import depends
//! on the token it lands in (code spans, fenced and indented code, raw HTML and images are
//! skipped; text in list items is searched *including* its code spans), and comment stripping
//! rebuilds the file from the top-level tokens' raw text. To be byte-identical this module is
//! a port of that lexer ([`block`], [`inline`]) plus the two token walks ([`strip_comments`],
//! [`import_mentions`]). It was checked against the original on thousands of generated inputs
//! (`tests/fixtures/markdown-oracle.json`).

mod block;
mod inline;
mod scan;
mod unicode;

pub use scan::js_trim;
pub(crate) use scan::{is_js_space, js_is_blank, js_length};

/// A block token. `raw` is the source text the token covers (top-level raws concatenate to
/// the input, which is what comment stripping relies on).
#[derive(Debug, Clone)]
pub(crate) enum Block {
    Space { raw: String },
    Code { raw: String },
    Heading { raw: String, text: String },
    Hr { raw: String },
    Blockquote { raw: String, tokens: Vec<Block> },
    List { raw: String, items: Vec<ListItem> },
    Html { raw: String },
    Paragraph { raw: String, text: Text },
    Text { raw: String, text: Text },
}

/// The text of a paragraph or text token (what the inline pass reads): mostly its raw text or
/// the start of it, kept as such (see `block::push_or_merge`).
#[derive(Debug, Clone)]
pub(crate) enum Text {
    /// The first `len` bytes of the raw text.
    Raw(usize),
    /// A text of its own (an indented code block was merged in, or a newline added to the raw
    /// text only, and then another line).
    Own(String),
}

impl Text {
    /// The text, given the token's raw text.
    pub(crate) fn of<'a>(&'a self, raw: &'a str) -> &'a str {
        match self {
            Text::Raw(len) => &raw[..*len],
            Text::Own(text) => text,
        }
    }
}

/// One list item: its own block tokens (its raw text is not kept: nothing reads it, and
/// deep nesting would make keeping it quadratic).
#[derive(Debug, Clone)]
pub(crate) struct ListItem {
    pub(crate) tokens: Vec<Block>,
}

/// How deep the original can nest before its JavaScript stack runs out, measured with
/// `claude-view` on 2.1.328: about 8,500 block quotes (`>>>…`), 8,690 lists (`- - - …`) or
/// 13,400 nested emphasis levels. A level costs the matching fraction of one whole stack; a
/// file that would need more than a whole stack is dropped, as Claude Code drops it (the
/// `RangeError` is caught and the file skipped). (Lists nested by indentation already fail
/// near 2,046 levels in the original, for reasons other than depth alone; clawmd's derived-
/// text cap below drops those earlier still.)
pub(crate) const QUOTE_LEVEL: f64 = 1.0 / 8_497.0;
/// One nested list level (see [`QUOTE_LEVEL`]).
pub(crate) const LIST_LEVEL: f64 = 1.0 / 8_690.0;
/// One nested inline level: emphasis or link text (see [`QUOTE_LEVEL`]).
pub(crate) const INLINE_LEVEL: f64 = 1.0 / 13_400.0;

/// Cap on text derived while lexing (list item and quote contents, emphasis and link
/// texts, emphasis masks). Normal files derive a few times their size; nesting thousands
/// deep can derive depth × size (gigabytes for a 4 MiB file). Past this cap clawmd treats
/// the file as unparsable, where Claude Code (its JavaScript strings share memory) might
/// still load it: a deliberate difference, for inputs no person writes.
pub(crate) const MAX_DERIVED_BYTES: usize = 128 << 20;

/// The lexer gave up: the text nests deeper than the original could parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooDeep;

/// What the inline pass shares: link definitions and the nesting budget.
pub(crate) struct Ctx {
    pub(crate) links: std::collections::HashSet<String>,
    nest: std::cell::Cell<f64>,
    limit: f64,
    overflow: std::cell::Cell<bool>,
    spent: std::cell::Cell<usize>,
}

impl Ctx {
    /// Account for derived text (see [`MAX_DERIVED_BYTES`]).
    fn spend(&self, bytes: usize) -> bool {
        self.spent.set(self.spent.get().saturating_add(bytes));
        if self.spent.get() > MAX_DERIVED_BYTES {
            self.overflow.set(true);
        }
        !self.overflow.get()
    }

    fn enter(&self, cost: f64) -> bool {
        self.nest.set(self.nest.get() + cost);
        if self.nest.get() > self.limit {
            self.overflow.set(true);
        }
        !self.overflow.get()
    }

    fn leave(&self, cost: f64) {
        self.nest.set(self.nest.get() - cost);
    }

    fn overflowed(&self) -> bool {
        self.overflow.get()
    }
}

/// The block tokens of a text, and what its inline pass needs (the link definitions).
pub(crate) struct Lexed {
    tokens: Vec<Block>,
    cx: Ctx,
    /// Bytes of text the block pass derived (counted against [`MAX_DERIVED_BYTES`]).
    derived: usize,
}

impl Lexed {
    /// Bytes of text the block pass derived (see [`MAX_DERIVED_BYTES`]): a text lexed in
    /// pieces derives what its pieces derive, in sum.
    pub(crate) fn derived(&self) -> usize {
        self.derived
    }

    /// Whether the text defines a link (a `[label]: url` line): the inline pass of every
    /// other part of a text reads its definitions.
    pub(crate) fn defines_links(&self) -> bool {
        !self.cx.links.is_empty()
    }

    /// Removes the last top-level token when it is a heading whose raw text is exactly
    /// `raw`; whether it did.
    pub(crate) fn pop_heading(&mut self, raw: &str) -> bool {
        let found =
            matches!(self.tokens.last(), Some(Block::Heading { raw: last, .. }) if last == raw);
        if found {
            self.tokens.pop();
        }
        found
    }
}

impl std::ops::Deref for Lexed {
    type Target = [Block];

    fn deref(&self) -> &[Block] {
        &self.tokens
    }
}

/// Lex `src` (JS: `new AFn().lex(src)`): CRLF and lone CR become LF first. `limit` is the
/// share of the original's stack the nesting may use (1.0 = all of it). This is the block
/// pass; the inline pass runs during [`import_mentions`], when every link definition is
/// known (its nesting can still fail the lexing there).
pub(crate) fn lex(src: &str, limit: f64) -> Result<Lexed, TooDeep> {
    let normalized;
    let text = if src.contains('\r') {
        normalized = src.replace("\r\n", "\n").replace('\r', "\n");
        normalized.as_str()
    } else {
        src
    };
    let mut lexer = block::Lexer::new(limit);
    let mut tokens = Vec::new();
    lexer.block_tokens(text, &mut tokens, false);
    if lexer.overflow {
        return Err(TooDeep);
    }
    let derived = lexer.derived();
    let cx = Ctx {
        links: std::mem::take(&mut lexer.links),
        nest: std::cell::Cell::new(0.0),
        limit,
        overflow: std::cell::Cell::new(false),
        spent: std::cell::Cell::new(0),
    };
    Ok(Lexed {
        tokens,
        cx,
        derived,
    })
}

/// Remove every `<!-- … -->` (lazy, across lines) from `text`.
pub(crate) fn remove_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        match rest[start + 4..].find("-->") {
            Some(end) => {
                out.push_str(&rest[..start]);
                rest = &rest[start + 4 + end + 3..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

fn is_comment_block(raw: &str) -> bool {
    let trimmed = scan::js_trim_start(raw);
    trimmed.starts_with("<!--") && trimmed.contains("-->")
}

/// JS: `iht` — rebuild the text from top-level raws, dropping HTML comment blocks (what is
/// left of such a block besides its comments is kept when it is not blank).
pub(crate) fn strip_comments(tokens: &[Block]) -> (String, bool) {
    let mut out = String::with_capacity(tokens.iter().map(|token| block_raw(token).len()).sum());
    let mut removed_any = false;
    for token in tokens {
        let raw = block_raw(token);
        if matches!(token, Block::Html { .. }) && is_comment_block(raw) {
            removed_any = true;
            let kept = remove_comments(raw);
            if !js_is_blank(&kept) {
                out.push_str(&kept);
            }
            continue;
        }
        out.push_str(raw);
    }
    (out, removed_any)
}

fn block_raw(token: &Block) -> &str {
    block::block_raw(token)
}

/// Where an `@` mention was found, for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// In text: an import candidate.
    Text,
    /// In a code span or code block: never an import.
    Code,
    /// In an HTML comment: never an import.
    Comment,
    /// Text after the comments of an HTML comment *block* (`<!-- c --> @x.md` on its own
    /// line): an import in the releases that search it, text to ignore before.
    CommentBlockText,
}

/// Where the path of a mention starting at byte `start` (just after its `@`) ends: at the
/// first whitespace character or backslash, except that `\ ` (an escaped space) goes on.
fn mention_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut j = start;
    loop {
        match scan::char_at(text, j) {
            Some('\\') if bytes.get(j + 1) == Some(&b' ') => j += 2,
            Some(c) if c != '\\' && !is_js_space(c) => j += c.len_utf8(),
            _ => break,
        }
    }
    j
}

/// JS: `/(?:^|\s)@((?:[^\s\\]|\\ )+)/g` — the raw captures, in order.
pub fn at_mentions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    // `i`: where the scan stands (a match may start only at an `@` that opens the text, or
    // that follows a whitespace character starting at or after `i`); `@` is ASCII, so never
    // part of another character, and memchr finds each candidate.
    let mut i = 0;
    let mut from = 0;
    while let Some(offset) = memchr::memchr(b'@', &bytes[from..]) {
        let at = from + offset;
        let starts = match text[..at].chars().next_back() {
            None => i == 0,
            Some(c) => is_js_space(c) && at - c.len_utf8() >= i,
        };
        if !starts {
            from = at + 1;
            continue;
        }
        let start = at + 1;
        let j = mention_end(text, start);
        if j > start {
            out.push(&text[start..j]);
            i = j;
            from = j;
        } else {
            // The `@` itself cannot start a match; step past it.
            i = at + 1;
            from = at + 1;
        }
    }
    out
}

/// JS: `GZr` — every `@` capture in the places Claude Code searches, plus (for diagnostics)
/// the ones it skips, in document order. Duplicates are kept; callers dedupe. The inline
/// pass runs here (each text's inline tokens are walked as they are found, never kept), so
/// this is where nesting too deep for the original shows (an error).
pub(crate) fn import_mentions(lexed: &Lexed) -> Result<Vec<(Place, String)>, TooDeep> {
    import_mentions_counted(lexed).map(|(mentions, _)| mentions)
}

/// [`import_mentions`], and the bytes its inline passes count against [`MAX_DERIVED_BYTES`]
/// (what they derived, and the most the passes left out could have): a text walked in pieces
/// counts what its pieces count, in sum.
pub(crate) fn import_mentions_counted(
    lexed: &Lexed,
) -> Result<(Vec<(Place, String)>, usize), TooDeep> {
    let cx = &lexed.cx;
    let mut out = Vec::new();
    let mut skipped = Some(0);
    walk_blocks(&lexed.tokens, cx, &mut out, &mut skipped);
    let mut counted = cx.spent.get().saturating_add(skipped.unwrap_or(0));
    if !cx.overflowed() && counted > MAX_DERIVED_BYTES {
        // The passes left out might have spent past the cap: run every one of them.
        cx.nest.set(0.0);
        cx.spent.set(0);
        out.clear();
        walk_blocks(&lexed.tokens, cx, &mut out, &mut None);
        counted = cx.spent.get();
    }
    if cx.overflowed() {
        return Err(TooDeep);
    }
    Ok((out, counted))
}

/// The inline pass of a block's text. With `skipped` (a running total), a text whose pass
/// can find no mention and cannot nest too deep is left out, and the most that pass could
/// have spent (see [`inline::pass_bound`]) is added to `skipped` instead.
fn inline_pass(text: &str, cx: &Ctx, out: &mut Vec<(Place, String)>, skipped: &mut Option<usize>) {
    if let Some(total) = skipped
        && let Some(most) = inline::pass_bound(text, cx.limit)
    {
        *total = total.saturating_add(most);
        return;
    }
    inline::inline_mentions(text, cx, out);
}

fn push_all(text: &str, place: Place, out: &mut Vec<(Place, String)>) {
    out.extend(
        at_mentions(text)
            .into_iter()
            .map(|mention| (place, mention.to_string())),
    );
}

fn html_mentions(raw: &str, block: bool, out: &mut Vec<(Place, String)>) {
    if !is_comment_block(raw) {
        return; // other raw HTML is skipped outright
    }
    let kept = remove_comments(raw);
    for body in comment_bodies(raw) {
        push_all(body, Place::Comment, out);
    }
    if !js_is_blank(&kept) {
        let place = if block {
            Place::CommentBlockText
        } else {
            Place::Text
        };
        push_all(&kept, place, out);
    }
}

fn comment_bodies(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        let Some(end) = rest[start + 4..].find("-->") else {
            break;
        };
        out.push(&rest[start + 4..start + 4 + end]);
        rest = &rest[start + 4 + end + 3..];
    }
    out
}

fn walk_blocks(
    tokens: &[Block],
    cx: &Ctx,
    out: &mut Vec<(Place, String)>,
    skipped: &mut Option<usize>,
) {
    for token in tokens {
        if cx.overflowed() {
            return;
        }
        match token {
            Block::Code { raw } => push_all(raw, Place::Code, out),
            Block::Html { raw } => html_mentions(raw, true, out),
            Block::Text { raw, text } => {
                let text = text.of(raw);
                push_all(text, Place::Text, out);
                inline_pass(text, cx, out, skipped);
            }
            Block::Paragraph { raw, text } => inline_pass(text.of(raw), cx, out, skipped),
            Block::Heading { text, .. } => inline_pass(text, cx, out, skipped),
            Block::Blockquote { tokens, .. } => walk_blocks(tokens, cx, out, skipped),
            Block::List { items, .. } => {
                for item in items {
                    walk_blocks(&item.tokens, cx, out, skipped);
                }
            }
            Block::Space { .. } | Block::Hr { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The candidate-by-memchr scan of [`at_mentions`] as it was: every character in turn.
    fn at_mentions_by_char(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let at = if i == 0 && bytes[0] == b'@' {
                Some(0)
            } else {
                let c = scan::char_at(text, i).unwrap_or(' ');
                if is_js_space(c) && bytes.get(i + c.len_utf8()) == Some(&b'@') {
                    Some(i + c.len_utf8())
                } else {
                    None
                }
            };
            let Some(at) = at else {
                i += scan::char_len_at(text, i);
                continue;
            };
            let start = at + 1;
            let j = mention_end(text, start);
            if j > start {
                out.push(&text[start..j]);
                i = j;
            } else {
                i = at;
                // The `@` itself cannot start a match; step past it.
                i += 1;
            }
        }
        out
    }

    proptest::proptest! {
        /// [`at_mentions`] finds what a scan of every character finds, on text made of the
        /// pieces that matter to it (whitespace of every width, escapes, `@`, multi-byte
        /// characters).
        #[test]
        fn at_mentions_finds_what_a_character_scan_finds(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "@", "a", "x.md", " ", "\t", "\n", "\\", "\\ ", "\u{a0}", "\u{3000}",
                    "\u{feff}", "\u{2028}", "é", "\u{1f600}", "@./y", "`", "#",
                ]),
                0..24,
            )
        ) {
            let text = pieces.concat();
            proptest::prop_assert_eq!(at_mentions(&text), at_mentions_by_char(&text));
        }
    }

    /// [`import_mentions`] with every inline pass run (none left out).
    fn full_walk(src: &str, limit: f64) -> Result<Vec<(Place, String)>, TooDeep> {
        let lexed = lex(src, limit)?;
        let mut out = Vec::new();
        walk_blocks(&lexed.tokens, &lexed.cx, &mut out, &mut None);
        if lexed.cx.overflowed() {
            return Err(TooDeep);
        }
        Ok(out)
    }

    fn mentions(src: &str, limit: f64) -> Result<Vec<(Place, String)>, TooDeep> {
        import_mentions(&lex(src, limit)?)
    }

    proptest::proptest! {
        /// The inline passes [`import_mentions`] leaves out change nothing: with every pass
        /// run, the same mentions are found, and nesting too deep fails alike.
        #[test]
        fn inline_passes_left_out_change_nothing(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", " ", "\n", "\n\n", "- ", "> ", "    ", "*", "**", "_", "[", "]", "(u)",
                    "[l]: /u\n", "[l]", "`", "<!-- c -->", "<b>", "@x.md", "\\", "# ", "---\n",
                    "*x ", " x*",
                ]),
                0..48,
            ),
            limit in proptest::sample::select(vec![0.001, 0.02, 1.0]),
        ) {
            let text = pieces.concat();
            proptest::prop_assert_eq!(mentions(&text, limit), full_walk(&text, limit));
        }
    }

    #[test]
    fn inline_passes_left_out_still_fail_when_too_deep() {
        // Emphasis nested 300 levels (no `@` anywhere): past 2% of the original's stack.
        let deep = format!("{}y{}\n", "*x ".repeat(300), " x*".repeat(300));
        assert_eq!(mentions(&deep, 0.02), Err(TooDeep));
        assert_eq!(full_walk(&deep, 0.02), Err(TooDeep));
        assert!(mentions(&deep, 1.0).unwrap().is_empty());
        // Paragraphs whose passes, left out, might have spent past the cap (each could nest
        // 250 levels): they are all run then, and the mention after them is found.
        let starry = format!(
            "{}@x.md\n",
            format!("{}x\n\n", "a*b ".repeat(250)).repeat(300)
        );
        let found = mentions(&starry, 0.02).unwrap();
        assert_eq!(found, vec![(Place::Text, "x.md".to_owned())]);
        assert_eq!(found, full_walk(&starry, 0.02).unwrap());
    }

    fn imports(src: &str) -> Vec<String> {
        let mut seen = Vec::new();
        for (place, m) in import_mentions(&lex(src, 1.0).unwrap()).unwrap() {
            if matches!(place, Place::Text | Place::CommentBlockText) && !seen.contains(&m) {
                seen.push(m);
            }
        }
        seen
    }

    #[test]
    fn mentions_need_start_or_whitespace() {
        assert_eq!(at_mentions("@a b@c @d\\ e @f\\g"), vec!["a", "d\\ e", "f"]);
        assert_eq!(at_mentions("x\u{feff}@bom"), vec!["bom"]);
        assert!(at_mentions("@ @").is_empty());
    }

    #[test]
    fn code_and_comments_are_not_imports() {
        let src = "@./one.md\n`@./span.md`\n```\n@./fenced.md\n```\n    @indented.md\n\n<!-- @c.md -->\n@docs/two.md\n";
        assert_eq!(imports(src), vec!["./one.md", "docs/two.md"]);
    }

    #[test]
    fn text_token_starts_after_code_span() {
        assert_eq!(
            imports("`code`@after.md and **b**@bold.md"),
            vec!["after.md", "bold.md"]
        );
    }

    #[test]
    fn list_items_search_code_spans_too() {
        assert_eq!(imports("- see `a @x.md`\n"), vec!["x.md`"]);
        assert!(imports("see `a @x.md`\n").is_empty());
    }

    #[test]
    fn comment_stripping_rebuilds_from_raws() {
        let src = "<!-- block comment -->\nkeep1\ninline <!-- c --> text\n<!--\nmulti\nline\n-->\nkeep2\n```\n<!-- in code -->\n```\n";
        assert_eq!(
            strip_comments(&lex(src, 1.0).unwrap()),
            (
                "keep1\ninline <!-- c --> text\nkeep2\n```\n<!-- in code -->\n```\n".to_string(),
                true
            )
        );
    }
}
