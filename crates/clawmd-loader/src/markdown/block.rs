//! Block-level tokenizer: a line-by-line port of the block half of Claude Code's markdown
//! lexer (a linear-time rewrite of `marked`, run with `gfm: false`).
//!
//! Only what decides Claude Code's output is kept: token kinds, `raw` text (the comment
//! stripper rebuilds a file from top-level raws) and the text handed to the inline lexer.
//! The JavaScript names are kept in comments (`// JS: Sl`) so each function can be compared
//! with its original. Locals and parameters have readable names instead of the minified
//! ones: the text being lexed (JS `e`) is `src`, and a comment gives the JS name where the
//! comparison needs it.

use std::borrow::Cow;
use std::collections::HashSet;

use super::scan::*;
use super::{Block, ListItem, Text};

/// Lexer state shared by the block and inline passes (JS: the `Wze` instance).
pub(crate) struct Lexer {
    /// Labels of link reference definitions (JS: `tokens.links`); first definition wins.
    pub(crate) links: HashSet<String>,
    top: bool,
    /// JS: `noSetextUntil` (a remaining-length bound, `usize::MAX` for Infinity).
    no_setext_until: usize,
    /// JS: `CFn.lexed` — for each active `blockTokens` call, the line starts (as lengths
    /// from the end, ascending) that a setext underline below can reach.
    reach: Vec<Vec<usize>>,
    /// Nesting spent and allowed, as a fraction of the original's stack (see `Ctx`).
    pub(crate) nest: f64,
    pub(crate) limit: f64,
    pub(crate) overflow: bool,
    /// Bytes of derived text (list item and quote contents) made so far, and the cap.
    spent: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Space,
    Code,
    Fences,
    Heading,
    Hr,
    List,
    Blockquote,
    Html,
    Def,
    Lheading,
    Paragraph,
    Text,
}

use Method as M;

const DEFAULT: &[Method] = &[M::Lheading, M::Paragraph, M::Text];

/// JS: `LS` — which tokenizers to try, by the first char after up to three spaces.
fn dispatch(first: Option<u8>) -> &'static [Method] {
    match first {
        None | Some(b'\n') => &[M::Space, M::Lheading, M::Paragraph, M::Text],
        Some(b' ' | b'\t') => &[M::Space, M::Code, M::Lheading, M::Paragraph, M::Text],
        Some(b'`' | b'~') => &[M::Fences, M::Lheading, M::Paragraph, M::Text],
        Some(b'#') => &[M::Heading, M::Lheading, M::Paragraph, M::Text],
        Some(b'_') => &[M::Hr, M::Lheading, M::Paragraph, M::Text],
        Some(b'-' | b'*') => &[M::Hr, M::List, M::Lheading, M::Paragraph, M::Text],
        Some(b'+' | b'0'..=b'9') => &[M::List, M::Lheading, M::Paragraph, M::Text],
        Some(b'>') => &[M::Blockquote, M::Lheading, M::Paragraph, M::Text],
        Some(b'<') => &[M::Html, M::Lheading, M::Paragraph, M::Text],
        Some(b'[') => &[M::Def, M::Lheading, M::Paragraph, M::Text],
        Some(_) => DEFAULT,
    }
}

impl Lexer {
    pub(crate) fn new(limit: f64) -> Self {
        Lexer {
            links: HashSet::new(),
            top: true,
            no_setext_until: usize::MAX,
            reach: Vec::new(),
            nest: 0.0,
            limit,
            overflow: false,
            spent: 0,
        }
    }

    /// Account for `bytes` of text derived from the input; nesting can make these grow
    /// with depth × size, so past [`super::MAX_DERIVED_BYTES`] the lexing fails.
    fn spend(&mut self, bytes: usize) -> bool {
        self.spent = self.spent.saturating_add(bytes);
        if self.spent > super::MAX_DERIVED_BYTES {
            self.overflow = true;
        }
        !self.overflow
    }

    /// Bytes of derived text made so far (see [`Self::spend`]).
    pub(crate) fn derived(&self) -> usize {
        self.spent
    }

    /// Spend `cost` of nesting; false (and the whole lexing fails) when over the limit.
    fn enter(&mut self, cost: f64) -> bool {
        self.nest += cost;
        if self.nest > self.limit {
            self.overflow = true;
        }
        !self.overflow
    }

    /// JS: `AFn.blockTokens` + `Wze.blockTokens` + `#i`: tokenize `text` and append to
    /// `tokens`, merging into the last token as the original does.
    pub(crate) fn block_tokens(&mut self, text: &str, tokens: &mut Vec<Block>, para_open: bool) {
        self.reach.push(setext_reach(text));
        let outer_no_setext = self.no_setext_until;
        self.no_setext_until = usize::MAX;
        let mut para_open = para_open;
        let mut pos = 0;
        while pos < text.len() && !self.overflow {
            let rest = &text[pos..];
            let prev_nl = pos == 0 || byte(text, pos - 1) == Some(b'\n');
            let first = byte(rest, skip_3_spaces(rest, 0));
            let Some((method, tok)) = self.try_methods(rest, first, prev_nl) else {
                break; // JS throws "Markdown lexing stopped short"; unreachable in practice
            };
            let consumed = raw_len(&tok).min(rest.len()).max(1);
            push_or_merge(tokens, method, tok, para_open, &mut self.links);
            para_open &= method != M::Paragraph;
            pos += ceil_char_boundary(rest, consumed);
        }
        self.no_setext_until = outer_no_setext;
        self.top = true;
        self.reach.pop();
    }

    fn try_methods(
        &mut self,
        rest: &str,
        first: Option<u8>,
        prev_nl: bool,
    ) -> Option<(Method, Piece)> {
        for &method in dispatch(first) {
            if self.overflow {
                return None; // the lexing has failed: no other reading of this text is kept
            }
            if method == M::Paragraph && !self.top {
                continue;
            }
            if let Some(tok) = self.run(method, rest, prev_nl) {
                return Some((method, tok));
            }
        }
        None
    }

    fn run(&mut self, method: Method, src: &str, prev_nl: bool) -> Option<Piece> {
        match method {
            M::Space => match_len(space_end(src)).map(|len| {
                Piece::Block(Block::Space {
                    raw: src[..len].into(),
                })
            }),
            M::Code => indented_code_end(src)
                .filter(|&len| len > 0)
                .map(|len| code_piece(&src[..len], true)),
            M::Fences => fence_end(src)
                .filter(|&len| len > 0)
                .map(|len| code_piece(&src[..len], false)),
            M::Heading => heading_end(src)
                .filter(|&len| len > 0)
                .map(|len| Piece::Block(heading(&src[..len]))),
            M::Hr => hr_end(src).filter(|&len| len > 0).map(|len| {
                Piece::Block(Block::Hr {
                    raw: trim_trailing_newlines(&src[..len]).into(),
                })
            }),
            M::Paragraph => paragraph_end(src).filter(|&len| len > 0).map(|len| {
                Piece::Block(Block::Paragraph {
                    raw: src[..len].to_string(),
                    text: Text::Raw(len),
                })
            }),
            M::Html => html_end(src).filter(|&len| len > 0).map(|len| {
                Piece::Block(Block::Html {
                    raw: src[..len].into(),
                })
            }),
            M::Text => {
                let len = line_end(src, 0);
                (len > 0).then(|| {
                    Piece::Block(Block::Text {
                        raw: src[..len].to_string(),
                        text: Text::Raw(len),
                    })
                })
            }
            M::Def => def(src).map(|(label, len)| Piece::Def {
                label,
                raw: src[..len].into(),
            }),
            M::Lheading => self.lheading(src, prev_nl).map(Piece::Block),
            M::Blockquote => self.blockquote(src).map(Piece::Block),
            M::List => self.list(src).map(Piece::Block),
        }
    }

    /// JS: `CFn.lheading` + `Hxe.lheading`.
    fn lheading(&mut self, src: &str, prev_nl: bool) -> Option<Block> {
        let in_reach = self
            .reach
            .last()
            .is_some_and(|reach| reach.binary_search(&src.len()).is_ok());
        if !in_reach && prev_nl {
            return None;
        }
        if src.len() > self.no_setext_until {
            return None;
        }
        if let Some(end) = setext_end(src) {
            return Some(setext_heading(&src[..end]));
        }
        if !self.top {
            let search = setext_search(src);
            // JS: e.length - ~Vu(e) (e = src); Vu is negative here (no underline found).
            self.no_setext_until = src.len().saturating_sub(!search as usize);
        }
        None
    }

    /// JS: `Hxe.list` + `fD` + `pD`.
    fn list(&mut self, src: &str) -> Option<Block> {
        list_test(src)?;
        let (raw, items) = list_items(src)?;
        if !self.spend(items.iter().map(|item| item.len()).sum()) {
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        for item_text in items {
            let mut tokens = Vec::new();
            self.top = false;
            if !self.enter(super::LIST_LEVEL) {
                return None;
            }
            self.block_tokens(&item_text, &mut tokens, false);
            self.nest -= super::LIST_LEVEL;
            drop(item_text);
            if self.overflow {
                return None; // the whole lexing fails: nothing made from here on is read
            }
            out.push(ListItem { tokens });
        }
        // The raw text is made last, as a quote's is: nesting holds no copy of it per level.
        Some(Block::List {
            raw: raw.to_string(),
            items: out,
        })
    }

    /// JS: `Hxe.blockquote` with `dD`, `cD` and `uD`.
    fn blockquote(&mut self, src: &str) -> Option<Block> {
        let end = blockquote_end(src)?;
        let mut quote = Quote {
            raw: String::new(),
            tokens: Vec::new(),
        };
        let mut chunk = Cow::Borrowed(trim_trailing_newlines(&src[..end]));
        loop {
            // Only the inner text is held while it is lexed: the quote's raw text is made
            // once the inner text is gone, so that nesting holds one derived text per level,
            // never a copy of the quote beside it.
            let (inner, taken_end) = quote_lines(&chunk);
            let saved = self.top;
            self.top = true;
            if !self.enter(super::QUOTE_LEVEL) || !self.spend(inner.len()) {
                return None;
            }
            self.block_tokens(&inner, &mut quote.tokens, true);
            drop(inner);
            self.nest -= super::QUOTE_LEVEL;
            self.top = saved;
            if self.overflow {
                return None; // the whole lexing fails: nothing made from here on is read
            }
            keep_quote_raw(&mut quote, js_slice(&chunk, 0, taken_end));
            if taken_end >= chunk.len() {
                break;
            }
            let next = chunk[taken_end + 1..].to_string();
            match self.quote_continue(&mut quote, next) {
                Some(rest) => chunk = Cow::Owned(rest),
                None => break,
            }
        }
        Some(Block::Blockquote {
            raw: quote.raw,
            tokens: quote.tokens,
        })
    }

    /// JS: `uD` — lazy lines after a nested list or quote are re-lexed with it.
    fn quote_continue(&mut self, quote: &mut Quote, rest: String) -> Option<String> {
        let (last_raw, is_list) = match quote.tokens.last() {
            Some(Block::List { raw, .. }) => (raw.clone(), true),
            Some(Block::Blockquote { raw, .. }) => (raw.clone(), false),
            Some(Block::Code { .. }) => return None,
            _ => return Some(rest),
        };
        let joined = format!("{last_raw}\n{rest}");
        let merged = if is_list {
            self.list(&joined)?
        } else {
            self.blockquote(&joined)?
        };
        let merged_raw = block_raw(&merged).to_string();
        *quote.tokens.last_mut().expect("checked above") = merged;
        let keep = quote.raw.len().saturating_sub(last_raw.len());
        quote.raw = format!(
            "{}{}",
            js_slice(&quote.raw, 0, floor_char_boundary(&quote.raw, keep)),
            merged_raw
        );
        if !is_list {
            return None;
        }
        Some(
            js_slice(
                &joined,
                ceil_char_boundary(&joined, merged_raw.len()),
                joined.len(),
            )
            .to_string(),
        )
    }
}

struct Quote {
    raw: String,
    tokens: Vec<Block>,
}

/// What a tokenizer produced: a token, or a link definition (never pushed as a token).
pub(crate) enum Piece {
    Block(Block),
    /// A code block; its text (made only for the rare merge into a paragraph) is the
    /// de-indented raw text for an indented block, empty for a fenced one.
    Code {
        raw: String,
        indented: bool,
    },
    Def {
        label: String,
        raw: String,
    },
}

fn raw_len(piece: &Piece) -> usize {
    match piece {
        Piece::Block(block) => block_raw(block).len(),
        Piece::Code { raw, .. } | Piece::Def { raw, .. } => raw.len(),
    }
}

pub(crate) fn block_raw(block: &Block) -> &str {
    match block {
        Block::Space { raw }
        | Block::Code { raw }
        | Block::Heading { raw, .. }
        | Block::Hr { raw }
        | Block::Blockquote { raw, .. }
        | Block::List { raw, .. }
        | Block::Html { raw }
        | Block::Paragraph { raw, .. }
        | Block::Text { raw, .. } => raw,
    }
}

fn raw_mut(block: &mut Block) -> &mut String {
    match block {
        Block::Space { raw }
        | Block::Code { raw }
        | Block::Heading { raw, .. }
        | Block::Hr { raw }
        | Block::Blockquote { raw, .. }
        | Block::List { raw, .. }
        | Block::Html { raw }
        | Block::Paragraph { raw, .. }
        | Block::Text { raw, .. } => raw,
    }
}

/// JS: the push/merge part of `#i`.
fn push_or_merge(
    tokens: &mut Vec<Block>,
    method: Method,
    piece: Piece,
    para_open: bool,
    links: &mut HashSet<String>,
) {
    let last_kind = tokens.last().map(|last| match last {
        Block::Paragraph { .. } => Some(M::Paragraph),
        Block::Text { .. } => Some(M::Text),
        _ => None,
    });
    let last_is_para_or_text = matches!(last_kind, Some(Some(_)));
    if method == M::Space
        && raw_len(&piece) == 1
        && let Some(last) = tokens.last_mut()
    {
        // (The text of a paragraph or text token stays as it was.)
        raw_mut(last).push('\n');
        return;
    }
    let merge = match method {
        M::Code | M::Def => last_is_para_or_text,
        M::Text => last_kind == Some(Some(M::Text)),
        M::Paragraph => para_open && last_kind == Some(Some(M::Paragraph)),
        _ => false,
    };
    if merge {
        // (`text`: `None` when the piece's text is its raw text.)
        let (raw, text) = match piece {
            Piece::Block(Block::Paragraph { raw, text } | Block::Text { raw, text }) => {
                let text = match text {
                    Text::Raw(len) if len == raw.len() => None,
                    text => Some(text.of(&raw).to_owned()),
                };
                (raw, text)
            }
            Piece::Block(block) => (block_raw(&block).to_string(), None),
            Piece::Code { raw, indented } => {
                let text = if indented {
                    indented_code_text(&raw)
                } else {
                    String::new()
                };
                (raw, Some(text))
            }
            Piece::Def { raw, .. } => (raw, None),
        };
        if let Some(
            Block::Paragraph {
                raw: last_raw,
                text: last_text,
            }
            | Block::Text {
                raw: last_raw,
                text: last_text,
            },
        ) = tokens.last_mut()
        {
            let still_raw = matches!(last_text, Text::Raw(len) if *len == last_raw.len());
            if !(still_raw && text.is_none()) {
                let mut own = match std::mem::replace(last_text, Text::Raw(0)) {
                    Text::Own(own) => own,
                    Text::Raw(len) => last_raw[..len].to_owned(),
                };
                own.push('\n');
                own.push_str(text.as_deref().unwrap_or(&raw));
                *last_text = Text::Own(own);
            }
            last_raw.push('\n');
            last_raw.push_str(&raw);
            if let Text::Raw(len) = last_text {
                *len = last_raw.len();
            }
        }
        return;
    }
    match piece {
        Piece::Block(block) => tokens.push(block),
        Piece::Code { raw, .. } => tokens.push(Block::Code { raw }),
        Piece::Def { label, .. } => {
            links.insert(label);
        }
    }
}

fn match_len(len: Option<usize>) -> Option<usize> {
    len.filter(|&len| len > 0)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

// ---------------------------------------------------------------------------------------
// Setext reach (JS: AFn.blockTokens prologue)

/// JS: `OJr` on a single line.
fn is_underline_line(line: &str) -> bool {
    let i = skip_3_spaces(line, 0);
    let mark = match byte(line, i) {
        Some(mark @ (b'=' | b'-')) => mark,
        _ => return false,
    };
    let j = skip_byte(line, i, mark);
    line[j..].bytes().all(|b| b == b' ')
}

/// JS: `LJr` — a line that breaks the run between a line and an underline below it.
/// `(?:[*+-]|\d{1,9}[.)])<space>` at the start: a bullet or ordered list marker.
fn starts_with_list_marker(line: &[u8]) -> bool {
    if matches!(line.first(), Some(b'*' | b'+' | b'-')) && line.get(1) == Some(&b' ') {
        return true;
    }
    let digits = line.iter().take_while(|c| c.is_ascii_digit()).count();
    (1..=9).contains(&digits)
        && matches!(line.get(digits), Some(b'.' | b')'))
        && line.get(digits + 1) == Some(&b' ')
}

fn breaks_setext_run(line: &str) -> bool {
    if js_is_blank(line) {
        return true;
    }
    if starts_with_list_marker(line.as_bytes()) {
        return true;
    }
    // (?: {4}| {0,3}\t)
    if line.starts_with("    ") {
        return true;
    }
    let i = skip_3_spaces(line, 0);
    let after = &line[i..];
    if after.starts_with('\t') || after.starts_with("```") || after.starts_with("~~~") {
        return true;
    }
    if after.starts_with('>') || after.starts_with('#') {
        return true;
    }
    // <[^\n>]+>$
    if let Some(tag) = after.strip_prefix('<')
        && tag.len() >= 2
        && tag.ends_with('>')
        && !tag[..tag.len() - 1].contains('>')
    {
        return true;
    }
    line.contains('\u{2028}') || line.contains('\u{2029}')
}

/// `text.split(/[\n\r\u2028\u2029]/).some(OJr)`: is any line a setext underline (after up to
/// three spaces, a run of `=` or `-`, then spaces to the end of the line)? Only each line's
/// start is looked at, so a line of many dashes that is no underline (`> - > - …`, nested a
/// thousand times) is one pass, not a stop at every dash.
fn any_underline_line(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut start = 0;
    loop {
        let mut at = start;
        while at < bytes.len() && at - start < 3 && bytes[at] == b' ' {
            at += 1;
        }
        if let Some(&mark @ (b'=' | b'-')) = bytes.get(at) {
            let end = skip_byte(text, skip_byte(text, at, mark), b' ');
            if end == bytes.len() || terminator_end(bytes, end).is_some() {
                return true;
            }
        }
        let eol = next_terminator(text, start);
        match terminator_end(bytes, eol) {
            Some(next) => start = next,
            None => return false,
        }
    }
}

/// The line starts (as lengths from the end, ascending) that a setext underline below can
/// reach.
fn setext_reach(text: &str) -> Vec<usize> {
    let mut reach = Vec::new();
    if !any_underline_line(text) {
        return reach;
    }
    // Walk the lines bottom up; `in_run` (JS `y`): the lines below, up to an underline,
    // form an unbroken run.
    let mut scan_end = text.len() as isize;
    let mut in_run = false;
    while scan_end >= 0 {
        let end = scan_end as usize;
        let line_start = if end == 0 {
            0
        } else {
            memchr::memrchr(b'\n', &text.as_bytes()[..end]).map_or(0, |offset| offset + 1)
        };
        let line = &text[line_start..end];
        if in_run {
            reach.push(text.len() - line_start);
        }
        in_run = is_underline_line(line) || (in_run && !breaks_setext_run(line));
        scan_end = line_start as isize - 1;
    }
    reach
}

// ---------------------------------------------------------------------------------------
// Simple block scanners

/// JS: `yl` = `/^(?:[\t\n ]*$|[\t ]*\n(?:[\t\n ]*\n)?)/`.
fn space_end(src: &str) -> Option<usize> {
    let bytes = src.as_bytes();
    let ws = bytes
        .iter()
        .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
        .count();
    if ws == bytes.len() {
        return Some(ws);
    }
    let blanks = skip_blanks(src, 0);
    if byte(src, blanks) != Some(b'\n') {
        return None;
    }
    let after = blanks + 1;
    // (?:[\t\n ]*\n)? — greedy, backtracks to the last \n of the whitespace run.
    let run = after
        + bytes[after..]
            .iter()
            .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
            .count();
    match src[after..run].rfind('\n') {
        Some(offset) => Some(after + offset + 1),
        None => Some(after),
    }
}

/// JS: `I_` — a thematic break from `i` to the end of the line (`(?![^\n])`).
fn hr_at(src: &str, i: usize) -> Option<usize> {
    let mark = match byte(src, i) {
        Some(mark @ (b'-' | b'_' | b'*')) => mark,
        _ => return None,
    };
    let end = line_end(src, i);
    let line = &src.as_bytes()[i..end];
    let marks = line.iter().filter(|&&b| b == mark).count();
    let only = line.iter().all(|&b| b == mark || b == b' ' || b == b'\t');
    (only && marks >= 3).then_some(end)
}

/// JS: `ju` = `^ {0,3}I_\n*`.
fn hr_end(src: &str) -> Option<usize> {
    let end = hr_at(src, skip_3_spaces(src, 0))?;
    Some(skip_byte(src, end, b'\n'))
}

/// `#{1,6}(?!\S)` at `i`: end of the hashes.
fn atx_marks(src: &str, i: usize) -> Option<usize> {
    let j = skip_byte(src, i, b'#');
    let count = j - i;
    if count == 0 || count > 6 {
        return None;
    }
    match char_at(src, j) {
        Some(c) if !is_js_space(c) => None,
        _ => Some(j),
    }
}

/// JS: `L_` = `^ {0,3}#{1,6}(?!\S).*(?![^\n])\n*`.
fn heading_end(src: &str) -> Option<usize> {
    let marks_end = atx_marks(src, skip_3_spaces(src, 0))?;
    let end = dot_star(src, marks_end);
    if !at_eol(src, end) {
        return None;
    }
    Some(skip_byte(src, end, b'\n'))
}

/// JS: `nD` — an ATX heading token.
fn heading(raw: &str) -> Block {
    let first_hash = raw.find('#').unwrap_or(0);
    let marks_end = skip_byte(raw, first_hash, b'#');
    let mut text = js_trim(&raw[marks_end..]);
    // GI = /(?:^| )#+$/
    let no_hashes = text.trim_end_matches('#');
    if no_hashes.len() < text.len() && (no_hashes.is_empty() || no_hashes.ends_with(' ')) {
        text = no_hashes;
    }
    let text = js_trim(text).to_string();
    Block::Heading {
        raw: raw.into(),
        text,
    }
}

/// JS: `mD` — a setext heading token.
fn setext_heading(raw: &str) -> Block {
    let trimmed = trim_trailing_newlines(raw);
    let underline_start = trimmed.rfind('\n').map_or(0, |offset| offset + 1);
    let text = js_slice(trimmed, 0, underline_start.saturating_sub(1)).to_string();
    Block::Heading {
        raw: raw.into(),
        text,
    }
}

/// JS: `B_` = `/ {0,3}\t| {4}/y`.
fn code_indent(src: &str, i: usize) -> Option<usize> {
    let j = skip_3_spaces(src, i);
    if byte(src, j) == Some(b'\t') {
        return Some(j + 1);
    }
    src[i..].starts_with("    ").then_some(i + 4)
}

/// JS: `WP` = `/[\t\n ]*$|[\t\n ]*\n|/y`.
fn blank_tail(src: &str, i: usize) -> usize {
    let run = i + src.as_bytes()[i.min(src.len())..]
        .iter()
        .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
        .count();
    if run >= src.len() {
        return src.len();
    }
    match src[i..run].rfind('\n') {
        Some(offset) => i + offset + 1,
        None => i,
    }
}

/// JS: `Sl` — extent of an indented code block, or `None`.
fn indented_code_end(src: &str) -> Option<usize> {
    let mut end: Option<usize> = None;
    let mut pos = 0;
    loop {
        let Some(content) = code_indent(src, pos) else {
            return end;
        };
        if at_eol(src, content) {
            return end;
        }
        let eol = line_end(src, content);
        let next = if eol < src.len() {
            blank_tail(src, eol + 1)
        } else {
            eol
        };
        end = Some(next);
        if next == pos {
            return end;
        }
        pos = next;
    }
}

/// JS: `rD`/`sD` — a code token (indented or fenced).
fn code_piece(raw: &str, indented: bool) -> Piece {
    Piece::Code {
        raw: raw.into(),
        indented,
    }
}

/// JS: `rD` — the de-indented text of an indented code block.
fn indented_code_text(src: &str) -> String {
    let mut out = String::new();
    let mut pos = 0;
    while pos < src.len() {
        let eol = next_terminator(src, pos);
        let next_line = (eol + char_len_at(src, eol)).min(src.len());
        let after_spaces = skip_3_spaces(src, pos);
        let skip_one = if after_spaces - pos == 3 {
            byte(src, after_spaces) == Some(b' ')
        } else {
            after_spaces == pos && byte(src, after_spaces) == Some(b'\t')
        };
        let from = if skip_one {
            after_spaces + 1
        } else {
            after_spaces
        };
        out.push_str(js_slice(src, from, next_line));
        pos = next_line;
    }
    trim_trailing_newlines(&out).to_string()
}

/// JS: `Gu` = `OP` at 0 — end of a fence opener's marks.
fn fence_open(src: &str) -> Option<usize> {
    let i = skip_3_spaces(src, 0);
    match byte(src, i) {
        Some(b'`') => {
            let j = skip_byte(src, i, b'`');
            if j - i < 3 {
                return None;
            }
            let eol = line_end(src, j);
            (!src[j..eol].contains('`')).then_some(j)
        }
        Some(b'~') => {
            let j = skip_byte(src, i, b'~');
            (j - i >= 3).then_some(j)
        }
        _ => None,
    }
}

/// JS: `zu` — start of the closing fence line, or `None` (`marks_end`: JS `o`).
fn fence_close(src: &str, marks_end: usize) -> Option<usize> {
    let marks = js_trim_start(&src[..marks_end]);
    let mut pos = marks_end;
    while let Some(nl) = find_byte(src, pos, b'\n') {
        let j = skip_3_spaces(src, nl + 1);
        pos = nl + 1;
        if !matches!(byte(src, j), Some(b'`' | b'~')) {
            continue;
        }
        pos = j;
        if src[j..].starts_with(marks) {
            let end = j + marks.len();
            let end = end
                + src[end..]
                    .bytes()
                    .take_while(|&b| b == b'`' || b == b'~')
                    .count();
            let end = skip_byte(src, end, b' ');
            if at_eol(src, end) {
                return Some(nl + 1);
            }
        }
    }
    None
}

/// JS: `wl` — extent of a fenced code block.
fn fence_end(src: &str) -> Option<usize> {
    let marks_end = fence_open(src)?;
    Some(match fence_close(src, marks_end) {
        Some(close_start) => line_end(src, close_start),
        None => src.len(),
    })
}

/// JS: `LP` = `/ {0,3}(?:-+|=+) *(?![^\n])\n*/y` at `i`.
fn underline_at(src: &str, i: usize) -> Option<usize> {
    let j = skip_3_spaces(src, i);
    let mark = match byte(src, j) {
        Some(mark @ (b'-' | b'=')) => mark,
        _ => return None,
    };
    let end = skip_byte(src, skip_byte(src, j, mark), b' ');
    at_eol(src, end).then(|| skip_byte(src, end, b'\n'))
}

/// JS: `$P` — a "plain" line (no block start) at `i`, ending with `\n`; returns the index
/// after the `\n`.
fn plain_line(src: &str, i: usize) -> Option<usize> {
    let bytes = src.as_bytes();
    let rest = &src[i.min(src.len())..];
    let rest_bytes = rest.as_bytes();
    if starts_with_list_marker(rest_bytes) {
        return None;
    }
    if rest.starts_with("    ") {
        return None;
    }
    let j = skip_3_spaces(src, i) - i;
    let after = &rest[j..];
    if matches!(after.as_bytes().first(), Some(b'\t' | b'#' | b'>'))
        || after.starts_with("```")
        || after.starts_with("~~~")
    {
        return None;
    }
    if let Some(tag) = after.strip_prefix('<')
        && let Some(gt) = tag.find(['>', '\n'])
        && gt > 0
        && tag.as_bytes()[gt] == b'>'
        && tag.as_bytes().get(gt + 1) == Some(&b'\n')
    {
        return None;
    }
    let end = dot_star(src, i);
    (bytes.get(end) == Some(&b'\n')).then_some(end + 1)
}

/// JS: `NP` = `/[^\S\n]*\n/y` at `i`.
fn blank_line_at(src: &str, mut i: usize) -> bool {
    while let Some(c) = char_at(src, i) {
        if c == '\n' {
            return true;
        }
        if !is_js_space(c) {
            return false;
        }
        i += c.len_utf8();
    }
    false
}

/// JS: `Vu` — position of a setext underline after a run of plain lines (`Ok`), or the end
/// of the run (`Err`, the original's bitwise-not encoding).
fn setext_search_raw(src: &str) -> Result<usize, usize> {
    let mut pos = 0;
    while let Some(next) = plain_line(src, pos) {
        pos = next;
        if pos > 1 && underline_at(src, pos).is_some() {
            return Ok(pos);
        }
        if blank_line_at(src, pos) {
            break;
        }
    }
    Err(pos)
}

/// `~Vu(e)` as an `isize` (negative when no underline was found).
fn setext_search(src: &str) -> isize {
    match setext_search_raw(src) {
        Ok(pos) => pos as isize,
        Err(pos) => !(pos as isize),
    }
}

/// JS: `Ku`.
fn setext_end(src: &str) -> Option<usize> {
    let underline = setext_search_raw(src).ok()?;
    underline_at(src, underline)
}

// ---------------------------------------------------------------------------------------
// Paragraph interruption (JS: F_ and $_)

const BLOCK_TAGS: &[&str] = &[
    "address",
    "article",
    "aside",
    "base",
    "basefont",
    "blockquote",
    "body",
    "caption",
    "center",
    "col",
    "colgroup",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frame",
    "frameset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hr",
    "html",
    "iframe",
    "legend",
    "li",
    "link",
    "main",
    "menu",
    "menuitem",
    "meta",
    "nav",
    "noframes",
    "ol",
    "optgroup",
    "option",
    "p",
    "param",
    "search",
    "section",
    "summary",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "title",
    "tr",
    "track",
    "ul",
];

/// JS: `M_` at `i` (case-sensitive, no leading spaces).
fn html_interrupt(src: &str, i: usize) -> bool {
    let Some(tag) = src.get(i..).and_then(|rest| rest.strip_prefix('<')) else {
        return false;
    };
    if tag.starts_with("!--")
        || ["script", "pre", "style", "textarea"]
            .iter()
            .any(|name| tag.starts_with(name))
    {
        return true;
    }
    let tag = tag.strip_prefix('/').unwrap_or(tag);
    let name_len = tag
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        .count();
    // A listed tag that is a proper prefix of the run is followed by [a-z0-9], never by the
    // required delimiter, so checking the whole run is equivalent to the regex alternation.
    if !BLOCK_TAGS.contains(&&tag[..name_len]) {
        return false;
    }
    matches!(tag.as_bytes().get(name_len), Some(b'\n' | b' ' | b'>'))
        || tag[name_len..].starts_with("/>")
}

/// JS: `F_` at `i` — a line that interrupts a paragraph.
fn interrupts(src: &str, i: usize) -> bool {
    let j = skip_3_spaces(src, i);
    let bytes = src.as_bytes();
    let rest = &src[j..];
    let rest_bytes = rest.as_bytes();
    let hit = match rest_bytes.first() {
        Some(b'>') => true,
        Some(b'-' | b'+' | b'*') if rest_bytes.get(1) == Some(&b' ') => true,
        Some(b'1')
            if matches!(rest_bytes.get(1), Some(b')' | b'.'))
                && rest_bytes.get(2) == Some(&b' ') =>
        {
            true
        }
        Some(b'#') => atx_marks(src, j).is_some(),
        Some(b'`') => {
            let marks_end = skip_byte(src, j, b'`');
            let eol = line_end(src, marks_end);
            marks_end - j >= 3
                && !src[marks_end..eol].contains('`')
                && bytes.get(eol) == Some(&b'\n')
        }
        Some(b'~') => rest.starts_with("~~~") && bytes.get(line_end(src, j)) == Some(&b'\n'),
        _ => false,
    };
    if hit || hr_at(src, j).is_some() {
        return true;
    }
    let after_spaces = skip_byte(src, i, b' ');
    if byte(src, after_spaces) == Some(b'\n') {
        return true;
    }
    html_interrupt(src, i)
}

/// JS: `$_` (non-GFM): end of a paragraph-like run starting at `start`.
fn para_run(src: &str, start: usize) -> usize {
    let mut end = line_end(src, start);
    if end == start {
        return end;
    }
    while end + 1 < src.len() {
        let next_end = line_end(src, end + 1);
        if interrupts(src, end + 1) {
            break;
        }
        end = next_end;
    }
    end
}

/// JS: `bl`.
fn paragraph_end(src: &str) -> Option<usize> {
    let end = para_run(src, 0);
    (end > 0).then_some(end)
}

/// JS: `U_` — extent of a block quote (lines starting with `>` plus lazy lines).
fn blockquote_end(src: &str) -> Option<usize> {
    let mut end: Option<usize> = None;
    let mut pos = 0;
    while pos < src.len() {
        let j = skip_3_spaces(src, pos);
        if byte(src, j) != Some(b'>') {
            break;
        }
        let content = if byte(src, j + 1) == Some(b' ') {
            j + 2
        } else {
            j + 1
        };
        let next = (para_run(src, content) + 1).min(src.len());
        end = Some(next);
        pos = next;
    }
    end
}

/// JS: `MS` — strip the `>` marker from each line.
fn strip_quote_marks(src: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut pos = 0;
    while pos < src.len() {
        let j = skip_3_spaces(src, pos);
        let content = if byte(src, j) == Some(b'>') {
            if matches!(byte(src, j + 1), Some(b'\t' | b' ')) {
                j + 2
            } else {
                j + 1
            }
        } else {
            pos
        };
        let eol = next_terminator(src, content);
        let next = if eol >= src.len() {
            src.len()
        } else {
            eol + char_len_at(src, eol)
        };
        if pos == 0 && next == src.len() {
            // One line, one mark: the text is the line's end (nesting borrows, level by level).
            return Cow::Borrowed(&src[content..]);
        }
        out.push_str(&src[content..next]);
        pos = next.max(pos + 1);
    }
    Cow::Owned(out)
}

fn starts_quote(line: &str) -> bool {
    byte(line, skip_3_spaces(line, 0)) == Some(b'>')
}

/// JS: `cD` — the lines of a quote's next chunk: their text with the quote marks stripped,
/// and where they end (JS: `h`, never -1 here: the first line is always taken; the rest of
/// the chunk starts after it).
fn quote_lines(src: &str) -> (Cow<'_, str>, usize) {
    // JS: h = the end of the lines taken so far (-1 before the first)
    let mut taken_end: isize = -1;
    let mut text = Cow::Borrowed("");
    let mut prev_quoted = false;
    while taken_end < src.len() as isize {
        let start = (taken_end + 1) as usize;
        let line = &src[start..line_end(src, start)];
        let quoted = starts_quote(line);
        if prev_quoted && !quoted {
            break;
        }
        prev_quoted = quoted;
        if taken_end == -1 {
            text = strip_quote_marks(line);
        } else if underline_at(line, 0).is_none() {
            let text = text.to_mut();
            text.push('\n');
            text.push_str(&strip_quote_marks(line));
        } else {
            let text = text.to_mut();
            text.push_str("\n    ");
            text.push_str(js_trim_start(line));
        }
        taken_end += line.len() as isize + 1;
    }
    (text, taken_end as usize)
}

/// JS: the end of `dD` — the lines a chunk took join the quote's raw text.
fn keep_quote_raw(quote: &mut Quote, taken: &str) {
    quote.raw = match quote.raw.is_empty() {
        true => taken.to_string(),
        false => format!("{}\n{}", quote.raw, taken),
    };
}

// ---------------------------------------------------------------------------------------
// HTML blocks (JS: O_)

const RAW_TAGS: &[&str] = &["script", "pre", "style", "textarea"];

/// JS: `hl` — index after `needle` searched from `from`, or the length.
fn after_needle(src: &str, needle: &str, from: usize) -> usize {
    if from > src.len() {
        return src.len();
    }
    src[from..]
        .find(needle)
        .map_or(src.len(), |offset| from + offset + needle.len())
}

/// JS: `TP`/`gl` — end of a tag name (`[A-Z][-\w]*`, case-insensitive) at `i`.
fn tag_name_end(src: &str, i: usize) -> usize {
    if !byte(src, i).is_some_and(|b| b.is_ascii_alphabetic()) {
        return i;
    }
    let mut j = i + 1;
    while byte(src, j).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        j += 1;
    }
    j
}

/// JS: `A_` — end of an HTML block that runs to the next blank line (`\n[\t\n ]*\n`).
fn until_blank_line(src: &str, from: usize) -> usize {
    let bytes = src.as_bytes();
    let mut i = from;
    while let Some(nl) = find_byte(src, i, b'\n') {
        let mut blanks_end = nl + 1;
        while matches!(bytes.get(blanks_end), Some(b'\t' | b' ')) {
            blanks_end += 1;
        }
        // [\t\n ]* is greedy and may span lines; it needs a final \n.
        let run_end = blanks_end
            + bytes[blanks_end..]
                .iter()
                .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
                .count();
        if let Some(last_nl) = src[nl + 1..run_end].rfind('\n') {
            return nl + 1 + last_nl + 1;
        }
        i = nl + 1;
    }
    src.len()
}

/// JS: `bP` repeated (`Gn`) — attributes with spaces only.
fn attrs_spaces(src: &str, mut i: usize) -> usize {
    loop {
        let Some(j) = attr_at(src, i, false) else {
            return i;
        };
        if j <= i {
            return i;
        }
        i = j;
    }
}

/// JS: `wP` (`loose`, any whitespace) or `bP` (spaces, no newlines in quoted values).
pub(crate) fn attr_at(src: &str, i: usize, loose: bool) -> Option<usize> {
    let bytes = src.as_bytes();
    let mut j = if loose {
        skip_js_space(src, i)
    } else {
        skip_byte(src, i, b' ')
    };
    if j == i {
        return None;
    }
    if !bytes
        .get(j)
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b':' | b'_'))
    {
        return None;
    }
    j += 1;
    while bytes
        .get(j)
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b':' | b'_'))
    {
        j += 1;
    }
    let eq = if loose {
        skip_js_space(src, j)
    } else {
        skip_byte(src, j, b' ')
    };
    if bytes.get(eq) != Some(&b'=') {
        return Some(j);
    }
    let value = if loose {
        skip_js_space(src, eq + 1)
    } else {
        skip_byte(src, eq + 1, b' ')
    };
    let value_end = match bytes.get(value) {
        Some(quote @ (b'"' | b'\'')) => {
            let close = src[value + 1..]
                .find(*quote as char)
                .map(|offset| value + 1 + offset);
            match close {
                Some(close) if loose || !src[value + 1..close].contains('\n') => Some(close + 1),
                _ => None,
            }
        }
        Some(_) => {
            let len = src[value..]
                .chars()
                .take_while(|&c| {
                    !is_js_space(c) && !matches!(c, '"' | '\'' | '<' | '=' | '>' | '`')
                })
                .map(char::len_utf8)
                .sum::<usize>();
            (len > 0).then_some(value + len)
        }
        None => None,
    };
    Some(value_end.unwrap_or(j))
}

/// JS: `O_` — extent of an HTML block starting here, or `None`.
fn html_end(src: &str) -> Option<usize> {
    let open = skip_3_spaces(src, 0);
    if byte(src, open) != Some(b'<') {
        return None;
    }
    // JS: r = the position after the `<`
    let after_lt = open + 1;
    let nl_run = |i: usize| skip_byte(src, i, b'\n');
    match byte(src, after_lt) {
        Some(b'?') => return Some(nl_run(after_needle(src, "?>", after_lt + 1))),
        Some(b'!') => {
            if src[after_lt + 1..].starts_with("--") {
                return Some(nl_run(line_end(
                    src,
                    after_needle(src, "-->", after_lt + 1),
                )));
            }
            if tag_name_end(src, after_lt + 1) > after_lt + 1 {
                return Some(nl_run(after_needle(src, ">", after_lt)));
            }
            let upper = js_slice(src, after_lt + 1, after_lt + 8).to_ascii_uppercase();
            return (upper == "[CDATA[").then(|| nl_run(after_needle(src, "]]>", after_lt + 8)));
        }
        _ => {}
    }
    let closing = byte(src, after_lt) == Some(b'/');
    let name_start = if closing { after_lt + 1 } else { after_lt };
    let name_end = tag_name_end(src, name_start);
    let name = src[name_start..name_end].to_ascii_lowercase();
    let after_name = char_at(src, name_end);
    if RAW_TAGS.iter().any(|tag| name.starts_with(tag)) {
        let ok = !closing
            && RAW_TAGS.contains(&name.as_str())
            && (after_name == Some('>') || after_name.is_some_and(is_js_space));
        return ok.then(|| raw_tag_end(src, &name, name_end));
    }
    if BLOCK_TAGS.contains(&name.as_str()) {
        let delim = matches!(byte(src, name_end), Some(b'\n' | b' ' | b'>'))
            || src[name_end..].starts_with("/>");
        if delim {
            return Some(until_blank_line(src, name_end + 1));
        }
    }
    if name.is_empty() {
        return None;
    }
    let tag_end = if closing {
        let j = skip_js_space(src, name_end);
        (byte(src, j) == Some(b'>')).then_some(j + 1)
    } else {
        let j = skip_byte(src, attrs_spaces(src, name_end), b' ');
        if byte(src, j) == Some(b'/') && byte(src, j + 1) == Some(b'>') {
            Some(j + 2)
        } else {
            (byte(src, j) == Some(b'>')).then_some(j + 1)
        }
    }?;
    at_eol(src, skip_blanks(src, tag_end)).then(|| until_blank_line(src, tag_end))
}

/// JS: `MP` — a raw-text block (`<pre>`, `<script>`…) ends on the line of its closing tag.
fn raw_tag_end(src: &str, name: &str, from: usize) -> usize {
    let close = format!("</{name}>");
    let mut next_close = src[from..].find("</").map(|offset| from + offset);
    while let Some(i) = next_close {
        if js_slice(src, i, i + close.len()).to_ascii_lowercase() == close {
            return skip_byte(src, line_end(src, i), b'\n');
        }
        next_close = src[i + 2..].find("</").map(|offset| i + 2 + offset);
    }
    src.len()
}

// ---------------------------------------------------------------------------------------
// Link reference definitions (JS: lS, dS, Qu, aS)

/// JS: `Tl` — end of a link label `[...]` whose text starts at `start` (index of `]`).
pub(crate) fn label_end(src: &str, start: usize) -> Option<usize> {
    // XP = /[^[\\\]]+|\\./y, repeated.
    let bytes = src.as_bytes();
    let mut pos = start;
    loop {
        match bytes.get(pos) {
            Some(b'\\') if char_at(src, pos + 1).is_some_and(|c| !is_js_line_terminator(c)) => {
                pos += 1 + char_len_at(src, pos + 1)
            }
            Some(b'[' | b']' | b'\\') | None => break,
            Some(_) => pos += char_len_at(src, pos),
        }
    }
    (bytes.get(pos) == Some(&b']') && skip_js_space(src, start) < pos).then_some(pos)
}

/// JS: `AS` — normalise a label (`split(/\s+/).join(" ").toLowerCase()`).
pub(crate) fn normalize_label(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    let mut in_space = false;
    for c in label.chars() {
        if is_js_space(c) {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out.to_lowercase()
}

/// JS: `dS` — skip spaces, one newline and the next line's blanks.
fn def_gap(src: &str, pos: usize) -> usize {
    let after_spaces = skip_byte(src, pos, b' ');
    if byte(src, after_spaces) == Some(b'\n') {
        skip_blanks(src, after_spaces + 1)
    } else {
        after_spaces
    }
}

/// JS: `Qu` — spaces then end of line; returns the index after the newlines.
fn def_line_end(src: &str, pos: usize) -> Option<usize> {
    let after_spaces = skip_byte(src, pos, b' ');
    at_eol(src, after_spaces).then(|| skip_byte(src, after_spaces, b'\n'))
}

/// JS: `Ju` — the closing quote of a title, with backslash escapes and a validity check.
pub(super) fn title_close(
    src: &str,
    open: usize,
    close: u8,
    ok: impl Fn(&str, usize) -> bool,
) -> Option<usize> {
    let bytes = src.as_bytes();
    let find = |from: usize| {
        bytes
            .get(from..)
            .and_then(|tail| tail.iter().position(|&c| c == close))
            .map(|offset| from + offset)
    };
    let mut next_close = find(open + 1);
    let mut found: Option<usize> = None;
    while let Some(i) = next_close {
        found = Some(i);
        if i == open + 1 || bytes[i - 1] != b'\\' {
            break;
        }
        next_close = find(i + 1);
    }
    let mut close_at = found?;
    while close_at > open && !ok(src, close_at + 1) {
        match bytes[..close_at].iter().rposition(|&c| c == close) {
            Some(prev) => close_at = prev,
            None => return None,
        }
    }
    (close_at > open).then_some(close_at)
}

/// JS: `aS` — destination done (it ends at `dest_end`, JS `h`), parse the optional title;
/// returns the definition length.
fn def_tail(src: &str, dest_end: usize) -> Option<usize> {
    let title_start = def_gap(src, dest_end);
    let mut title_end: Option<usize> = None;
    if title_start > dest_end {
        match byte(src, title_start) {
            Some(b'"') => {
                title_end = title_close(src, title_start, b'"', |src, pos| {
                    def_line_end(src, pos).is_some()
                })
            }
            Some(b'\'') => {
                title_end = src[title_start + 1..]
                    .find('\'')
                    .map(|offset| title_start + 1 + offset);
                if let Some(close) = title_end
                    && src[title_start..close].contains("\n\n")
                {
                    title_end = None;
                }
            }
            Some(b'(') => {
                let paren = src[title_start + 1..]
                    .find(['(', ')'])
                    .map(|offset| title_start + 1 + offset);
                title_end = paren.filter(|&paren| byte(src, paren) == Some(b')'));
            }
            _ => {}
        }
    }
    if let Some(end) = title_end.and_then(|title_end| def_line_end(src, title_end + 1)) {
        return Some(end);
    }
    def_line_end(src, dest_end)
}

/// JS: `lS` — a link reference definition: its normalised label and length.
fn def(src: &str) -> Option<(String, usize)> {
    let open = skip_3_spaces(src, 0);
    if byte(src, open) != Some(b'[') {
        return None;
    }
    let label_close = label_end(src, open + 1)?;
    if label_close <= open + 1 || byte(src, label_close + 1) != Some(b':') {
        return None;
    }
    let label = normalize_label(&src[open + 1..label_close]);
    let dest_start = def_gap(src, label_close + 2);
    if byte(src, dest_start) != Some(b'<') {
        let dest_end = dest_start
            + src[dest_start..]
                .chars()
                .take_while(|&c| !is_js_space(c))
                .map(char::len_utf8)
                .sum::<usize>();
        if dest_end == dest_start {
            return None;
        }
        return def_tail(src, dest_end).map(|len| (label, len));
    }
    let eol = next_terminator(src, dest_start);
    let mut next_gt = src[dest_start..]
        .find('>')
        .map(|offset| dest_start + offset);
    while let Some(gt) = next_gt.filter(|&gt| gt < eol) {
        if let Some(len) = def_tail(src, gt + 1) {
            return Some((label, len));
        }
        next_gt = src[gt + 1..].find('>').map(|offset| gt + 1 + offset);
    }
    None
}

// ---------------------------------------------------------------------------------------
// Lists (JS: H_, xS, vS, NI, fD)

/// JS: `H_` test.
fn list_test(src: &str) -> Option<()> {
    let j = marker_end(src, skip_3_spaces(src, 0))?;
    let bytes = src.as_bytes();
    // (?:[\t ][^\n]+)?(?![^\n])
    if at_eol(src, j) {
        return Some(());
    }
    if matches!(bytes.get(j), Some(b'\t' | b' ')) && j + 1 < bytes.len() && bytes[j + 1] != b'\n' {
        return Some(());
    }
    None
}

/// JS: `CI` = `/ {0,3}(?:\d{1,9}[).]|[-+*])(?![^\t\n ])/y` at `pos`: end of the marker.
fn list_marker(src: &str, pos: usize) -> Option<usize> {
    let j = marker_end(src, skip_3_spaces(src, pos))?;
    matches!(src.as_bytes().get(j), None | Some(b'\t' | b'\n' | b' ')).then_some(j)
}

/// `[-+*]` or `\d{1,9}[.)]` at `i`: the index after the list marker.
fn marker_end(src: &str, i: usize) -> Option<usize> {
    let bytes = src.as_bytes();
    match bytes.get(i) {
        Some(b'-' | b'+' | b'*') => Some(i + 1),
        Some(c) if c.is_ascii_digit() => {
            let digits = bytes[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            (digits <= 9 && matches!(bytes.get(i + digits), Some(b')' | b'.')))
                .then_some(i + digits + 1)
        }
        _ => None,
    }
}

/// JS: `TI` at `pos` on a single line (`$` is the end of the line).
fn ends_lazy_run(line: &str, pos: usize) -> bool {
    let rest = &line[pos.min(line.len())..];
    if rest.starts_with('#') || rest.starts_with("```") || rest.starts_with("~~~") {
        return true;
    }
    let mark = match rest.as_bytes().first() {
        Some(mark @ (b'-' | b'_' | b'*')) => *mark,
        _ => return false,
    };
    // c *c *c[c ]*$ (spaces only, not tabs)
    let marks = rest.bytes().filter(|&b| b == mark).count();
    rest.bytes().all(|b| b == mark || b == b' ') && marks >= 3
}

/// JS: `AI` (case-insensitive) at `indent` on a line: a block start that ends a list item.
fn item_breaker(line: &str, indent: usize) -> bool {
    if ends_lazy_run(line, indent) {
        return true;
    }
    let rest = &line[indent.min(line.len())..];
    if rest.starts_with("<!--") {
        return true;
    }
    if let Some(tag) = rest.strip_prefix('<') {
        // <[A-Z].*>  — a letter, then `.*` greedy back to the last '>' before a terminator.
        if tag
            .as_bytes()
            .first()
            .is_some_and(|b| b.is_ascii_alphabetic())
        {
            let end = dot_star(tag, 0);
            if tag[1..end].contains('>') {
                return true;
            }
        }
    }
    let bytes = rest.as_bytes();
    let marker_len = match bytes.first() {
        Some(b'-' | b'+' | b'*') => 1,
        Some(c) if c.is_ascii_digit() => {
            let digits = bytes.iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 9 || !matches!(bytes.get(digits), Some(b')' | b'.')) {
                return false;
            }
            digits + 1
        }
        _ => return false,
    };
    matches!(bytes.get(marker_len), None | Some(b'\t' | b' '))
}

/// JS: `LI` = `/^(?: {0,3}\t| {4})[\t ]*[^\t ]/`.
fn looks_indented(line: &str) -> bool {
    let Some(i) = code_indent(line, 0) else {
        return false;
    };
    let j = skip_blanks(line, i);
    j < line.len()
}

/// JS: `NI` — may a lazy line continue after `prev`?
fn allows_lazy(prev: &str, max_indent: usize) -> bool {
    let indent = first_non_space(prev);
    !looks_indented(prev) && (indent > max_indent || !ends_lazy_run(prev, indent))
}

struct ItemScan<'a> {
    end: usize,
    /// Borrowed from the list's text while the item is the rest of its marker line.
    content: Cow<'a, str>,
}

/// JS: `vS` — one list item starting at `start` whose marker ends at `after_marker`.
fn list_item(src: &str, start: usize, after_marker: usize) -> ItemScan<'_> {
    let mut eol = line_end(src, after_marker);
    let after_tabs = after_marker
        + src.as_bytes()[after_marker..]
            .iter()
            .take_while(|&&b| b == b'\t')
            .count();
    // JS: y = the previous line's text (first the rest of the marker line)
    let mut prev_line: Cow<str> = Cow::Borrowed(js_slice(src, after_tabs, eol));
    if after_tabs > after_marker {
        prev_line = Cow::Owned(format!(
            "{}{}",
            " ".repeat(3 * (after_tabs - after_marker)),
            prev_line
        ));
    }
    let mut blank_seen = js_is_blank(&prev_line);
    let mut width = after_marker - start;
    let mut content: Cow<str> = Cow::Borrowed("");
    if blank_seen {
        width += 1;
    } else {
        let spaces = skip_byte(src, after_marker, b' ') - after_marker;
        let indent = if spaces > 4 { 1 } else { spaces };
        content = match &prev_line {
            Cow::Borrowed(line) => Cow::Borrowed(skip_utf16_units(line, indent)),
            Cow::Owned(line) => Cow::Owned(skip_utf16_units(line, indent).to_owned()),
        };
        width += indent;
    }
    if blank_seen {
        let from = (eol + 1).min(src.len());
        let j = skip_blanks(src, from);
        if at_eol(src, j) {
            let end = if byte(src, j) == Some(b'\n') {
                j + 1
            } else {
                j
            };
            return ItemScan { end, content };
        }
    }
    let max_indent = 3.min(width.saturating_sub(1));
    while eol + 1 < src.len() {
        let line_start = eol + 1;
        let end = line_end(src, line_start);
        let line = &src[line_start..end];
        let indent = first_non_space(line);
        if indent <= max_indent && item_breaker(line, indent) {
            break;
        }
        let expanded: Cow<str> = if line.contains('\t') {
            Cow::Owned(line.replace('\t', "    "))
        } else {
            Cow::Borrowed(line)
        };
        let blank = js_is_blank(line);
        let dedented: Cow<str> = match expanded {
            Cow::Borrowed(borrowed) => Cow::Borrowed(skip_utf16_units(borrowed, width)),
            Cow::Owned(ref owned) => Cow::Owned(skip_utf16_units(owned, width).to_string()),
        };
        if blank || first_non_space(&expanded) >= width {
            let content = content.to_mut();
            content.push('\n');
            content.push_str(&dedented);
        } else if blank_seen || !allows_lazy(&prev_line, max_indent) {
            break;
        } else {
            let content = content.to_mut();
            content.push('\n');
            content.push_str(line);
        }
        blank_seen |= blank;
        prev_line = dedented;
        eol = end;
    }
    // (JS also reports whether the item ends in a blank line; that only decides "loose"
    // lists, which change nothing Claude Code outputs, so it is not kept.)
    ItemScan {
        end: (eol + 1).min(src.len()),
        content,
    }
}

/// JS: `fD` — the list's raw text and each item's text (the items' raw texts are not kept:
/// nothing reads them).
fn list_items(src: &str) -> Option<(&str, Vec<Cow<'_, str>>)> {
    let mut bullet: Option<u8> = None;
    let mut items: Vec<Cow<str>> = Vec::new();
    let mut pos = 0;
    while pos < src.len() {
        let Some(after_marker) = list_marker(src, pos) else {
            break;
        };
        let mark = src.as_bytes()[after_marker - 1];
        let first_mark = *bullet.get_or_insert(mark);
        if mark != first_mark || hr_end(&src[pos..]).is_some() {
            break;
        }
        let scan = list_item(src, pos, after_marker);
        items.push(scan.content);
        pos = scan.end.max(pos + 1);
    }
    let last = items.last_mut()?;
    match last {
        Cow::Borrowed(text) => *text = js_trim_end(text),
        Cow::Owned(text) => text.truncate(js_trim_end(text).len()),
    }
    Some((js_trim_end(&src[..pos.min(src.len())]), items))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `any_underline_line` as it was before it looked at line starts only: every `=` or `-`,
    /// then whether a line starts before it (after up to three spaces). Kept as the reference
    /// the new scan is compared with.
    fn any_underline_line_by_marks(text: &str) -> bool {
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(offset) = bytes
            .get(from..)
            .and_then(|tail| memchr::memchr2(b'=', b'-', tail))
        {
            let at = from + offset;
            let mark = bytes[at];
            let mut start = at;
            while start > 0 && at - start < 3 && bytes[start - 1] == b' ' {
                start -= 1;
            }
            let starts_line = start == 0
                || matches!(bytes[start - 1], b'\n' | b'\r')
                || (start >= 3 && terminator_end(bytes, start - 3) == Some(start));
            // The run of marks, then spaces to the end of the line.
            let run_end = skip_byte(text, at, mark);
            if starts_line {
                let end = skip_byte(text, run_end, b' ');
                if end == bytes.len() || terminator_end(bytes, end).is_some() {
                    return true;
                }
            }
            from = run_end;
        }
        false
    }

    #[test]
    fn underline_lines_are_found_as_by_every_mark() {
        // Every text of up to 7 characters over the ones that matter, and a few long ones.
        let alphabet = ['-', '=', ' ', '\n', '\r', '\u{2028}', 'a', '>'];
        let mut texts: Vec<String> = vec![String::new()];
        for _ in 0..7 {
            let longer: Vec<String> = texts
                .iter()
                .filter(|t| t.chars().count() == texts.last().unwrap().chars().count())
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(longer);
        }
        texts.push("> - ".repeat(1000));
        texts.push(format!("{}\n   ---  ", "> - ".repeat(1000)));
        texts.push(format!("{}\u{2029}==", "a".repeat(100)));
        for text in &texts {
            assert_eq!(
                any_underline_line(text),
                any_underline_line_by_marks(text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_one_line_quote_borrows_its_text_and_any_other_is_made_the_same() {
        let nested = "> ".repeat(50);
        let mut level: Cow<str> = Cow::Borrowed(&nested);
        for depth in (0..50).rev() {
            let (inner, _) = quote_lines(&level);
            assert!(matches!(inner, Cow::Borrowed(_)), "depth {depth}");
            assert_eq!(inner, "> ".repeat(depth));
            level = Cow::Owned(inner.into_owned());
        }
        // A JS line terminator inside the line: the text is made, piece by piece.
        assert_eq!(strip_quote_marks("> a\u{2028}> b"), "a\u{2028}b");
        assert!(matches!(strip_quote_marks("> a\u{2028}> b"), Cow::Owned(_)));
        // Several lines: made, each line's mark taken off.
        let (inner, end) = quote_lines("> a\n>b\n\nc");
        assert_eq!((inner.as_ref(), end), ("a\nb", 6));
    }
}
