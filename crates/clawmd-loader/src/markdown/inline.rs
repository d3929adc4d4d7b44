//! Inline tokenizer: a port of the inline half of Claude Code's markdown lexer (`gfm: false`).
//!
//! What matters downstream is where `text` tokens start and end (an `@path` is an import only
//! at the start of a text token or after whitespace), which spans are code, and which parts
//! are links or emphasis (their text is searched too). The per-call memo tables (`Notes`,
//! JS `vl`) are kept: they are what makes the original linear-time, and a few of them change
//! results in corner cases. As in [`super::block`], locals have readable names (the text
//! being lexed, JS `e`, is `src`).

use std::borrow::Cow;

use super::Ctx;
use super::block::{label_end, normalize_label};
use super::scan::*;

#[derive(Clone, Copy, PartialEq, Eq)]
enum AbsentKey {
    Backticks(usize),
    PiClose,
    CommentClose,
    CdataClose,
    Gt,
}

#[derive(Clone, Copy)]
enum AheadKey {
    CloseParen,
    Gt,
}

#[derive(Clone, Copy)]
struct Closer {
    last: usize,
    marks: usize,
}

/// JS: `vl` — memo tables of one `inlineTokens` call; positions are lengths from the end.
/// (Small and mostly empty, so kept in a `Vec` and an array rather than hash maps: the
/// distinct backtick run lengths of a text, its only open-ended keys, number at most about
/// the square root of twice its length.)
#[derive(Default)]
struct Notes {
    absent: Vec<(AbsentKey, usize)>,
    ahead: [Option<Option<usize>>; 2],
    after_marks: Option<usize>,
    end_space: Option<usize>,
    closers: [Option<Closer>; 2],
}

impl Notes {
    fn is_absent(&self, src: &str, key: AbsentKey, pos: usize) -> bool {
        self.absent
            .iter()
            .find(|(k, _)| *k == key)
            .is_some_and(|&(_, absent_from)| src.len().saturating_sub(pos) <= absent_from)
    }

    fn note_absent(&mut self, src: &str, key: AbsentKey, pos: usize) -> Option<usize> {
        let absent_from = src.len().saturating_sub(pos);
        match self.absent.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = absent_from,
            None => self.absent.push((key, absent_from)),
        }
        None
    }

    /// Is there a `)`/`>` at or after `pos`? (JS `isAhead` with `YP`/`xl`.)
    fn is_ahead(&mut self, src: &str, key: AheadKey, pos: usize) -> bool {
        let (needle, slot) = match key {
            AheadKey::CloseParen => (b')', 0),
            AheadKey::Gt => (b'>', 1),
        };
        let from_end = *self.ahead[slot]
            .get_or_insert_with(|| memchr::memrchr(needle, src.as_bytes()).map(|i| src.len() - i));
        from_end.is_some_and(|last_from_end| src.len().saturating_sub(pos) >= last_from_end)
    }

    /// JS `past`: end of `needle` searched from `pos`, with the absent memo.
    fn past(&mut self, src: &str, key: AbsentKey, needle: &str, pos: usize) -> Option<usize> {
        if self.is_absent(src, key, pos) {
            return None;
        }
        match src.get(pos..).and_then(|tail| tail.find(needle)) {
            Some(offset) => Some(pos + offset + needle.len()),
            None => self.note_absent(src, key, pos),
        }
    }

    /// JS `hS`: is position `pos` (JS `o`) before the trailing whitespace of the text?
    fn before_end_space(&mut self, src: &str, pos: usize) -> bool {
        let end_space = *self
            .end_space
            .get_or_insert_with(|| src.len() - js_trim_end(src).len());
        src.len() - pos > end_space
    }
}

/// The character before the current position, as the emphasis rules see it (JS `R`, one
/// UTF-16 unit: an astral char leaves a lone surrogate, which is no letter and class 2).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Before {
    None,
    Char(char),
    LoneSurrogate,
}

impl Before {
    fn of_last(raw: &str) -> Before {
        match raw.chars().next_back() {
            None => Before::None,
            Some(c) if c.len_utf16() == 2 => Before::LoneSurrogate,
            Some(c) => Before::Char(c),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Escape,
    Br,
    Tag,
    Autolink,
    Link,
    Reflink,
    EmStrong,
    Codespan,
    InlineText,
}

/// JS: `NS` (without the GFM-only `url` and `del`, which are no-ops here).
fn dispatch(first: u8) -> &'static [Method] {
    use Method::*;
    match first {
        b'\\' => &[Escape, Br, InlineText],
        b' ' => &[Br, InlineText],
        b'<' => &[Tag, Autolink, InlineText],
        b'!' | b'[' => &[Link, Reflink, InlineText],
        b'*' | b'_' => &[EmStrong, InlineText],
        b'`' => &[Codespan, InlineText],
        _ => &[InlineText],
    }
}

/// What an inline tokenizer found at the current position. The original builds tokens and
/// walks them afterwards for `@` mentions; here the mentions are collected as the tokens are
/// found (those of a link's or an emphasis's own text by the nested call, before it returns).
enum Tok<'a> {
    /// A text token: its raw text is `src[..len]` (text tokens that follow each other are
    /// merged, as in the original, so a text token's mentions are searched once it ends).
    Text,
    /// A code span: its raw text.
    Codespan(&'a str),
    /// Inline HTML: its raw text.
    Html(&'a str),
    /// A link whose text is the autolink's address (searched as text).
    Autolink(&'a str),
    /// Any other token (escape, break, image, or a link or emphasis whose text was already
    /// searched by the nested call).
    Other,
}

/// Where `@` mentions go: the walk's output (JS `GZr`, see [`super::import_mentions`]).
pub(crate) type Mentions = Vec<(super::Place, String)>;

/// JS: `Wze.inlineTokens` + `#o`, and the walk of the tokens it makes: the `@` mentions of
/// `text`, in the order the original's walk finds them, go to `out`.
pub(crate) fn inline_mentions(text: &str, cx: &Ctx, out: &mut Mentions) {
    // Each nested call is one more JavaScript stack level in the original.
    if !cx.enter(super::INLINE_LEVEL) || !cx.spend(text.len()) {
        return;
    }
    inline_at_depth(text, cx, out);
    cx.leave(super::INLINE_LEVEL);
}

/// When the inline pass of `text` need not run: the most it could spend (see
/// [`super::MAX_DERIVED_BYTES`]), if it can find no mention and cannot nest past `limit`.
///
/// Without an `@` there is no mention to find (every text the pass searches is a piece of
/// `text`; a link's text only loses backslashes). The pass calls itself again only for the
/// text inside an emphasis or a link, which leaves out the `*`, `_` or `[` opening it, so it
/// nests at most one level more than `text` holds those (kept a level short of `limit`, so
/// that rounding cannot matter), and it runs at most once more than that: each run spends at
/// most twice its text (the text and its emphasis mask).
pub(crate) fn pass_bound(text: &str, limit: f64) -> Option<usize> {
    let bytes = text.as_bytes();
    if memchr::memchr(b'@', bytes).is_some() {
        return None;
    }
    let openers = memchr::memchr3_iter(b'*', b'_', b'[', bytes).count();
    if (openers + 2) as f64 * super::INLINE_LEVEL >= limit {
        return None;
    }
    Some(text.len().saturating_mul(2).saturating_mul(openers + 1))
}

/// The mentions of the text token `text[start..end]`, put at `at` in `out` (before those a
/// nested call found in the token that ended it).
fn text_mentions(text: &str, (start, end): (usize, usize), at: usize, out: &mut Mentions) {
    let found = super::at_mentions(&text[start..end]);
    if !found.is_empty() {
        out.splice(
            at..at,
            found
                .into_iter()
                .map(|mention| (super::Place::Text, mention.to_owned())),
        );
    }
}

fn inline_at_depth(text: &str, cx: &Ctx, out: &mut Mentions) {
    let mut notes = Notes::default();
    let mut mask: Option<Cow<str>> = None;
    // The last token, when it is text: its extent in `text`.
    let mut open_text: Option<(usize, usize)> = None;
    let mut before = Before::None;
    let mut pos = 0;
    while pos < text.len() && !cx.overflowed() {
        let rest = &text[pos..];
        let mark = out.len();
        let mut produced = None;
        for &method in dispatch(rest.as_bytes()[0]) {
            let tok = match method {
                Method::EmStrong => {
                    let mask = mask.get_or_insert_with(|| {
                        cx.spend(text.len());
                        make_mask(text, cx)
                    });
                    em_strong(rest, mask, before, &mut notes, cx, out)
                }
                _ => run(method, rest, &mut notes, cx, out),
            };
            if let Some(found) = tok {
                produced = Some((method, found));
                break;
            }
        }
        let Some((method, (tok, raw_len))) = produced else {
            break;
        };
        let is_text = method == Method::InlineText;
        let consumed = ceil_boundary(rest, raw_len.max(1));
        if let Tok::Text = tok {
            // Merged into the text token before it, if any.
            let start = open_text.map_or(pos, |(start, _)| start);
            open_text = Some((start, pos + consumed));
        } else {
            if let Some(extent) = open_text.take() {
                text_mentions(text, extent, mark, out);
            }
            match tok {
                Tok::Codespan(raw) => {
                    super::push_all(raw.trim_matches('`'), super::Place::Code, out)
                }
                Tok::Html(raw) => super::html_mentions(raw, false, out),
                Tok::Autolink(address) => super::push_all(address, super::Place::Text, out),
                Tok::Text | Tok::Other => {}
            }
        }
        if !is_text || !rest[..consumed].ends_with('_') {
            before = if is_text {
                Before::of_last(&rest[..consumed])
            } else {
                Before::None
            };
        }
        pos += consumed;
    }
    if let Some(extent) = open_text {
        text_mentions(text, extent, out.len(), out);
    }
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn run<'a>(
    method: Method,
    src: &'a str,
    notes: &mut Notes,
    cx: &Ctx,
    out: &mut Mentions,
) -> Option<(Tok<'a>, usize)> {
    match method {
        Method::Escape => escape(src).map(|len| (Tok::Other, len)),
        Method::Br => br(src, notes).map(|len| (Tok::Other, len)),
        Method::Tag => tag(src, notes).map(|len| (Tok::Html(&src[..len]), len)),
        Method::Autolink => autolink(src).map(|(len, address)| (Tok::Autolink(address), len)),
        Method::Link => link(src, notes, cx, out),
        Method::Reflink => reflink(src, notes, cx, out),
        Method::Codespan => codespan(src, notes).map(|len| (Tok::Codespan(&src[..len]), len)),
        Method::InlineText => {
            let len = inline_text_end(src, notes);
            (len > 0).then_some((Tok::Text, len))
        }
        Method::EmStrong => None,
    }
}

/// JS: `jI` = `/^\\(?![\dA-Z])[!-~]/i`.
fn escape(src: &str) -> Option<usize> {
    let bytes = src.as_bytes();
    (bytes.first() == Some(&b'\\')
        && bytes
            .get(1)
            .is_some_and(|c| (b'!'..=b'~').contains(c) && !c.is_ascii_alphanumeric()))
    .then_some(2)
}

/// JS: `mS` with `kI` = `/(?:\\|  +)\n/y`.
fn br(src: &str, notes: &mut Notes) -> Option<usize> {
    let bytes = src.as_bytes();
    let end = if bytes.first() == Some(&b'\\') {
        (bytes.get(1) == Some(&b'\n')).then_some(2)?
    } else {
        let spaces = bytes.iter().take_while(|&&c| c == b' ').count();
        (spaces >= 2 && bytes.get(spaces) == Some(&b'\n')).then_some(spaces + 1)?
    };
    notes.before_end_space(src, end).then_some(end)
}

/// The bytes [`inline_text_end`] stops at: those that may start another inline token, and
/// `\n` (where a hard break of two spaces may end).
const TEXT_STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut i = 0;
    let special = b"!*<[\\_`\n";
    while i < special.len() {
        stops[special[i] as usize] = true;
        i += 1;
    }
    stops
};

/// JS: `SS` (non-GFM) — end of a run of plain text.
fn inline_text_end(src: &str, notes: &mut Notes) -> usize {
    let bytes = src.as_bytes();
    // fI = /`+|[^]/y
    let first_len = if bytes.first() == Some(&b'`') {
        skip_byte(src, 0, b'`')
    } else {
        char_len_at(src, 0)
    };
    let mut pos = first_len;
    while pos < bytes.len() {
        if !TEXT_STOPS[bytes[pos] as usize] {
            pos += 1;
            continue;
        }
        if bytes[pos] != b'\n' {
            return pos;
        }
        // `  \n` (the regex's ` {2,}\n` alternative, tried at the first space of the pair
        // before the newline).
        let nl = pos;
        if nl >= first_len + 2 && bytes[nl - 1] == b' ' && bytes[nl - 2] == b' ' {
            if !notes.before_end_space(src, nl) {
                return src.len();
            }
            let mut end = nl;
            while end > first_len && bytes[end - 1] == b' ' {
                end -= 1;
            }
            return end;
        }
        pos += 1;
    }
    src.len()
}

/// JS: `Zu`+`fS` — a code span closed by a backtick run of the same length.
fn codespan(src: &str, notes: &mut Notes) -> Option<usize> {
    // JS: o = the opening run's length (and the position after it)
    let open_len = skip_byte(src, 0, b'`');
    if open_len == 0 {
        return None;
    }
    let key = AbsentKey::Backticks(open_len);
    if notes.is_absent(src, key, open_len) {
        return None;
    }
    let mut next_tick = find_byte(src, open_len, b'`');
    while let Some(run_start) = next_tick {
        let run_end = skip_byte(src, run_start, b'`');
        if run_end - run_start == open_len {
            return Some(run_end);
        }
        next_tick = find_byte(src, run_end, b'`');
    }
    notes.note_absent(src, key, open_len)
}

/// JS: `pS` — end of an inline HTML tag, comment, declaration or processing instruction.
fn tag(src: &str, notes: &mut Notes) -> Option<usize> {
    if byte(src, 0) != Some(b'<') {
        return None;
    }
    match byte(src, 1) {
        Some(b'?') => notes.past(src, AbsentKey::PiClose, "?>", 2),
        Some(b'!') => {
            if src[2..].starts_with("--") {
                return notes.past(src, AbsentKey::CommentClose, "-->", 2);
            }
            if src[2..].starts_with("[CDATA[") {
                return notes.past(src, AbsentKey::CdataClose, "]]>", 9);
            }
            // mI = /[A-Z]+\s/iy
            let name_len = src[2..].bytes().take_while(u8::is_ascii_alphabetic).count();
            let space = char_at(src, 2 + name_len)?;
            if name_len == 0 || !is_js_space(space) {
                return None;
            }
            notes.past(src, AbsentKey::Gt, ">", 2 + name_len + space.len_utf8())
        }
        Some(b'/') => {
            // hI = /[A-Z][-:\w]*\s*>/iy at 2
            if !byte(src, 2).is_some_and(|c| c.is_ascii_alphabetic()) {
                return None;
            }
            let mut j = 3;
            while byte(src, j)
                .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b':' | b'_'))
            {
                j += 1;
            }
            let j = skip_js_space(src, j);
            (byte(src, j) == Some(b'>')).then_some(j + 1)
        }
        _ => {
            let name_end = tag_name_end_at(src, 1);
            if name_end == 1 || !notes.is_ahead(src, AheadKey::Gt, name_end) {
                return None;
            }
            let mut pos = name_end;
            while let Some(attr_end) = super::block::attr_at(src, pos, true) {
                if attr_end <= pos {
                    break;
                }
                pos = attr_end;
            }
            let j = skip_js_space(src, pos);
            let j = if byte(src, j) == Some(b'/') { j + 1 } else { j };
            (byte(src, j) == Some(b'>')).then_some(j + 1)
        }
    }
}

fn tag_name_end_at(src: &str, i: usize) -> usize {
    if !byte(src, i).is_some_and(|b| b.is_ascii_alphabetic()) {
        return i;
    }
    let mut j = i + 1;
    while byte(src, j).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        j += 1;
    }
    j
}

/// JS: `Hxe.autolink` — `<scheme:…>` or `<address@domain>`; returns (raw length, text).
fn autolink(src: &str) -> Option<(usize, &str)> {
    let bytes = src.as_bytes();
    if bytes.first() != Some(&b'<') {
        return None;
    }
    // FI = /<[A-Z][-+.\dA-Z]{1,31}:[!-;=?-\uffff]*>/iy
    if bytes.get(1).is_some_and(u8::is_ascii_alphabetic) {
        let scheme_rest = bytes[2..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
            .count();
        if (1..=31).contains(&scheme_rest) && bytes.get(2 + scheme_rest) == Some(&b':') {
            let start = 3 + scheme_rest;
            let run: usize = src[start..]
                .chars()
                .take_while(|&c| (c as u32) >= 0x21 && c != '<' && c != '>')
                .map(char::len_utf8)
                .sum();
            let end = start + run;
            if bytes.get(end) == Some(&b'>') {
                let raw = &src[..end + 1];
                if !raw.chars().any(is_js_space) {
                    return Some((end + 1, &raw[1..raw.len() - 1]));
                }
            }
        }
    }
    // BI = /<[-!#-'*+./=?\w`{-~]+@/y
    let local = bytes[1..]
        .iter()
        .take_while(|&&c| is_email_local(c))
        .count();
    if local == 0 || bytes.get(1 + local) != Some(&b'@') {
        return None;
    }
    let domain_start = 2 + local;
    let mut pos = domain_start;
    while let Some(next) = domain_label(src, pos, b'.') {
        pos = next;
    }
    if pos <= domain_start {
        return None;
    }
    let end = domain_label(src, pos, b'>')?;
    Some((end, &src[1..end - 1]))
}

fn is_email_local(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, b'-' | b'!' | b'#'..=b'\'' | b'*' | b'+' | b'.' | b'/' | b'=' | b'?' | b'_' | b'`' | b'{'..=b'~')
}

/// JS: `UI`/`$I` — a domain label at `i` followed by `end`; returns the index after `end`.
fn domain_label(src: &str, i: usize, end: u8) -> Option<usize> {
    let bytes = src.as_bytes();
    let len = bytes
        .get(i..)?
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'-')
        .count();
    if len == 0 || bytes[i] == b'-' || len >= 64 {
        return None;
    }
    (bytes[i + len - 1].is_ascii_alphanumeric() && bytes.get(i + len) == Some(&end))
        .then_some(i + len + 1)
}

/// JS: `Xu` — index of the `]` closing link text that starts at `start`.
fn link_text_end(src: &str, start: usize) -> Option<usize> {
    let bytes = src.as_bytes();
    let mut nested = false;
    let mut pos = start;
    while pos < bytes.len() {
        match bytes[pos] {
            b'\\' => {
                let escaped = char_at(src, pos + 1)?;
                if is_js_line_terminator(escaped) {
                    return None;
                }
                pos += 1 + escaped.len_utf8();
                continue;
            }
            b'`' if !nested => {
                pos = find_byte(src, pos + 1, b'`')?;
            }
            b'[' => {
                if nested {
                    return None;
                }
                nested = true;
            }
            b']' => {
                if !nested {
                    return Some(pos);
                }
                nested = false;
            }
            _ => {}
        }
        pos += 1;
    }
    None
}

/// JS: `Ju` specialised for link titles (valid when followed by `\s*)`).
fn title_end(src: &str, open: usize, close: u8) -> Option<usize> {
    super::block::title_close(src, open, close, |src, pos| {
        close_paren_after(src, pos).is_some()
    })
}

/// JS: `Z_` — `\s*)` at `pos`; returns the index after the `)`.
fn close_paren_after(src: &str, pos: usize) -> Option<usize> {
    let paren = skip_js_space(src, pos);
    (byte(src, paren) == Some(b')')).then_some(paren + 1)
}

/// JS: `ZP` — after a destination ending at `dest_end` (JS `r`), a `)` or a title then
/// `)`; returns the end.
fn dest_tail(src: &str, dest_end: Option<usize>) -> Option<usize> {
    let dest_end = dest_end?;
    let after_space = skip_js_space(src, dest_end);
    match byte(src, after_space) {
        Some(b')') => Some(after_space + 1),
        Some(quote @ (b'"' | b'\'' | b'(')) if after_space != dest_end => {
            let close = if quote == b'(' { b')' } else { quote };
            let quote_end = title_end(src, after_space, close)?;
            close_paren_after(src, quote_end + 1)
        }
        _ => None,
    }
}

/// JS: `JP` = `/\([!-'*-;=-[\]-~]+\)/y` at `open`.
fn simple_dest(src: &str, open: usize) -> Option<usize> {
    let bytes = src.as_bytes();
    if bytes.get(open) != Some(&b'(') {
        return None;
    }
    let len = bytes[open + 1..]
        .iter()
        .take_while(|&&c| (0x21..=0x7e).contains(&c) && !matches!(c, b'(' | b')' | b'<' | b'\\'))
        .count();
    (len > 0 && bytes.get(open + 1 + len) == Some(&b')')).then_some(open + len + 2)
}

/// JS: `eI` — index of an unbalanced `)` in a bare destination.
fn unbalanced_paren(dest: &str) -> Option<usize> {
    let bytes = dest.as_bytes();
    let mut depth: i64 = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b')' if depth == 0 => return Some(i),
            b'\\' => {
                i += 1 + char_len_at(dest, i + 1);
                continue;
            }
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// JS: `eS` — parse `(destination "title")` starting at `open`; returns the end index.
fn link_dest(src: &str, open: usize, notes: &mut Notes) -> Option<usize> {
    if let Some(end) = simple_dest(src, open) {
        return Some(end);
    }
    if !notes.is_ahead(src, AheadKey::CloseParen, open) {
        return None;
    }
    let dest_start = skip_js_space(src, open + 1);
    let angle = byte(src, dest_start) == Some(b'<');
    if angle && !notes.is_ahead(src, AheadKey::Gt, dest_start) {
        return None;
    }
    // qP = /[^!-\uffff]|\s/g
    let bare_end = dest_start
        + src[dest_start..]
            .chars()
            .take_while(|&c| (c as u32) >= 0x21 && !is_js_space(c))
            .map(char::len_utf8)
            .sum::<usize>();
    let mut found: Option<(usize, usize, usize)> = None; // (dest start, dest end, end)
    for attempt in (if angle { 0 } else { 1 })..3 {
        let (start, dest_end) = match attempt {
            0 => {
                let mut pos = dest_start + 1;
                loop {
                    match byte(src, pos) {
                        Some(b'\\')
                            if char_at(src, pos + 1).is_some_and(|c| !is_js_line_terminator(c)) =>
                        {
                            pos += 1 + char_len_at(src, pos + 1)
                        }
                        Some(b'\n' | b'<' | b'>' | b'\\') | None => break,
                        Some(_) => pos += char_len_at(src, pos),
                    }
                }
                (
                    dest_start,
                    (pos > dest_start + 1 && byte(src, pos) == Some(b'>')).then_some(pos + 1),
                )
            }
            1 => (dest_start, Some(bare_end)),
            _ => match src[..bare_end.min(src.len())].rfind(')') {
                Some(paren) if paren >= dest_start => (dest_start, Some(paren)),
                _ => (open + 1, Some(open + 1)),
            },
        };
        if let Some(end) = dest_tail(src, dest_end) {
            found = Some((start, dest_end.unwrap_or(start), end));
            break;
        }
    }
    let (start, dest_end, end) = found?;
    let dest = js_slice(src, start, dest_end);
    if !angle {
        return match unbalanced_paren(dest) {
            None => Some(end),
            Some(paren) => Some(js_trim_end(js_slice(src, 0, open + paren + 2)).len()),
        };
    }
    let bytes = dest.as_bytes();
    let mut escapes_from = bytes.len() as isize - 1;
    while escapes_from >= 1 && bytes[(escapes_from - 1) as usize] == b'\\' {
        escapes_from -= 1;
    }
    if !dest.ends_with('>') || (bytes.len() as isize - 1 - escapes_from) % 2 == 1 {
        return None;
    }
    Some(end)
}

/// JS: `OS` — a link (its text lexed again) or an image (text not lexed).
fn link_token<'a>(
    raw_len: usize,
    src: &str,
    text: &str,
    cx: &Ctx,
    out: &mut Mentions,
) -> (Tok<'a>, usize) {
    if src.starts_with('!') {
        return (Tok::Other, raw_len);
    }
    // `replace("\\[", "[")` cannot make a `\]`: without either, the text is kept as is.
    let inner: std::borrow::Cow<str> = if text.contains("\\[") || text.contains("\\]") {
        text.replace("\\[", "[").replace("\\]", "]").into()
    } else {
        text.into()
    };
    inline_mentions(&inner, cx, out);
    (Tok::Other, raw_len)
}

/// JS: `Hxe.link`.
fn link<'a>(
    src: &'a str,
    notes: &mut Notes,
    cx: &Ctx,
    out: &mut Mentions,
) -> Option<(Tok<'a>, usize)> {
    let open = usize::from(src.starts_with('!'));
    if byte(src, open) != Some(b'[') {
        return None;
    }
    let text_end = link_text_end(src, open + 1)?;
    if byte(src, text_end + 1) != Some(b'(') {
        return None;
    }
    let end = link_dest(src, text_end + 1, notes)?;
    Some(link_token(end, src, &src[open + 1..text_end], cx, out))
}

struct RefLabel<'a> {
    end: usize,
    text_start: usize,
    text_end: usize,
    label: &'a str,
    is_short: bool,
}

/// JS: `Al` — `[text][label]`, `[label][]` or `[label]` starting at `open`.
fn ref_label(src: &str, open: usize) -> Option<RefLabel<'_>> {
    if let Some(text_end) = link_text_end(src, open + 1)
        && byte(src, text_end + 1) == Some(b'[')
        && let Some(label_close) = label_end(src, text_end + 2)
    {
        let text = &src[open + 1..text_end];
        let label = if label_close > text_end + 2 {
            &src[text_end + 2..label_close]
        } else {
            text
        };
        return Some(RefLabel {
            end: label_close + 1,
            text_start: open + 1,
            text_end,
            label,
            is_short: false,
        });
    }
    let label_close = label_end(src, open + 1)?;
    let end = if src[label_close + 1..].starts_with("[]") {
        label_close + 3
    } else {
        label_close + 1
    };
    Some(RefLabel {
        end,
        text_start: open + 1,
        text_end: label_close,
        label: &src[open + 1..label_close],
        is_short: true,
    })
}

/// JS: `Hxe.reflink`.
fn reflink<'a>(
    src: &'a str,
    _notes: &mut Notes,
    cx: &Ctx,
    out: &mut Mentions,
) -> Option<(Tok<'a>, usize)> {
    let open = usize::from(src.starts_with('!'));
    if byte(src, open) != Some(b'[') {
        return None;
    }
    let found = ref_label(src, open)?;
    if !cx.links.contains(&normalize_label(found.label)) {
        return Some((Tok::Text, 1));
    }
    Some(link_token(
        found.end,
        src,
        &src[found.text_start..found.text_end],
        cx,
        out,
    ))
}

// ---------------------------------------------------------------------------------------
// Emphasis (JS: lD, V_, Y_, KP) and the mask it runs on (JS: rS, tI, nS, oS)

/// JS: `lD` — `*em*`/`**strong**` starting here; the inner text is lexed again.
fn em_strong<'a>(
    src: &'a str,
    mask: &str,
    before: Before,
    notes: &mut Notes,
    cx: &Ctx,
    out: &mut Mentions,
) -> Option<(Tok<'a>, usize)> {
    let delim = *src.as_bytes().first()?;
    if delim != b'*' && delim != b'_' {
        return None;
    }
    let after = match notes.after_marks {
        Some(from_end) if src.len() > from_end => from_end,
        _ => {
            let from_end = src.len() - skip_byte(src, 1, delim);
            notes.after_marks = Some(from_end);
            from_end
        }
    };
    let run = src.len() - after;
    if run >= src.len() || class_of(char_at(src, run)) == 0 {
        return None;
    }
    if !left_flank_ok(src, run, before) {
        return None;
    }
    let start = (mask.len() + run).saturating_sub(src.len());
    let closer = find_closer(mask, start, delim, run, notes)?;
    let end = (run + closer.start + closer.size).min(src.len());
    let raw = &src[..end];
    let marks = 2 - (run.min(closer.size) & 1);
    let inner = js_slice(raw, marks, raw.len().saturating_sub(marks));
    inline_mentions(inner, cx, out);
    Some((Tok::Other, end))
}

/// JS: `V_` with the non-GFM flag.
fn left_flank_ok(src: &str, run: usize, before: Before) -> bool {
    let prev = match before {
        Before::None => return true,
        Before::Char(c) => Some(c),
        Before::LoneSurrogate => None,
    };
    if class_of(char_at(src, run)) == 2 {
        let letter = prev.is_some_and(is_letter_or_number);
        return src.starts_with('*') || !letter;
    }
    match prev {
        Some('*' | '_') => false,
        Some(c) => class_of(Some(c)) != 2,
        None => false, // a lone surrogate is class 2
    }
}

struct Found {
    start: usize,
    size: usize,
}

/// JS: `KP` — skip ahead past `__*__` / `**_**` shapes.
fn skip_shapes(src: &str, pos: usize, delim: u8) -> usize {
    let bytes = src.as_bytes();
    let run = |i: usize| {
        i + bytes[i.min(bytes.len())..]
            .iter()
            .take_while(|&&c| c != b'*' && c != b'_')
            .count()
    };
    let lit = |i: usize, s: &[u8]| bytes.get(i..i + s.len()) == Some(s);
    let end = if delim == b'*' {
        // [^*_]*__[^*_]*[*][^*_]*__
        let i = run(pos);
        lit(i, b"__")
            .then(|| run(i + 2))
            .filter(|&j| lit(j, b"*"))
            .map(|j| run(j + 1))
            .filter(|&k| lit(k, b"__"))
            .map(|k| k + 2)
    } else {
        // [^*_]*[*]{2}[^*_]*_[^*_]*[*]{2}
        let i = run(pos);
        lit(i, b"**")
            .then(|| run(i + 2))
            .filter(|&j| lit(j, b"_"))
            .map(|j| run(j + 1))
            .filter(|&k| lit(k, b"**"))
            .map(|k| k + 2)
    };
    match end {
        Some(end) => pos.max(end.saturating_sub(2)),
        None => pos,
    }
}

/// JS: `Y_` — find the delimiter run that closes an opener of `open_len` (JS `h`) marks
/// ending at `open_end` (JS `o`).
fn find_closer(
    mask: &str,
    open_end: usize,
    delim: u8,
    open_len: usize,
    notes: &mut Notes,
) -> Option<Found> {
    let star = delim == b'*';
    let slot = usize::from(!star);
    let memo = notes.closers[slot];
    if let Some(memo) = memo
        && mask.len().saturating_sub(open_end) < memo.last
        && byte(mask, open_end + 1) != Some(delim)
    {
        return None;
    }
    let bytes = mask.as_bytes();
    let mut unmatched = open_len as i64;
    let mut deferred: i64 = 0;
    let scan_from = skip_shapes(mask, open_end, delim);
    let mut last_closer = scan_from as i64 - 1;
    let mut marks = 1usize;
    let find = |from: usize| {
        bytes
            .get(from..)
            .and_then(|tail| tail.iter().position(|&c| c == delim))
            .map(|offset| from + offset)
    };
    let mut next_run = find(scan_from);
    while let Some(run_start) = next_run {
        let run_end = skip_byte(mask, run_start + 1, delim);
        if run_start == open_end {
            next_run = find(run_end);
            continue;
        }
        if let Some(memo) = memo
            && run_start > open_end + 1
            && mask.len() - run_start < memo.last
        {
            return None;
        }
        let class_before = class_of(char_before(mask, run_start));
        let class_after = class_of(char_at(mask, run_end));
        let both = if class_before == class_after {
            class_before == 1 || (star && class_before == 2)
        } else {
            false
        };
        let len = (run_end - run_start) as i64;
        if class_before < class_after && !both {
            unmatched += len;
            if memo.is_some_and(|memo| unmatched > memo.marks as i64) {
                return None;
            }
        } else if class_before > class_after || both {
            last_closer = run_start as i64;
            marks += run_end - run_start;
            if both && !open_len.is_multiple_of(3) && (open_len as i64 + len) % 3 == 0 {
                deferred += len;
            } else {
                unmatched -= len;
                if unmatched <= 0 {
                    let size = len + (unmatched + deferred).min(0);
                    return Some(Found {
                        start: run_start - open_end,
                        size: size.max(0) as usize,
                    });
                }
            }
        }
        next_run = find(run_end);
    }
    let last = (mask.len() as i64 - last_closer).max(0) as usize;
    notes.closers[slot] = Some(Closer { last, marks });
    None
}

/// JS: `sS` — a mask of `len` bytes (at least 2), appended to `out`.
fn push_mask(out: &mut String, len: usize) {
    out.push('[');
    out.extend(std::iter::repeat_n('a', len.saturating_sub(2)));
    out.push(']');
}

/// JS: `rS` — the text with links, code spans and escapes masked, for emphasis matching.
fn make_mask<'a>(text: &'a str, links: &Ctx) -> Cow<'a, str> {
    let masked = if links.links.is_empty() {
        Cow::Borrowed(text)
    } else {
        mask_reflinks(text, links)
    };
    // Each step returns its input borrowed when it changes nothing.
    let spans = match mask_inline_spans(&masked) {
        Cow::Owned(owned) => Some(owned),
        Cow::Borrowed(_) => None,
    };
    let masked = spans.map_or(masked, Cow::Owned);
    let escapes = match mask_escapes(&masked) {
        Cow::Owned(owned) => Some(owned),
        Cow::Borrowed(_) => None,
    };
    escapes.map_or(masked, Cow::Owned)
}

/// JS: `tI`.
fn mask_reflinks<'a>(src: &'a str, links: &Ctx) -> Cow<'a, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut next_bracket = find_byte(src, 0, b'[');
    while let Some(bracket) = next_bracket {
        let found = ref_label(src, bracket);
        let mut end = found.as_ref().map(|found| found.end);
        if let (Some(found), Some(ref_end)) = (&found, end)
            && found.is_short
            && byte(src, ref_end) == Some(b'(')
        {
            end = (ref_end >= 2
                && byte(src, ref_end - 2) == Some(b'[')
                && ref_end - bracket == found.label.len() + 4)
                .then(|| ref_end - 2);
        }
        let Some(end) = end else {
            next_bracket = find_byte(src, bracket + 1, b'[');
            continue;
        };
        let open = src[..end.saturating_sub(1)]
            .rfind('[')
            .map_or(0, |offset| offset + 1);
        if links
            .links
            .contains(js_slice(src, open, end.saturating_sub(1)))
        {
            let mask_start = if bracket > copied && byte(src, bracket - 1) == Some(b'!') {
                bracket - 1
            } else {
                bracket
            };
            out.reserve(src.len());
            out.push_str(&src[copied..mask_start]);
            push_mask(&mut out, end - mask_start);
            copied = end;
        }
        next_bracket = find_byte(src, end, b'[');
    }
    if copied == 0 {
        return Cow::Borrowed(src);
    }
    out.push_str(&src[copied..]);
    Cow::Owned(out)
}

/// JS: `nI` — end of `(...)` with at most one nested pair, from `start` (after `](`).
fn paren_end(src: &str, start: usize) -> Option<usize> {
    let bytes = src.as_bytes();
    let mut depth = 1;
    let mut pos = start;
    while pos < bytes.len() {
        match bytes[pos] {
            b'\\' => {
                let escaped = char_at(src, pos + 1)?;
                if is_js_line_terminator(escaped) {
                    return None;
                }
                pos += escaped.len_utf8();
            }
            b'(' => {
                depth += 1;
                if depth > 2 {
                    return None;
                }
            }
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(pos + 1);
                }
            }
            _ => {}
        }
        pos += 1;
    }
    None
}

/// JS: `bi` = `/\[[^[\]]*]\(|<[^<>]*>|`[^`]*`/g` — next match at or after `from`.
fn next_span(src: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = src.as_bytes();
    let mut i = from;
    while let Some(offset) = bytes
        .get(i..)
        .and_then(|tail| memchr::memchr3(b'[', b'<', b'`', tail))
    {
        i += offset;
        match bytes[i] {
            b'[' => {
                let close = memchr::memchr2(b'[', b']', &bytes[i + 1..])
                    .map_or(bytes.len(), |offset| i + 1 + offset);
                if bytes.get(close) == Some(&b']') && bytes.get(close + 1) == Some(&b'(') {
                    return Some((i, close + 2));
                }
            }
            b'<' => {
                let close = memchr::memchr2(b'<', b'>', &bytes[i + 1..])
                    .map_or(bytes.len(), |offset| i + 1 + offset);
                if bytes.get(close) == Some(&b'>') {
                    return Some((i, close + 1));
                }
            }
            _ => {
                if let Some(close) = find_byte(src, i + 1, b'`') {
                    return Some((i, close + 1));
                }
            }
        }
        i += 1;
    }
    None
}

/// JS: `nS`.
fn mask_inline_spans(src: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut changed = false;
    let mut copied = 0;
    let mut last = 0;
    while let Some((span_start, end)) = next_span(src, last) {
        let span_end = if src.as_bytes()[span_start] == b'[' {
            paren_end(src, end)
        } else {
            Some(end)
        };
        if let Some(span_end) = span_end {
            if !changed {
                out.reserve(src.len());
                changed = true;
            }
            out.push_str(&src[copied.min(span_start)..span_start]);
            push_mask(&mut out, span_end - span_start);
            copied = span_end;
        }
        last = span_end.unwrap_or(0).max(span_start + 1);
    }
    if !changed {
        return Cow::Borrowed(src);
    }
    out.push_str(&src[copied.min(src.len())..]);
    Cow::Owned(out)
}

/// JS: `oS` — `\` + punctuation becomes `++` (padded to keep byte offsets aligned).
fn mask_escapes(src: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut changed = false;
    let mut copied = 0;
    let mut next_backslash = find_byte(src, 0, b'\\');
    while let Some(backslash) = next_backslash {
        let escaped = char_at(src, backslash + 1);
        let mut next_from = backslash + 1;
        if class_of(escaped) == 1 {
            let len = 1 + escaped.map_or(0, char::len_utf8);
            if !changed {
                out.reserve(src.len());
                changed = true;
            }
            out.push_str(&src[copied..backslash]);
            out.extend(std::iter::repeat_n('+', len));
            copied = backslash + len;
            next_from = copied;
        }
        next_backslash = find_byte(src, next_from, b'\\');
    }
    if !changed {
        return Cow::Borrowed(src);
    }
    out.push_str(&src[copied.min(src.len())..]);
    Cow::Owned(out)
}
