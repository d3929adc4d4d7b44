//! Block-level tokenizer: a line-by-line port of the block half of Claude Code's markdown
//! lexer (a linear-time rewrite of `marked`, run with `gfm: false`).
//!
//! Only what decides Claude Code's output is kept: token kinds, `raw` text (the comment
//! stripper rebuilds a file from top-level raws) and the text handed to the inline lexer.
//! The JavaScript names are kept in comments (`// JS: Sl`) so each function can be compared
//! with its original.

use std::borrow::Cow;
use std::collections::HashSet;

use super::scan::*;
use super::{Block, ListItem};

/// Lexer state shared by the block and inline passes (JS: the `Wze` instance).
pub(crate) struct Lexer {
    /// Labels of link reference definitions (JS: `tokens.links`); first definition wins.
    pub(crate) links: HashSet<String>,
    top: bool,
    /// JS: `noSetextUntil` (a remaining-length bound, `usize::MAX` for Infinity).
    no_setext_until: usize,
    /// JS: `CFn.lexed` — for each active `blockTokens` call, the line starts (as lengths
    /// from the end) that a setext underline below can reach.
    reach: Vec<HashSet<usize>>,
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
fn dispatch(c: Option<u8>) -> &'static [Method] {
    match c {
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
        for &m in dispatch(first) {
            if m == M::Paragraph && !self.top {
                continue;
            }
            if let Some(tok) = self.run(m, rest, prev_nl) {
                return Some((m, tok));
            }
        }
        None
    }

    fn run(&mut self, m: Method, e: &str, prev_nl: bool) -> Option<Piece> {
        match m {
            M::Space => {
                match_len(space_end(e)).map(|n| Piece::Block(Block::Space { raw: e[..n].into() }))
            }
            M::Code => indented_code_end(e)
                .filter(|&n| n > 0)
                .map(|n| code_piece(&e[..n], true)),
            M::Fences => fence_end(e)
                .filter(|&n| n > 0)
                .map(|n| code_piece(&e[..n], false)),
            M::Heading => heading_end(e)
                .filter(|&n| n > 0)
                .map(|n| Piece::Block(heading(&e[..n]))),
            M::Hr => hr_end(e).filter(|&n| n > 0).map(|n| {
                Piece::Block(Block::Hr {
                    raw: trim_trailing_newlines(&e[..n]).into(),
                })
            }),
            M::Paragraph => paragraph_end(e).filter(|&n| n > 0).map(|n| {
                let raw = e[..n].to_string();
                Piece::Block(Block::Paragraph {
                    text: raw.clone(),
                    raw,
                    inline: Vec::new(),
                })
            }),
            M::Html => html_end(e)
                .filter(|&n| n > 0)
                .map(|n| Piece::Block(Block::Html { raw: e[..n].into() })),
            M::Text => {
                let n = e.find('\n').unwrap_or(e.len());
                (n > 0).then(|| {
                    let raw = e[..n].to_string();
                    Piece::Block(Block::Text {
                        text: raw.clone(),
                        raw,
                        inline: Vec::new(),
                    })
                })
            }
            M::Def => def(e).map(|(label, len)| Piece::Def {
                label,
                raw: e[..len].into(),
            }),
            M::Lheading => self.lheading(e, prev_nl).map(Piece::Block),
            M::Blockquote => self.blockquote(e).map(Piece::Block),
            M::List => self.list(e).map(Piece::Block),
        }
    }

    /// JS: `CFn.lheading` + `Hxe.lheading`.
    fn lheading(&mut self, e: &str, prev_nl: bool) -> Option<Block> {
        let in_reach = self.reach.last().is_some_and(|r| r.contains(&e.len()));
        if !in_reach && prev_nl {
            return None;
        }
        if e.len() > self.no_setext_until {
            return None;
        }
        if let Some(end) = setext_end(e) {
            return Some(setext_heading(&e[..end]));
        }
        if !self.top {
            let v = setext_search(e);
            // JS: e.length - ~Vu(e); Vu is negative here (no underline found).
            self.no_setext_until = e.len().saturating_sub(!v as usize);
        }
        None
    }

    /// JS: `Hxe.list` + `fD` + `pD`.
    fn list(&mut self, e: &str) -> Option<Block> {
        list_test(e)?;
        let (raw, items) = list_items(e)?;
        if !self.spend(items.iter().map(|(_, t)| t.len()).sum()) {
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        for (_item_raw, item_text) in items {
            let mut tokens = Vec::new();
            self.top = false;
            if !self.enter(super::LIST_LEVEL) {
                return None;
            }
            self.block_tokens(&item_text, &mut tokens, false);
            self.nest -= super::LIST_LEVEL;
            drop(item_text);
            out.push(ListItem { tokens });
        }
        Some(Block::List { raw, items: out })
    }

    /// JS: `Hxe.blockquote` with `dD`, `cD` and `uD`.
    fn blockquote(&mut self, e: &str) -> Option<Block> {
        let end = blockquote_end(e)?;
        let mut quote = Quote {
            raw: String::new(),
            tokens: Vec::new(),
        };
        let mut rest = Some(trim_trailing_newlines(&e[..end]).to_string());
        while let Some(r) = rest.take() {
            let (inner, next) = quote_chunk(&mut quote, &r);
            let saved = self.top;
            self.top = true;
            if !self.enter(super::QUOTE_LEVEL) || !self.spend(inner.len()) {
                return None;
            }
            self.block_tokens(&inner, &mut quote.tokens, true);
            self.nest -= super::QUOTE_LEVEL;
            self.top = saved;
            rest = match next {
                Some(n) => self.quote_continue(&mut quote, n),
                None => None,
            };
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
        let y = format!("{last_raw}\n{rest}");
        let k = if is_list {
            self.list(&y)?
        } else {
            self.blockquote(&y)?
        };
        let k_raw = block_raw(&k).to_string();
        *quote.tokens.last_mut().expect("checked above") = k;
        let keep = quote.raw.len().saturating_sub(last_raw.len());
        quote.raw = format!(
            "{}{}",
            js_slice(&quote.raw, 0, floor_char_boundary(&quote.raw, keep)),
            k_raw
        );
        if !is_list {
            return None;
        }
        Some(js_slice(&y, ceil_char_boundary(&y, k_raw.len()), y.len()).to_string())
    }
}

struct Quote {
    raw: String,
    tokens: Vec<Block>,
}

/// What a tokenizer produced: a token, or a link definition (never pushed as a token).
pub(crate) enum Piece {
    Block(Block),
    /// A code block carries its text for the rare merge into a paragraph.
    Code {
        raw: String,
        text: String,
    },
    Def {
        label: String,
        raw: String,
    },
}

fn raw_len(p: &Piece) -> usize {
    match p {
        Piece::Block(b) => block_raw(b).len(),
        Piece::Code { raw, .. } | Piece::Def { raw, .. } => raw.len(),
    }
}

pub(crate) fn block_raw(b: &Block) -> &str {
    match b {
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

fn raw_mut(b: &mut Block) -> &mut String {
    match b {
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
    let last_kind = tokens.last().map(|t| match t {
        Block::Paragraph { .. } => Some(M::Paragraph),
        Block::Text { .. } => Some(M::Text),
        _ => None,
    });
    let last_is_para_or_text = matches!(last_kind, Some(Some(_)));
    if method == M::Space
        && raw_len(&piece) == 1
        && let Some(last) = tokens.last_mut()
    {
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
        let (raw, text) = match piece {
            Piece::Block(b) => {
                let raw = block_raw(&b).to_string();
                let text = match b {
                    Block::Paragraph { text, .. } | Block::Text { text, .. } => text,
                    _ => raw.clone(),
                };
                (raw, text)
            }
            Piece::Code { raw, text } => (raw, text),
            Piece::Def { raw, .. } => (raw.clone(), raw),
        };
        if let Some(
            Block::Paragraph {
                raw: r, text: t, ..
            }
            | Block::Text {
                raw: r, text: t, ..
            },
        ) = tokens.last_mut()
        {
            r.push('\n');
            r.push_str(&raw);
            t.push('\n');
            t.push_str(&text);
        }
        return;
    }
    match piece {
        Piece::Block(b) => tokens.push(b),
        Piece::Code { raw, .. } => tokens.push(Block::Code { raw }),
        Piece::Def { label, .. } => {
            links.insert(label);
        }
    }
}

fn match_len(n: Option<usize>) -> Option<usize> {
    n.filter(|&n| n > 0)
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
    let c = match byte(line, i) {
        Some(c @ (b'=' | b'-')) => c,
        _ => return false,
    };
    let j = skip_byte(line, i, c);
    line[j..].bytes().all(|b| b == b' ')
}

/// JS: `LJr` — a line that breaks the run between a line and an underline below it.
/// `(?:[*+-]|\d{1,9}[.)])<space>` at the start: a bullet or ordered list marker.
fn starts_with_list_marker(b: &[u8]) -> bool {
    if matches!(b.first(), Some(b'*' | b'+' | b'-')) && b.get(1) == Some(&b' ') {
        return true;
    }
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    (1..=9).contains(&digits)
        && matches!(b.get(digits), Some(b'.' | b')'))
        && b.get(digits + 1) == Some(&b' ')
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
    line.contains(['\u{2028}', '\u{2029}'])
}

fn setext_reach(text: &str) -> HashSet<usize> {
    let mut reach = HashSet::new();
    let any = text.split(is_js_line_terminator).any(is_underline_line);
    if !any {
        return reach;
    }
    let mut h = text.len() as isize;
    let mut y = false;
    while h >= 0 {
        let hu = h as usize;
        let k = if hu == 0 {
            0
        } else {
            text[..hu].rfind('\n').map_or(0, |p| p + 1)
        };
        let line = &text[k..hu];
        if y {
            reach.insert(text.len() - k);
        }
        y = is_underline_line(line) || (y && !breaks_setext_run(line));
        h = k as isize - 1;
    }
    reach
}

// ---------------------------------------------------------------------------------------
// Simple block scanners

/// JS: `yl` = `/^(?:[\t\n ]*$|[\t ]*\n(?:[\t\n ]*\n)?)/`.
fn space_end(e: &str) -> Option<usize> {
    let b = e.as_bytes();
    let ws = b
        .iter()
        .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
        .count();
    if ws == b.len() {
        return Some(ws);
    }
    let blanks = skip_blanks(e, 0);
    if byte(e, blanks) != Some(b'\n') {
        return None;
    }
    let after = blanks + 1;
    // (?:[\t\n ]*\n)? — greedy, backtracks to the last \n of the whitespace run.
    let run = after
        + b[after..]
            .iter()
            .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
            .count();
    match e[after..run].rfind('\n') {
        Some(p) => Some(after + p + 1),
        None => Some(after),
    }
}

/// JS: `I_` — a thematic break from `i` to the end of the line (`(?![^\n])`).
fn hr_at(e: &str, i: usize) -> Option<usize> {
    let c = match byte(e, i) {
        Some(c @ (b'-' | b'_' | b'*')) => c,
        _ => return None,
    };
    let end = line_end(e, i);
    let line = &e.as_bytes()[i..end];
    let marks = line.iter().filter(|&&b| b == c).count();
    let only = line.iter().all(|&b| b == c || b == b' ' || b == b'\t');
    (only && marks >= 3).then_some(end)
}

/// JS: `ju` = `^ {0,3}I_\n*`.
fn hr_end(e: &str) -> Option<usize> {
    let end = hr_at(e, skip_3_spaces(e, 0))?;
    Some(skip_byte(e, end, b'\n'))
}

/// `#{1,6}(?!\S)` at `i`: end of the hashes.
fn atx_marks(e: &str, i: usize) -> Option<usize> {
    let j = skip_byte(e, i, b'#');
    let n = j - i;
    if n == 0 || n > 6 {
        return None;
    }
    match char_at(e, j) {
        Some(c) if !is_js_space(c) => None,
        _ => Some(j),
    }
}

/// JS: `L_` = `^ {0,3}#{1,6}(?!\S).*(?![^\n])\n*`.
fn heading_end(e: &str) -> Option<usize> {
    let j = atx_marks(e, skip_3_spaces(e, 0))?;
    let end = dot_star(e, j);
    if !at_eol(e, end) {
        return None;
    }
    Some(skip_byte(e, end, b'\n'))
}

/// JS: `nD` — an ATX heading token.
fn heading(raw: &str) -> Block {
    let r = raw.find('#').unwrap_or(0);
    let h = skip_byte(raw, r, b'#');
    let mut text = js_trim(&raw[h..]);
    // GI = /(?:^| )#+$/
    let no_hashes = text.trim_end_matches('#');
    if no_hashes.len() < text.len() && (no_hashes.is_empty() || no_hashes.ends_with(' ')) {
        text = no_hashes;
    }
    let text = js_trim(text).to_string();
    Block::Heading {
        raw: raw.into(),
        text,
        inline: Vec::new(),
    }
}

/// JS: `mD` — a setext heading token.
fn setext_heading(raw: &str) -> Block {
    let r = trim_trailing_newlines(raw);
    let h = r.rfind('\n').map_or(0, |p| p + 1);
    let text = js_slice(r, 0, h.saturating_sub(1)).to_string();
    Block::Heading {
        raw: raw.into(),
        text,
        inline: Vec::new(),
    }
}

/// JS: `B_` = `/ {0,3}\t| {4}/y`.
fn code_indent(e: &str, i: usize) -> Option<usize> {
    let j = skip_3_spaces(e, i);
    if byte(e, j) == Some(b'\t') {
        return Some(j + 1);
    }
    e[i..].starts_with("    ").then_some(i + 4)
}

/// JS: `WP` = `/[\t\n ]*$|[\t\n ]*\n|/y`.
fn blank_tail(e: &str, i: usize) -> usize {
    let run = i + e.as_bytes()[i.min(e.len())..]
        .iter()
        .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
        .count();
    if run >= e.len() {
        return e.len();
    }
    match e[i..run].rfind('\n') {
        Some(p) => i + p + 1,
        None => i,
    }
}

/// JS: `Sl` — extent of an indented code block, or `None`.
fn indented_code_end(e: &str) -> Option<usize> {
    let mut o: Option<usize> = None;
    let mut r = 0;
    loop {
        let Some(h) = code_indent(e, r) else { return o };
        if at_eol(e, h) {
            return o;
        }
        let g = line_end(e, h);
        let next = if g < e.len() { blank_tail(e, g + 1) } else { g };
        o = Some(next);
        if next == r {
            return o;
        }
        r = next;
    }
}

/// JS: `rD`/`sD` — a code token (indented or fenced); `text` matters only for merges.
fn code_piece(raw: &str, indented: bool) -> Piece {
    let text = if indented {
        indented_code_text(raw)
    } else {
        String::new()
    };
    Piece::Code {
        raw: raw.into(),
        text,
    }
}

/// JS: `rD` — the de-indented text of an indented code block.
fn indented_code_text(e: &str) -> String {
    let mut out = String::new();
    let mut r = 0;
    while r < e.len() {
        let t = next_terminator(e, r);
        let h = (t + char_len_at(e, t)).min(e.len());
        let g = skip_3_spaces(e, r);
        let skip_one = if g - r == 3 {
            byte(e, g) == Some(b' ')
        } else {
            g == r && byte(e, g) == Some(b'\t')
        };
        let from = if skip_one { g + 1 } else { g };
        out.push_str(js_slice(e, from, h));
        r = h;
    }
    trim_trailing_newlines(&out).to_string()
}

/// JS: `Gu` = `OP` at 0 — end of a fence opener's marks.
fn fence_open(e: &str) -> Option<usize> {
    let i = skip_3_spaces(e, 0);
    match byte(e, i) {
        Some(b'`') => {
            let j = skip_byte(e, i, b'`');
            if j - i < 3 {
                return None;
            }
            let eol = line_end(e, j);
            (!e[j..eol].contains('`')).then_some(j)
        }
        Some(b'~') => {
            let j = skip_byte(e, i, b'~');
            (j - i >= 3).then_some(j)
        }
        _ => None,
    }
}

/// JS: `zu` — start of the closing fence line, or `None`.
fn fence_close(e: &str, o: usize) -> Option<usize> {
    let marks = js_trim_start(&e[..o]);
    let mut h = o;
    while let Some(p) = e[h..].find('\n') {
        let nl = h + p;
        let j = skip_3_spaces(e, nl + 1);
        h = nl + 1;
        if !matches!(byte(e, j), Some(b'`' | b'~')) {
            continue;
        }
        h = j;
        if e[j..].starts_with(marks) {
            let k = j + marks.len();
            let k = k + e[k..]
                .bytes()
                .take_while(|&b| b == b'`' || b == b'~')
                .count();
            let k = skip_byte(e, k, b' ');
            if at_eol(e, k) {
                return Some(nl + 1);
            }
        }
    }
    None
}

/// JS: `wl` — extent of a fenced code block.
fn fence_end(e: &str) -> Option<usize> {
    let o = fence_open(e)?;
    Some(match fence_close(e, o) {
        Some(r) => line_end(e, r),
        None => e.len(),
    })
}

/// JS: `LP` = `/ {0,3}(?:-+|=+) *(?![^\n])\n*/y` at `i`.
fn underline_at(e: &str, i: usize) -> Option<usize> {
    let j = skip_3_spaces(e, i);
    let c = match byte(e, j) {
        Some(c @ (b'-' | b'=')) => c,
        _ => return None,
    };
    let k = skip_byte(e, skip_byte(e, j, c), b' ');
    at_eol(e, k).then(|| skip_byte(e, k, b'\n'))
}

/// JS: `$P` — a "plain" line (no block start) at `i`, ending with `\n`; returns the index
/// after the `\n`.
fn plain_line(e: &str, i: usize) -> Option<usize> {
    let b = e.as_bytes();
    let rest = &e[i.min(e.len())..];
    let rb = rest.as_bytes();
    if starts_with_list_marker(rb) {
        return None;
    }
    if rest.starts_with("    ") {
        return None;
    }
    let j = skip_3_spaces(e, i) - i;
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
    let end = dot_star(e, i);
    (b.get(end) == Some(&b'\n')).then_some(end + 1)
}

/// JS: `NP` = `/[^\S\n]*\n/y` at `i`.
fn blank_line_at(e: &str, mut i: usize) -> bool {
    while let Some(c) = char_at(e, i) {
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
fn setext_search_raw(e: &str) -> Result<usize, usize> {
    let mut o = 0;
    while let Some(r) = plain_line(e, o) {
        o = r;
        if o > 1 && underline_at(e, o).is_some() {
            return Ok(o);
        }
        if blank_line_at(e, o) {
            break;
        }
    }
    Err(o)
}

/// `~Vu(e)` as an `isize` (negative when no underline was found).
fn setext_search(e: &str) -> isize {
    match setext_search_raw(e) {
        Ok(o) => o as isize,
        Err(o) => !(o as isize),
    }
}

/// JS: `Ku`.
fn setext_end(e: &str) -> Option<usize> {
    let o = setext_search_raw(e).ok()?;
    underline_at(e, o)
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
fn html_interrupt(e: &str, i: usize) -> bool {
    let Some(r) = e.get(i..).and_then(|r| r.strip_prefix('<')) else {
        return false;
    };
    if r.starts_with("!--")
        || ["script", "pre", "style", "textarea"]
            .iter()
            .any(|t| r.starts_with(t))
    {
        return true;
    }
    let r = r.strip_prefix('/').unwrap_or(r);
    let n = r
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        .count();
    // A listed tag that is a proper prefix of the run is followed by [a-z0-9], never by the
    // required delimiter, so checking the whole run is equivalent to the regex alternation.
    if !BLOCK_TAGS.contains(&&r[..n]) {
        return false;
    }
    matches!(r.as_bytes().get(n), Some(b'\n' | b' ' | b'>')) || r[n..].starts_with("/>")
}

/// JS: `F_` at `i` — a line that interrupts a paragraph.
fn interrupts(e: &str, i: usize) -> bool {
    let j = skip_3_spaces(e, i);
    let b = e.as_bytes();
    let rest = &e[j..];
    let rb = rest.as_bytes();
    let hit = match rb.first() {
        Some(b'>') => true,
        Some(b'-' | b'+' | b'*') if rb.get(1) == Some(&b' ') => true,
        Some(b'1') if matches!(rb.get(1), Some(b')' | b'.')) && rb.get(2) == Some(&b' ') => true,
        Some(b'#') => atx_marks(e, j).is_some(),
        Some(b'`') => {
            let k = skip_byte(e, j, b'`');
            let eol = line_end(e, k);
            k - j >= 3 && !e[k..eol].contains('`') && b.get(eol) == Some(&b'\n')
        }
        Some(b'~') => rest.starts_with("~~~") && b.get(line_end(e, j)) == Some(&b'\n'),
        _ => false,
    };
    if hit || hr_at(e, j).is_some() {
        return true;
    }
    let k = skip_byte(e, i, b' ');
    if byte(e, k) == Some(b'\n') {
        return true;
    }
    html_interrupt(e, i)
}

/// JS: `$_` (non-GFM): end of a paragraph-like run starting at `o`.
fn para_run(e: &str, o: usize) -> usize {
    let mut h = line_end(e, o);
    if h == o {
        return h;
    }
    while h + 1 < e.len() {
        let g = line_end(e, h + 1);
        if interrupts(e, h + 1) {
            break;
        }
        h = g;
    }
    h
}

/// JS: `bl`.
fn paragraph_end(e: &str) -> Option<usize> {
    let n = para_run(e, 0);
    (n > 0).then_some(n)
}

/// JS: `U_` — extent of a block quote (lines starting with `>` plus lazy lines).
fn blockquote_end(e: &str) -> Option<usize> {
    let mut o: Option<usize> = None;
    let mut r = 0;
    while r < e.len() {
        let j = skip_3_spaces(e, r);
        if byte(e, j) != Some(b'>') {
            break;
        }
        let h = if byte(e, j + 1) == Some(b' ') {
            j + 2
        } else {
            j + 1
        };
        let next = (para_run(e, h) + 1).min(e.len());
        o = Some(next);
        r = next;
    }
    o
}

/// JS: `MS` — strip the `>` marker from each line.
fn strip_quote_marks(e: &str) -> String {
    let mut out = String::new();
    let mut r = 0;
    while r < e.len() {
        let j = skip_3_spaces(e, r);
        let h = if byte(e, j) == Some(b'>') {
            if matches!(byte(e, j + 1), Some(b'\t' | b' ')) {
                j + 2
            } else {
                j + 1
            }
        } else {
            r
        };
        let t = next_terminator(e, h);
        let next = if t >= e.len() {
            e.len()
        } else {
            t + char_len_at(e, t)
        };
        out.push_str(&e[h..next]);
        r = next.max(r + 1);
    }
    out
}

fn starts_quote(line: &str) -> bool {
    byte(line, skip_3_spaces(line, 0)) == Some(b'>')
}

/// JS: `cD` — take the next chunk of a quote; returns the stripped text and the rest.
fn quote_chunk(quote: &mut Quote, o: &str) -> (String, Option<String>) {
    let mut h: isize = -1;
    let mut g = String::new();
    let mut y = false;
    while h < o.len() as isize {
        let start = (h + 1) as usize;
        let line = &o[start..line_end(o, start)];
        let p = starts_quote(line);
        if y && !p {
            break;
        }
        y = p;
        if h == -1 {
            g = strip_quote_marks(line);
        } else if underline_at(line, 0).is_none() {
            g.push('\n');
            g.push_str(&strip_quote_marks(line));
        } else {
            g.push_str("\n    ");
            g.push_str(js_trim_start(line));
        }
        h += line.len() as isize + 1;
    }
    let k = js_slice(o, 0, h.max(0) as usize);
    if quote.raw.is_empty() {
        quote.raw = k.to_string();
    } else {
        quote.raw = format!("{}\n{}", quote.raw, k);
    }
    let rest = ((h as usize) < o.len()).then(|| o[h as usize + 1..].to_string());
    (g, rest)
}

// ---------------------------------------------------------------------------------------
// HTML blocks (JS: O_)

const RAW_TAGS: &[&str] = &["script", "pre", "style", "textarea"];

/// JS: `hl` — index after `needle` searched from `from`, or the length.
fn after_needle(e: &str, needle: &str, from: usize) -> usize {
    if from > e.len() {
        return e.len();
    }
    e[from..]
        .find(needle)
        .map_or(e.len(), |p| from + p + needle.len())
}

/// JS: `TP`/`gl` — end of a tag name (`[A-Z][-\w]*`, case-insensitive) at `i`.
fn tag_name_end(e: &str, i: usize) -> usize {
    if !byte(e, i).is_some_and(|b| b.is_ascii_alphabetic()) {
        return i;
    }
    let mut j = i + 1;
    while byte(e, j).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        j += 1;
    }
    j
}

/// JS: `A_` — end of an HTML block that runs to the next blank line (`\n[\t\n ]*\n`).
fn until_blank_line(e: &str, from: usize) -> usize {
    let b = e.as_bytes();
    let mut i = from;
    while let Some(p) = e.get(i..).and_then(|r| r.find('\n')) {
        let nl = i + p;
        let mut k = nl + 1;
        while matches!(b.get(k), Some(b'\t' | b' ')) {
            k += 1;
        }
        // [\t\n ]* is greedy and may span lines; it needs a final \n.
        let run_end = k + b[k..]
            .iter()
            .take_while(|c| matches!(c, b'\t' | b'\n' | b' '))
            .count();
        if let Some(q) = e[nl + 1..run_end].rfind('\n') {
            return nl + 1 + q + 1;
        }
        i = nl + 1;
    }
    e.len()
}

/// JS: `bP` repeated (`Gn`) — attributes with spaces only.
fn attrs_spaces(e: &str, mut i: usize) -> usize {
    loop {
        let Some(j) = attr_at(e, i, false) else {
            return i;
        };
        if j <= i {
            return i;
        }
        i = j;
    }
}

/// JS: `wP` (`loose`, any whitespace) or `bP` (spaces, no newlines in quoted values).
pub(crate) fn attr_at(e: &str, i: usize, loose: bool) -> Option<usize> {
    let b = e.as_bytes();
    let mut j = if loose {
        skip_js_space(e, i)
    } else {
        skip_byte(e, i, b' ')
    };
    if j == i {
        return None;
    }
    if !b
        .get(j)
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b':' | b'_'))
    {
        return None;
    }
    j += 1;
    while b
        .get(j)
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b':' | b'_'))
    {
        j += 1;
    }
    let k = if loose {
        skip_js_space(e, j)
    } else {
        skip_byte(e, j, b' ')
    };
    if b.get(k) != Some(&b'=') {
        return Some(j);
    }
    let v = if loose {
        skip_js_space(e, k + 1)
    } else {
        skip_byte(e, k + 1, b' ')
    };
    let value_end = match b.get(v) {
        Some(q @ (b'"' | b'\'')) => {
            let close = e[v + 1..].find(*q as char).map(|p| v + 1 + p);
            match close {
                Some(c) if loose || !e[v + 1..c].contains('\n') => Some(c + 1),
                _ => None,
            }
        }
        Some(_) => {
            let n = e[v..]
                .chars()
                .take_while(|&c| {
                    !is_js_space(c) && !matches!(c, '"' | '\'' | '<' | '=' | '>' | '`')
                })
                .map(char::len_utf8)
                .sum::<usize>();
            (n > 0).then_some(v + n)
        }
        None => None,
    };
    Some(value_end.unwrap_or(j))
}

/// JS: `O_` — extent of an HTML block starting here, or `None`.
fn html_end(e: &str) -> Option<usize> {
    let o = skip_3_spaces(e, 0);
    if byte(e, o) != Some(b'<') {
        return None;
    }
    let r = o + 1;
    let nl_run = |i: usize| skip_byte(e, i, b'\n');
    match byte(e, r) {
        Some(b'?') => return Some(nl_run(after_needle(e, "?>", r + 1))),
        Some(b'!') => {
            if e[r + 1..].starts_with("--") {
                return Some(nl_run(line_end(e, after_needle(e, "-->", r + 1))));
            }
            if tag_name_end(e, r + 1) > r + 1 {
                return Some(nl_run(after_needle(e, ">", r)));
            }
            let upper = js_slice(e, r + 1, r + 8).to_ascii_uppercase();
            return (upper == "[CDATA[").then(|| nl_run(after_needle(e, "]]>", r + 8)));
        }
        _ => {}
    }
    let closing = byte(e, r) == Some(b'/');
    let y = if closing { r + 1 } else { r };
    let k = tag_name_end(e, y);
    let name = e[y..k].to_ascii_lowercase();
    let p = char_at(e, k);
    if RAW_TAGS.iter().any(|t| name.starts_with(t)) {
        let ok = !closing
            && RAW_TAGS.contains(&name.as_str())
            && (p == Some('>') || p.is_some_and(is_js_space));
        return ok.then(|| raw_tag_end(e, &name, k));
    }
    if BLOCK_TAGS.contains(&name.as_str()) {
        let delim = matches!(byte(e, k), Some(b'\n' | b' ' | b'>')) || e[k..].starts_with("/>");
        if delim {
            return Some(until_blank_line(e, k + 1));
        }
    }
    if name.is_empty() {
        return None;
    }
    let d = if closing {
        let j = skip_js_space(e, k);
        (byte(e, j) == Some(b'>')).then_some(j + 1)
    } else {
        let j = skip_byte(e, attrs_spaces(e, k), b' ');
        if byte(e, j) == Some(b'/') && byte(e, j + 1) == Some(b'>') {
            Some(j + 2)
        } else {
            (byte(e, j) == Some(b'>')).then_some(j + 1)
        }
    }?;
    at_eol(e, skip_blanks(e, d)).then(|| until_blank_line(e, d))
}

/// JS: `MP` — a raw-text block (`<pre>`, `<script>`…) ends on the line of its closing tag.
fn raw_tag_end(e: &str, name: &str, from: usize) -> usize {
    let close = format!("</{name}>");
    let mut g = e[from..].find("</").map(|p| from + p);
    while let Some(i) = g {
        if js_slice(e, i, i + close.len()).to_ascii_lowercase() == close {
            return skip_byte(e, line_end(e, i), b'\n');
        }
        g = e[i + 2..].find("</").map(|p| i + 2 + p);
    }
    e.len()
}

// ---------------------------------------------------------------------------------------
// Link reference definitions (JS: lS, dS, Qu, aS)

/// JS: `Tl` — end of a link label `[...]` whose text starts at `o` (index of `]`).
pub(crate) fn label_end(e: &str, o: usize) -> Option<usize> {
    // XP = /[^[\\\]]+|\\./y, repeated.
    let b = e.as_bytes();
    let mut r = o;
    loop {
        match b.get(r) {
            Some(b'\\') if char_at(e, r + 1).is_some_and(|c| !is_js_line_terminator(c)) => {
                r += 1 + char_len_at(e, r + 1)
            }
            Some(b'[' | b']' | b'\\') | None => break,
            Some(_) => r += char_len_at(e, r),
        }
    }
    (b.get(r) == Some(&b']') && skip_js_space(e, o) < r).then_some(r)
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
fn def_gap(e: &str, o: usize) -> usize {
    let r = skip_byte(e, o, b' ');
    if byte(e, r) == Some(b'\n') {
        skip_blanks(e, r + 1)
    } else {
        r
    }
}

/// JS: `Qu` — spaces then end of line; returns the index after the newlines.
fn def_line_end(e: &str, o: usize) -> Option<usize> {
    let r = skip_byte(e, o, b' ');
    at_eol(e, r).then(|| skip_byte(e, r, b'\n'))
}

/// JS: `Ju` — the closing quote of a title, with backslash escapes and a validity check.
pub(super) fn title_close(
    e: &str,
    o: usize,
    close: u8,
    ok: impl Fn(&str, usize) -> bool,
) -> Option<usize> {
    let b = e.as_bytes();
    let find = |from: usize| {
        b.get(from..)
            .and_then(|r| r.iter().position(|&c| c == close))
            .map(|p| from + p)
    };
    let mut g = find(o + 1);
    let mut y: Option<usize> = None;
    while let Some(i) = g {
        y = Some(i);
        if i == o + 1 || b[i - 1] != b'\\' {
            break;
        }
        g = find(i + 1);
    }
    let mut y = y?;
    while y > o && !ok(e, y + 1) {
        match b[..y].iter().rposition(|&c| c == close) {
            Some(p) => y = p,
            None => return None,
        }
    }
    (y > o).then_some(y)
}

/// JS: `aS` — destination done, parse the optional title; returns the definition length.
fn def_tail(e: &str, h: usize) -> Option<usize> {
    let g = def_gap(e, h);
    let mut y: Option<usize> = None;
    if g > h {
        match byte(e, g) {
            Some(b'"') => y = title_close(e, g, b'"', |s, i| def_line_end(s, i).is_some()),
            Some(b'\'') => {
                y = e[g + 1..].find('\'').map(|p| g + 1 + p);
                if let Some(c) = y
                    && e[g..c].contains("\n\n")
                {
                    y = None;
                }
            }
            Some(b'(') => {
                let c = e[g + 1..].find(['(', ')']).map(|p| g + 1 + p);
                y = c.filter(|&c| byte(e, c) == Some(b')'));
            }
            _ => {}
        }
    }
    if let Some(k) = y.and_then(|y| def_line_end(e, y + 1)) {
        return Some(k);
    }
    def_line_end(e, h)
}

/// JS: `lS` — a link reference definition: its normalised label and length.
fn def(e: &str) -> Option<(String, usize)> {
    let o = skip_3_spaces(e, 0);
    if byte(e, o) != Some(b'[') {
        return None;
    }
    let r = label_end(e, o + 1)?;
    if r <= o + 1 || byte(e, r + 1) != Some(b':') {
        return None;
    }
    let label = normalize_label(&e[o + 1..r]);
    let g = def_gap(e, r + 2);
    if byte(e, g) != Some(b'<') {
        let k = g + e[g..]
            .chars()
            .take_while(|&c| !is_js_space(c))
            .map(char::len_utf8)
            .sum::<usize>();
        if k == g {
            return None;
        }
        return def_tail(e, k).map(|len| (label, len));
    }
    let y = next_terminator(e, g);
    let mut k = e[g..].find('>').map(|p| g + p);
    while let Some(i) = k.filter(|&i| i < y) {
        if let Some(len) = def_tail(e, i + 1) {
            return Some((label, len));
        }
        k = e[i + 1..].find('>').map(|p| i + 1 + p);
    }
    None
}

// ---------------------------------------------------------------------------------------
// Lists (JS: H_, xS, vS, NI, fD)

/// JS: `H_` test.
fn list_test(e: &str) -> Option<()> {
    let j = marker_end(e, skip_3_spaces(e, 0))?;
    let b = e.as_bytes();
    // (?:[\t ][^\n]+)?(?![^\n])
    if at_eol(e, j) {
        return Some(());
    }
    if matches!(b.get(j), Some(b'\t' | b' ')) && j + 1 < b.len() && b[j + 1] != b'\n' {
        return Some(());
    }
    None
}

/// JS: `CI` = `/ {0,3}(?:\d{1,9}[).]|[-+*])(?![^\t\n ])/y` at `o`: end of the marker.
fn list_marker(e: &str, o: usize) -> Option<usize> {
    let j = marker_end(e, skip_3_spaces(e, o))?;
    matches!(e.as_bytes().get(j), None | Some(b'\t' | b'\n' | b' ')).then_some(j)
}

/// `[-+*]` or `\d{1,9}[.)]` at `i`: the index after the list marker.
fn marker_end(e: &str, i: usize) -> Option<usize> {
    let b = e.as_bytes();
    match b.get(i) {
        Some(b'-' | b'+' | b'*') => Some(i + 1),
        Some(c) if c.is_ascii_digit() => {
            let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            (n <= 9 && matches!(b.get(i + n), Some(b')' | b'.'))).then_some(i + n + 1)
        }
        _ => None,
    }
}

/// JS: `TI` at `r` on a single line (`$` is the end of the line).
fn ends_lazy_run(line: &str, r: usize) -> bool {
    let rest = &line[r.min(line.len())..];
    if rest.starts_with('#') || rest.starts_with("```") || rest.starts_with("~~~") {
        return true;
    }
    let c = match rest.as_bytes().first() {
        Some(c @ (b'-' | b'_' | b'*')) => *c,
        _ => return false,
    };
    // c *c *c[c ]*$ (spaces only, not tabs)
    let marks = rest.bytes().filter(|&b| b == c).count();
    rest.bytes().all(|b| b == c || b == b' ') && marks >= 3
}

/// JS: `AI` (case-insensitive) at `q` on a line: a block start that ends a list item.
fn item_breaker(line: &str, q: usize) -> bool {
    if ends_lazy_run(line, q) {
        return true;
    }
    let rest = &line[q.min(line.len())..];
    if rest.starts_with("<!--") {
        return true;
    }
    if let Some(t) = rest.strip_prefix('<') {
        // <[A-Z].*>  — a letter, then `.*` greedy back to the last '>' before a terminator.
        if t.as_bytes()
            .first()
            .is_some_and(|b| b.is_ascii_alphabetic())
        {
            let end = dot_star(t, 0);
            if t[1..end].contains('>') {
                return true;
            }
        }
    }
    let b = rest.as_bytes();
    let j = match b.first() {
        Some(b'-' | b'+' | b'*') => 1,
        Some(c) if c.is_ascii_digit() => {
            let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
            if n > 9 || !matches!(b.get(n), Some(b')' | b'.')) {
                return false;
            }
            n + 1
        }
        _ => return false,
    };
    matches!(b.get(j), None | Some(b'\t' | b' '))
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
fn allows_lazy(prev: &str, w: usize) -> bool {
    let r = first_non_space(prev);
    !looks_indented(prev) && (r > w || !ends_lazy_run(prev, r))
}

struct ItemScan {
    end: usize,
    content: String,
}

/// JS: `vS` — one list item starting at `o` whose marker ends at `r`.
fn list_item(e: &str, o: usize, r: usize) -> ItemScan {
    let mut h = line_end(e, r);
    let g = r + e.as_bytes()[r..]
        .iter()
        .take_while(|&&b| b == b'\t')
        .count();
    let mut y: Cow<str> = Cow::Borrowed(js_slice(e, g, h));
    if g > r {
        y = Cow::Owned(format!("{}{}", " ".repeat(3 * (g - r)), y));
    }
    let mut k = js_is_blank(&y);
    let mut width = r - o;
    let mut content = String::new();
    if k {
        width += 1;
    } else {
        let spaces = skip_byte(e, r, b' ') - r;
        let kk = if spaces > 4 { 1 } else { spaces };
        content.push_str(skip_utf16_units(&y, kk));
        width += kk;
    }
    if k {
        let from = (h + 1).min(e.len());
        let j = skip_blanks(e, from);
        if at_eol(e, j) {
            let end = if byte(e, j) == Some(b'\n') { j + 1 } else { j };
            return ItemScan { end, content };
        }
    }
    let w = 3.min(width.saturating_sub(1));
    while h + 1 < e.len() {
        let start = h + 1;
        let end = line_end(e, start);
        let line = &e[start..end];
        let q = first_non_space(line);
        if q <= w && item_breaker(line, q) {
            break;
        }
        let expanded: Cow<str> = if line.contains('\t') {
            Cow::Owned(line.replace('\t', "    "))
        } else {
            Cow::Borrowed(line)
        };
        let blank = js_is_blank(line);
        let me: Cow<str> = match expanded {
            Cow::Borrowed(l) => Cow::Borrowed(skip_utf16_units(l, width)),
            Cow::Owned(ref l) => Cow::Owned(skip_utf16_units(l, width).to_string()),
        };
        if blank || first_non_space(&expanded) >= width {
            content.push('\n');
            content.push_str(&me);
        } else if k || !allows_lazy(&y, w) {
            break;
        } else {
            content.push('\n');
            content.push_str(line);
        }
        k |= blank;
        y = me;
        h = end;
    }
    // (JS also reports whether the item ends in a blank line; that only decides "loose"
    // lists, which change nothing Claude Code outputs, so it is not kept.)
    ItemScan {
        end: (h + 1).min(e.len()),
        content,
    }
}

/// JS: `fD` — the list's raw text and each item's (raw, text).
fn list_items(e: &str) -> Option<(String, Vec<(String, String)>)> {
    let mut bullet: Option<u8> = None;
    let mut items: Vec<(String, String)> = Vec::new();
    let mut k = 0;
    while k < e.len() {
        let Some(d) = list_marker(e, k) else { break };
        let n = e.as_bytes()[d - 1];
        let b = *bullet.get_or_insert(n);
        if n != b || hr_end(&e[k..]).is_some() {
            break;
        }
        let scan = list_item(e, k, d);
        items.push((e[k..scan.end].to_string(), scan.content));
        k = scan.end.max(k + 1);
    }
    let last = items.last_mut()?;
    last.0 = js_trim_end(&last.0).to_string();
    last.1 = js_trim_end(&last.1).to_string();
    Some((js_trim_end(&e[..k.min(e.len())]).to_string(), items))
}
