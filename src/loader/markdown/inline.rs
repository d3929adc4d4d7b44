//! Inline tokenizer: a port of the inline half of Claude Code's markdown lexer (`gfm: false`).
//!
//! What matters downstream is where `text` tokens start and end (an `@path` is an import only
//! at the start of a text token or after whitespace), which spans are code, and which parts
//! are links or emphasis (their text is searched too). The per-call memo tables (`Notes`,
//! JS `vl`) are kept: they are what makes the original linear-time, and a few of them change
//! results in corner cases.

use std::collections::HashMap;

use super::block::{label_end, normalize_label};
use super::scan::*;
use super::{Ctx, Inline};

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum AbsentKey {
    Backticks(usize),
    PiClose,
    CommentClose,
    CdataClose,
    Gt,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
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
#[derive(Default)]
struct Notes {
    absent: HashMap<AbsentKey, usize>,
    ahead: HashMap<AheadKey, Option<usize>>,
    after_marks: Option<usize>,
    end_space: Option<usize>,
    closers: [Option<Closer>; 2],
}

impl Notes {
    fn is_absent(&self, e: &str, key: AbsentKey, pos: usize) -> bool {
        self.absent
            .get(&key)
            .is_some_and(|&v| e.len().saturating_sub(pos) <= v)
    }

    fn note_absent(&mut self, e: &str, key: AbsentKey, pos: usize) -> Option<usize> {
        self.absent.insert(key, e.len().saturating_sub(pos));
        None
    }

    /// Is there a `)`/`>` at or after `pos`? (JS `isAhead` with `YP`/`xl`.)
    fn is_ahead(&mut self, e: &str, key: AheadKey, pos: usize) -> bool {
        let needle = match key {
            AheadKey::CloseParen => ')',
            AheadKey::Gt => '>',
        };
        let from_end = *self
            .ahead
            .entry(key)
            .or_insert_with(|| e.rfind(needle).map(|i| e.len() - i));
        from_end.is_some_and(|h| e.len().saturating_sub(pos) >= h)
    }

    /// JS `past`: end of `needle` searched from `pos`, with the absent memo.
    fn past(&mut self, e: &str, key: AbsentKey, needle: &str, pos: usize) -> Option<usize> {
        if self.is_absent(e, key, pos) {
            return None;
        }
        match e.get(pos..).and_then(|r| r.find(needle)) {
            Some(p) => Some(pos + p + needle.len()),
            None => self.note_absent(e, key, pos),
        }
    }

    /// JS `hS`: is position `o` before the trailing whitespace of the text?
    fn before_end_space(&mut self, e: &str, o: usize) -> bool {
        let end_space = *self
            .end_space
            .get_or_insert_with(|| e.len() - js_trim_end(e).len());
        e.len() - o > end_space
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
fn dispatch(c: u8) -> &'static [Method] {
    use Method::*;
    match c {
        b'\\' => &[Escape, Br, InlineText],
        b' ' => &[Br, InlineText],
        b'<' => &[Tag, Autolink, InlineText],
        b'!' | b'[' => &[Link, Reflink, InlineText],
        b'*' | b'_' => &[EmStrong, InlineText],
        b'`' => &[Codespan, InlineText],
        _ => &[InlineText],
    }
}

/// JS: `Wze.inlineTokens` + `#o`.
pub(crate) fn inline_tokens(text: &str, links: &Ctx) -> Vec<Inline> {
    // Each nested call is one more JavaScript stack level in the original.
    if !links.enter(super::INLINE_LEVEL) || !links.spend(text.len()) {
        return Vec::new();
    }
    let tokens = inline_tokens_at_depth(text, links);
    links.leave(super::INLINE_LEVEL);
    tokens
}

fn inline_tokens_at_depth(text: &str, links: &Ctx) -> Vec<Inline> {
    let mut notes = Notes::default();
    let mut mask: Option<String> = None;
    let mut tokens: Vec<Inline> = Vec::new();
    let mut before = Before::None;
    let mut pos = 0;
    while pos < text.len() && !links.overflowed() {
        let rest = &text[pos..];
        let mut produced = None;
        for &m in dispatch(rest.as_bytes()[0]) {
            let tok = match m {
                Method::EmStrong => {
                    let mask = mask.get_or_insert_with(|| {
                        links.spend(text.len());
                        make_mask(text, links)
                    });
                    em_strong(rest, mask, before, &mut notes, links)
                }
                _ => run(m, rest, &mut notes, links),
            };
            if let Some(t) = tok {
                produced = Some((m, t));
                break;
            }
        }
        let Some((m, (tok, raw_len))) = produced else {
            break;
        };
        let is_text = m == Method::InlineText;
        let tok_is_text = matches!(tok, Inline::Text { .. });
        let raw_owned = match &tok {
            Inline::Text { raw } => Some(raw.clone()),
            _ => None,
        };
        match (tokens.last_mut(), tok) {
            (Some(Inline::Text { raw: last }), Inline::Text { raw })
                if is_text || (m == Method::Reflink && tok_is_text) =>
            {
                last.push_str(&raw);
            }
            (_, tok) => tokens.push(tok),
        }
        let consumed = ceil_boundary(rest, raw_len.max(1));
        if !is_text || !rest[..consumed].ends_with('_') {
            before = if is_text {
                Before::of_last(raw_owned.as_deref().unwrap_or(""))
            } else {
                Before::None
            };
        }
        pos += consumed;
    }
    tokens
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn run(m: Method, e: &str, notes: &mut Notes, links: &Ctx) -> Option<(Inline, usize)> {
    match m {
        Method::Escape => escape(e).map(|n| (Inline::Escape { raw: e[..n].into() }, n)),
        Method::Br => br(e, notes).map(|n| (Inline::Br, n)),
        Method::Tag => tag(e, notes).map(|n| (Inline::Html { raw: e[..n].into() }, n)),
        Method::Autolink => autolink(e).map(|(n, t)| {
            (
                Inline::Link {
                    tokens: vec![Inline::Text { raw: t }],
                },
                n,
            )
        }),
        Method::Link => link(e, notes, links),
        Method::Reflink => reflink(e, notes, links),
        Method::Codespan => {
            codespan(e, notes).map(|n| (Inline::Codespan { raw: e[..n].into() }, n))
        }
        Method::InlineText => {
            let n = inline_text_end(e, notes);
            (n > 0).then(|| (Inline::Text { raw: e[..n].into() }, n))
        }
        Method::EmStrong => None,
    }
}

/// JS: `jI` = `/^\\(?![\dA-Z])[!-~]/i`.
fn escape(e: &str) -> Option<usize> {
    let b = e.as_bytes();
    (b.first() == Some(&b'\\')
        && b.get(1)
            .is_some_and(|c| (b'!'..=b'~').contains(c) && !c.is_ascii_alphanumeric()))
    .then_some(2)
}

/// JS: `mS` with `kI` = `/(?:\\|  +)\n/y`.
fn br(e: &str, notes: &mut Notes) -> Option<usize> {
    let b = e.as_bytes();
    let r = if b.first() == Some(&b'\\') {
        (b.get(1) == Some(&b'\n')).then_some(2)?
    } else {
        let n = b.iter().take_while(|&&c| c == b' ').count();
        (n >= 2 && b.get(n) == Some(&b'\n')).then_some(n + 1)?
    };
    notes.before_end_space(e, r).then_some(r)
}

/// JS: `SS` (non-GFM) — end of a run of plain text.
fn inline_text_end(e: &str, notes: &mut Notes) -> usize {
    let b = e.as_bytes();
    // fI = /`+|[^]/y
    let h = if b.first() == Some(&b'`') {
        skip_byte(e, 0, b'`')
    } else {
        char_len_at(e, 0)
    };
    let mut y = h;
    while y < b.len() {
        match b[y] {
            b'!' | b'*' | b'<' | b'[' | b'\\' | b'_' | b'`' => return y,
            b' ' if b.get(y + 1) == Some(&b' ') && b.get(y + 2) == Some(&b'\n') => {
                let nl = y + 2;
                if !notes.before_end_space(e, nl) {
                    return e.len();
                }
                let mut k = nl;
                while k > h && b[k - 1] == b' ' {
                    k -= 1;
                }
                return k;
            }
            _ => y += 1,
        }
    }
    e.len()
}

/// JS: `Zu`+`fS` — a code span closed by a backtick run of the same length.
fn codespan(e: &str, notes: &mut Notes) -> Option<usize> {
    let o = skip_byte(e, 0, b'`');
    if o == 0 {
        return None;
    }
    let key = AbsentKey::Backticks(o);
    if notes.is_absent(e, key, o) {
        return None;
    }
    let mut g = e[o..].find('`').map(|p| o + p);
    while let Some(i) = g {
        let y = skip_byte(e, i, b'`');
        if y - i == o {
            return Some(y);
        }
        g = e[y..].find('`').map(|p| y + p);
    }
    notes.note_absent(e, key, o)
}

/// JS: `pS` — end of an inline HTML tag, comment, declaration or processing instruction.
fn tag(e: &str, notes: &mut Notes) -> Option<usize> {
    if byte(e, 0) != Some(b'<') {
        return None;
    }
    match byte(e, 1) {
        Some(b'?') => notes.past(e, AbsentKey::PiClose, "?>", 2),
        Some(b'!') => {
            if e[2..].starts_with("--") {
                return notes.past(e, AbsentKey::CommentClose, "-->", 2);
            }
            if e[2..].starts_with("[CDATA[") {
                return notes.past(e, AbsentKey::CdataClose, "]]>", 9);
            }
            // mI = /[A-Z]+\s/iy
            let n = e[2..].bytes().take_while(u8::is_ascii_alphabetic).count();
            let c = char_at(e, 2 + n)?;
            if n == 0 || !is_js_space(c) {
                return None;
            }
            notes.past(e, AbsentKey::Gt, ">", 2 + n + c.len_utf8())
        }
        Some(b'/') => {
            // hI = /[A-Z][-:\w]*\s*>/iy at 2
            if !byte(e, 2).is_some_and(|c| c.is_ascii_alphabetic()) {
                return None;
            }
            let mut j = 3;
            while byte(e, j)
                .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b':' | b'_'))
            {
                j += 1;
            }
            let j = skip_js_space(e, j);
            (byte(e, j) == Some(b'>')).then_some(j + 1)
        }
        _ => {
            let r = tag_name_end_at(e, 1);
            if r == 1 || !notes.is_ahead(e, AheadKey::Gt, r) {
                return None;
            }
            let mut i = r;
            while let Some(j) = super::block::attr_at(e, i, true) {
                if j <= i {
                    break;
                }
                i = j;
            }
            let j = skip_js_space(e, i);
            let j = if byte(e, j) == Some(b'/') { j + 1 } else { j };
            (byte(e, j) == Some(b'>')).then_some(j + 1)
        }
    }
}

fn tag_name_end_at(e: &str, i: usize) -> usize {
    if !byte(e, i).is_some_and(|b| b.is_ascii_alphabetic()) {
        return i;
    }
    let mut j = i + 1;
    while byte(e, j).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        j += 1;
    }
    j
}

/// JS: `Hxe.autolink` — `<scheme:…>` or `<address@domain>`; returns (raw length, text).
fn autolink(e: &str) -> Option<(usize, String)> {
    let b = e.as_bytes();
    if b.first() != Some(&b'<') {
        return None;
    }
    // FI = /<[A-Z][-+.\dA-Z]{1,31}:[!-;=?-\uffff]*>/iy
    if b.get(1).is_some_and(u8::is_ascii_alphabetic) {
        let n = b[2..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
            .count();
        if (1..=31).contains(&n) && b.get(2 + n) == Some(&b':') {
            let start = 3 + n;
            let run: usize = e[start..]
                .chars()
                .take_while(|&c| (c as u32) >= 0x21 && c != '<' && c != '>')
                .map(char::len_utf8)
                .sum();
            let end = start + run;
            if b.get(end) == Some(&b'>') {
                let raw = &e[..end + 1];
                if !raw.chars().any(is_js_space) {
                    return Some((end + 1, raw[1..raw.len() - 1].to_string()));
                }
            }
        }
    }
    // BI = /<[-!#-'*+./=?\w`{-~]+@/y
    let local = b[1..].iter().take_while(|&&c| is_email_local(c)).count();
    if local == 0 || b.get(1 + local) != Some(&b'@') {
        return None;
    }
    let r = 2 + local;
    let mut h = r;
    while let Some(j) = domain_label(e, h, b'.') {
        h = j;
    }
    if h <= r {
        return None;
    }
    let g = domain_label(e, h, b'>')?;
    Some((g, e[1..g - 1].to_string()))
}

fn is_email_local(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, b'-' | b'!' | b'#'..=b'\'' | b'*' | b'+' | b'.' | b'/' | b'=' | b'?' | b'_' | b'`' | b'{'..=b'~')
}

/// JS: `UI`/`$I` — a domain label at `i` followed by `end`; returns the index after `end`.
fn domain_label(e: &str, i: usize, end: u8) -> Option<usize> {
    let b = e.as_bytes();
    let n = b
        .get(i..)?
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'-')
        .count();
    if n == 0 || b[i] == b'-' || n >= 64 {
        return None;
    }
    (b[i + n - 1].is_ascii_alphanumeric() && b.get(i + n) == Some(&end)).then_some(i + n + 1)
}

/// JS: `Xu` — index of the `]` closing link text that starts at `o`.
fn link_text_end(e: &str, o: usize) -> Option<usize> {
    let b = e.as_bytes();
    let mut nested = false;
    let mut h = o;
    while h < b.len() {
        match b[h] {
            b'\\' => {
                let c = char_at(e, h + 1)?;
                if is_js_line_terminator(c) {
                    return None;
                }
                h += 1 + c.len_utf8();
                continue;
            }
            b'`' if !nested => {
                h = h + 1 + e[h + 1..].find('`')?;
            }
            b'[' => {
                if nested {
                    return None;
                }
                nested = true;
            }
            b']' => {
                if !nested {
                    return Some(h);
                }
                nested = false;
            }
            _ => {}
        }
        h += 1;
    }
    None
}

/// JS: `Ju` specialised for link titles (valid when followed by `\s*)`).
fn title_end(e: &str, o: usize, close: u8) -> Option<usize> {
    super::block::title_close(e, o, close, |e, p| close_paren_after(e, p).is_some())
}

/// JS: `Z_` — `\s*)` at `o`; returns the index after the `)`.
fn close_paren_after(e: &str, o: usize) -> Option<usize> {
    let r = skip_js_space(e, o);
    (byte(e, r) == Some(b')')).then_some(r + 1)
}

/// JS: `ZP` — after a destination `e[o..r]`, a `)` or a title then `)`; returns the end.
fn dest_tail(e: &str, r: Option<usize>) -> Option<usize> {
    let r = r?;
    let h = skip_js_space(e, r);
    match byte(e, h) {
        Some(b')') => Some(h + 1),
        Some(q @ (b'"' | b'\'' | b'(')) if h != r => {
            let close = if q == b'(' { b')' } else { q };
            let k = title_end(e, h, close)?;
            close_paren_after(e, k + 1)
        }
        _ => None,
    }
}

/// JS: `JP` = `/\([!-'*-;=-[\]-~]+\)/y` at `o`.
fn simple_dest(e: &str, o: usize) -> Option<usize> {
    let b = e.as_bytes();
    if b.get(o) != Some(&b'(') {
        return None;
    }
    let n = b[o + 1..]
        .iter()
        .take_while(|&&c| (0x21..=0x7e).contains(&c) && !matches!(c, b'(' | b')' | b'<' | b'\\'))
        .count();
    (n > 0 && b.get(o + 1 + n) == Some(&b')')).then_some(o + n + 2)
}

/// JS: `eI` — index of an unbalanced `)` in a bare destination.
fn unbalanced_paren(p: &str) -> Option<usize> {
    let b = p.as_bytes();
    let mut depth: i64 = 0;
    let mut r = 0;
    while r < b.len() {
        match b[r] {
            b')' if depth == 0 => return Some(r),
            b'\\' => {
                r += 1 + char_len_at(p, r + 1);
                continue;
            }
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ => {}
        }
        r += 1;
    }
    None
}

/// JS: `eS` — parse `(destination "title")` starting at `o`; returns the end index.
fn link_dest(e: &str, o: usize, notes: &mut Notes) -> Option<usize> {
    if let Some(h) = simple_dest(e, o) {
        return Some(h);
    }
    if !notes.is_ahead(e, AheadKey::CloseParen, o) {
        return None;
    }
    let g = skip_js_space(e, o + 1);
    let angle = byte(e, g) == Some(b'<');
    if angle && !notes.is_ahead(e, AheadKey::Gt, g) {
        return None;
    }
    // qP = /[^!-\uffff]|\s/g
    let k = g + e[g..]
        .chars()
        .take_while(|&c| (c as u32) >= 0x21 && !is_js_space(c))
        .map(char::len_utf8)
        .sum::<usize>();
    let mut found: Option<(usize, usize, usize)> = None; // (dest start, dest end, end)
    for n in (if angle { 0 } else { 1 })..3 {
        let (w, z) = match n {
            0 => {
                let mut z = g + 1;
                loop {
                    match byte(e, z) {
                        Some(b'\\')
                            if char_at(e, z + 1).is_some_and(|c| !is_js_line_terminator(c)) =>
                        {
                            z += 1 + char_len_at(e, z + 1)
                        }
                        Some(b'\n' | b'<' | b'>' | b'\\') | None => break,
                        Some(_) => z += char_len_at(e, z),
                    }
                }
                (g, (z > g + 1 && byte(e, z) == Some(b'>')).then_some(z + 1))
            }
            1 => (g, Some(k)),
            _ => match e[..k.min(e.len())].rfind(')') {
                Some(z) if z >= g => (g, Some(z)),
                _ => (o + 1, Some(o + 1)),
            },
        };
        if let Some(end) = dest_tail(e, z) {
            found = Some((w, z.unwrap_or(w), end));
            break;
        }
    }
    let (w, z, end) = found?;
    let dest = js_slice(e, w, z);
    if !angle {
        return match unbalanced_paren(dest) {
            None => Some(end),
            Some(n) => Some(js_trim_end(js_slice(e, 0, o + n + 2)).len()),
        };
    }
    let b = dest.as_bytes();
    let mut d = b.len() as isize - 1;
    while d >= 1 && b[(d - 1) as usize] == b'\\' {
        d -= 1;
    }
    if !dest.ends_with('>') || (b.len() as isize - 1 - d) % 2 == 1 {
        return None;
    }
    Some(end)
}

/// JS: `OS` — a link (its text lexed again) or an image (text not lexed).
fn link_token(raw_len: usize, e: &str, text: &str, links: &Ctx) -> (Inline, usize) {
    if e.starts_with('!') {
        return (Inline::Image, raw_len);
    }
    let inner = text.replace("\\[", "[").replace("\\]", "]");
    (
        Inline::Link {
            tokens: inline_tokens(&inner, links),
        },
        raw_len,
    )
}

/// JS: `Hxe.link`.
fn link(e: &str, notes: &mut Notes, links: &Ctx) -> Option<(Inline, usize)> {
    let o = usize::from(e.starts_with('!'));
    if byte(e, o) != Some(b'[') {
        return None;
    }
    let r = link_text_end(e, o + 1)?;
    if byte(e, r + 1) != Some(b'(') {
        return None;
    }
    let end = link_dest(e, r + 1, notes)?;
    Some(link_token(end, e, &e[o + 1..r], links))
}

struct RefLabel {
    end: usize,
    text_start: usize,
    text_end: usize,
    label: String,
    is_short: bool,
}

/// JS: `Al` — `[text][label]`, `[label][]` or `[label]` starting at `o`.
fn ref_label(e: &str, o: usize) -> Option<RefLabel> {
    if let Some(r) = link_text_end(e, o + 1)
        && byte(e, r + 1) == Some(b'[')
        && let Some(rr) = label_end(e, r + 2)
    {
        let text = &e[o + 1..r];
        let label = if rr > r + 2 { &e[r + 2..rr] } else { text };
        return Some(RefLabel {
            end: rr + 1,
            text_start: o + 1,
            text_end: r,
            label: label.into(),
            is_short: false,
        });
    }
    let h = label_end(e, o + 1)?;
    let end = if e[h + 1..].starts_with("[]") {
        h + 3
    } else {
        h + 1
    };
    Some(RefLabel {
        end,
        text_start: o + 1,
        text_end: h,
        label: e[o + 1..h].into(),
        is_short: true,
    })
}

/// JS: `Hxe.reflink`.
fn reflink(e: &str, _notes: &mut Notes, links: &Ctx) -> Option<(Inline, usize)> {
    let r = usize::from(e.starts_with('!'));
    if byte(e, r) != Some(b'[') {
        return None;
    }
    let h = ref_label(e, r)?;
    if !links.links.contains(&normalize_label(&h.label)) {
        return Some((Inline::Text { raw: e[..1].into() }, 1));
    }
    Some(link_token(h.end, e, &e[h.text_start..h.text_end], links))
}

// ---------------------------------------------------------------------------------------
// Emphasis (JS: lD, V_, Y_, KP) and the mask it runs on (JS: rS, tI, nS, oS)

/// JS: `lD` — `*em*`/`**strong**` starting here; the inner text is lexed again.
fn em_strong(
    o: &str,
    mask: &str,
    before: Before,
    notes: &mut Notes,
    links: &Ctx,
) -> Option<(Inline, usize)> {
    let y = *o.as_bytes().first()?;
    if y != b'*' && y != b'_' {
        return None;
    }
    let after = match notes.after_marks {
        Some(a) if o.len() > a => a,
        _ => {
            let a = o.len() - skip_byte(o, 1, y);
            notes.after_marks = Some(a);
            a
        }
    };
    let run = o.len() - after;
    if run >= o.len() || class_of(char_at(o, run)) == 0 {
        return None;
    }
    if !left_flank_ok(o, run, before) {
        return None;
    }
    let start = (mask.len() + run).saturating_sub(o.len());
    let d = find_closer(mask, start, y, run, notes)?;
    let end = (run + d.start + d.size).min(o.len());
    let raw = &o[..end];
    let w = 2 - (run.min(d.size) & 1);
    let inner = js_slice(raw, w, raw.len().saturating_sub(w));
    let tokens = inline_tokens(inner, links);
    let tok = if w == 1 {
        Inline::Em { tokens }
    } else {
        Inline::Strong { tokens }
    };
    Some((tok, end))
}

/// JS: `V_` with the non-GFM flag.
fn left_flank_ok(e: &str, run: usize, before: Before) -> bool {
    let g = match before {
        Before::None => return true,
        Before::Char(c) => Some(c),
        Before::LoneSurrogate => None,
    };
    if class_of(char_at(e, run)) == 2 {
        let letter = g.is_some_and(is_letter_or_number);
        return e.starts_with('*') || !letter;
    }
    match g {
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
fn skip_shapes(e: &str, o: usize, delim: u8) -> usize {
    let b = e.as_bytes();
    let run = |i: usize| {
        i + b[i.min(b.len())..]
            .iter()
            .take_while(|&&c| c != b'*' && c != b'_')
            .count()
    };
    let lit = |i: usize, s: &[u8]| b.get(i..i + s.len()) == Some(s);
    let end = if delim == b'*' {
        // [^*_]*__[^*_]*[*][^*_]*__
        let i = run(o);
        lit(i, b"__")
            .then(|| run(i + 2))
            .filter(|&j| lit(j, b"*"))
            .map(|j| run(j + 1))
            .filter(|&k| lit(k, b"__"))
            .map(|k| k + 2)
    } else {
        // [^*_]*[*]{2}[^*_]*_[^*_]*[*]{2}
        let i = run(o);
        lit(i, b"**")
            .then(|| run(i + 2))
            .filter(|&j| lit(j, b"_"))
            .map(|j| run(j + 1))
            .filter(|&k| lit(k, b"**"))
            .map(|k| k + 2)
    };
    match end {
        Some(x) => o.max(x.saturating_sub(2)),
        None => o,
    }
}

/// JS: `Y_` — find the delimiter run that closes an opener of `h` marks ending at `o`.
fn find_closer(e: &str, o: usize, delim: u8, h: usize, notes: &mut Notes) -> Option<Found> {
    let star = delim == b'*';
    let slot = usize::from(!star);
    let p = notes.closers[slot];
    if let Some(p) = p
        && e.len().saturating_sub(o) < p.last
        && byte(e, o + 1) != Some(delim)
    {
        return None;
    }
    let b = e.as_bytes();
    let mut n = h as i64;
    let mut w: i64 = 0;
    let z = skip_shapes(e, o, delim);
    let mut last_closer = z as i64 - 1;
    let mut marks = 1usize;
    let find = |from: usize| {
        b.get(from..)
            .and_then(|r| r.iter().position(|&c| c == delim))
            .map(|x| from + x)
    };
    let mut zz = find(z);
    while let Some(zi) = zz {
        let q = skip_byte(e, zi + 1, delim);
        if zi == o {
            zz = find(q);
            continue;
        }
        if let Some(p) = p
            && zi > o + 1
            && e.len() - zi < p.last
        {
            return None;
        }
        let me = class_of(char_before(e, zi));
        let be = class_of(char_at(e, q));
        let both = if me == be {
            me == 1 || (star && me == 2)
        } else {
            false
        };
        let len = (q - zi) as i64;
        if me < be && !both {
            n += len;
            if p.is_some_and(|p| n > p.marks as i64) {
                return None;
            }
        } else if me > be || both {
            last_closer = zi as i64;
            marks += q - zi;
            if both && !h.is_multiple_of(3) && (h as i64 + len) % 3 == 0 {
                w += len;
            } else {
                n -= len;
                if n <= 0 {
                    let size = len + (n + w).min(0);
                    return Some(Found {
                        start: zi - o,
                        size: size.max(0) as usize,
                    });
                }
            }
        }
        zz = find(q);
    }
    let last = (e.len() as i64 - last_closer).max(0) as usize;
    notes.closers[slot] = Some(Closer { last, marks });
    None
}

/// JS: `sS` — a mask of `n` bytes.
fn mask_of(n: usize) -> String {
    let mut s = String::from("[");
    while s.len() < n.saturating_sub(1) {
        s.push('a');
    }
    s.push(']');
    s
}

/// JS: `rS` — the text with links, code spans and escapes masked, for emphasis matching.
fn make_mask(text: &str, links: &Ctx) -> String {
    let t = if links.links.is_empty() {
        text.to_string()
    } else {
        mask_reflinks(text, links)
    };
    mask_escapes(&mask_inline_spans(&t))
}

/// JS: `tI`.
fn mask_reflinks(e: &str, links: &Ctx) -> String {
    let mut out = String::new();
    let mut h = 0;
    let mut g = e.find('[');
    while let Some(gi) = g {
        let y = ref_label(e, gi);
        let mut k = y.as_ref().map(|y| y.end);
        if let (Some(y), Some(kk)) = (&y, k)
            && y.is_short
            && byte(e, kk) == Some(b'(')
        {
            k = (kk >= 2 && byte(e, kk - 2) == Some(b'[') && kk - gi == y.label.len() + 4)
                .then(|| kk - 2);
        }
        let Some(k) = k else {
            g = e[gi + 1..].find('[').map(|p| gi + 1 + p);
            continue;
        };
        let open = e[..k.saturating_sub(1)].rfind('[').map_or(0, |p| p + 1);
        if links.links.contains(js_slice(e, open, k.saturating_sub(1))) {
            let r = if gi > h && byte(e, gi - 1) == Some(b'!') {
                gi - 1
            } else {
                gi
            };
            out.push_str(&e[h..r]);
            out.push_str(&mask_of(k - r));
            h = k;
        }
        g = e.get(k..).and_then(|s| s.find('[')).map(|p| k + p);
    }
    if h == 0 {
        return e.to_string();
    }
    out.push_str(&e[h..]);
    out
}

/// JS: `nI` — end of `(...)` with at most one nested pair, from `o` (after `](`).
fn paren_end(e: &str, o: usize) -> Option<usize> {
    let b = e.as_bytes();
    let mut depth = 1;
    let mut h = o;
    while h < b.len() {
        match b[h] {
            b'\\' => {
                let c = char_at(e, h + 1)?;
                if is_js_line_terminator(c) {
                    return None;
                }
                h += c.len_utf8();
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
                    return Some(h + 1);
                }
            }
            _ => {}
        }
        h += 1;
    }
    None
}

/// JS: `bi` = `/\[[^[\]]*]\(|<[^<>]*>|`[^`]*`/g` — next match at or after `from`.
fn next_span(e: &str, from: usize) -> Option<(usize, usize)> {
    let b = e.as_bytes();
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'[' => {
                let n = b[i + 1..]
                    .iter()
                    .take_while(|&&c| c != b'[' && c != b']')
                    .count();
                let j = i + 1 + n;
                if b.get(j) == Some(&b']') && b.get(j + 1) == Some(&b'(') {
                    return Some((i, j + 2));
                }
            }
            b'<' => {
                let n = b[i + 1..]
                    .iter()
                    .take_while(|&&c| c != b'<' && c != b'>')
                    .count();
                if b.get(i + 1 + n) == Some(&b'>') {
                    return Some((i, i + n + 2));
                }
            }
            b'`' => {
                if let Some(p) = e[i + 1..].find('`') {
                    return Some((i, i + p + 2));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// JS: `nS`.
fn mask_inline_spans(e: &str) -> String {
    let mut out = String::new();
    let mut r = 0;
    let mut last = 0;
    while let Some((g, end)) = next_span(e, last) {
        let y = if e.as_bytes()[g] == b'[' {
            paren_end(e, end)
        } else {
            Some(end)
        };
        if let Some(y) = y {
            out.push_str(&e[r.min(g)..g]);
            out.push_str(&mask_of(y - g));
            r = y;
        }
        last = y.unwrap_or(0).max(g + 1);
    }
    out.push_str(&e[r.min(e.len())..]);
    out
}

/// JS: `oS` — `\` + punctuation becomes `++` (padded to keep byte offsets aligned).
fn mask_escapes(e: &str) -> String {
    let mut out = String::new();
    let mut r = 0;
    let mut h = e.find('\\');
    while let Some(hi) = h {
        let c = char_at(e, hi + 1);
        let mut next_from = hi + 1;
        if class_of(c) == 1 {
            let n = 1 + c.map_or(0, char::len_utf8);
            out.push_str(&e[r..hi]);
            out.push_str(&"+".repeat(n));
            r = hi + n;
            next_from = r;
        }
        h = e
            .get(next_from..)
            .and_then(|s| s.find('\\'))
            .map(|p| next_from + p);
    }
    out.push_str(&e[r.min(e.len())..]);
    out
}
