//! Character classes and small scanners with the exact semantics of the JavaScript regexes
//! in Claude Code's markdown lexer.
//!
//! The lexer is a port of minified JavaScript that leans on sticky regexes (`/…/y`) and on
//! JavaScript's definitions of `\s`, `.`, `trim()` and friends, which differ from Rust's
//! (`char::is_whitespace` knows U+0085 but not U+FEFF, for instance). Every helper here names
//! the JavaScript construct it stands for, so the port can be checked line by line.
//! Positions are byte offsets into UTF-8 text; every scanner only stops on char boundaries.

use super::unicode::{LETTER_OR_NUMBER, PUNCT_OR_SYMBOL};

/// JavaScript `\s` (WhiteSpace + LineTerminator), which is also what `trim()` removes.
pub(crate) fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// JavaScript line terminators: what `.` does not match.
pub(crate) fn is_js_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// JavaScript's `s.length`: UTF-16 code units (a character beyond U+FFFF is two). Counted
/// from the bytes: one unit per character start, one more per four-byte sequence.
pub(crate) fn js_length(s: &str) -> usize {
    if s.is_ascii() {
        return s.len();
    }
    s.bytes()
        .map(|b| usize::from(b & 0xc0 != 0x80) + usize::from(b >= 0xf0))
        .sum()
}

/// `String.prototype.trim()`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// `String.prototype.trimStart()`.
pub(crate) fn js_trim_start(s: &str) -> &str {
    s.trim_start_matches(is_js_space)
}

/// `String.prototype.trimEnd()`.
pub(crate) fn js_trim_end(s: &str) -> &str {
    s.trim_end_matches(is_js_space)
}

/// True when `s.trim()` would be empty.
pub(crate) fn js_is_blank(s: &str) -> bool {
    s.chars().all(is_js_space)
}

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let cp = c as u32;
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                std::cmp::Ordering::Less
            } else if lo > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

const ASCII_CLASS: &[u8; 128] = b"22222222200000222222222222222222011111111111111122222222221111111222222222222222222222222221111112222222222222222222222222211112";

/// Character class used by the emphasis rules (JS `fl`): 0 whitespace, 1 punctuation or
/// symbol, 2 anything else. `None` (before the start / past the end) counts as whitespace.
pub(crate) fn class_of(c: Option<char>) -> u8 {
    match c {
        None => 0,
        Some(c) if (c as u32) < 128 => ASCII_CLASS[c as usize] - b'0',
        Some(c) if is_js_space(c) => 0,
        Some(c) if in_table(PUNCT_OR_SYMBOL, c) => 1,
        Some(_) => 2,
    }
}

/// `[\p{L}\p{N}]` with the `u` flag.
pub(crate) fn is_letter_or_number(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric()
    } else {
        in_table(LETTER_OR_NUMBER, c)
    }
}

/// The byte at `i`, if any (JS `charCodeAt` compared against ASCII constants).
pub(crate) fn byte(s: &str, i: usize) -> Option<u8> {
    s.as_bytes().get(i).copied()
}

/// The char starting at byte `i` (JS `codePointAt`).
pub(crate) fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|tail| tail.chars().next())
}

/// The char ending at byte `i`.
pub(crate) fn char_before(s: &str, i: usize) -> Option<char> {
    s.get(..i).and_then(|head| head.chars().next_back())
}

/// Byte length of the char starting at `i` (1 past the end, so loops always advance).
pub(crate) fn char_len_at(s: &str, i: usize) -> usize {
    char_at(s, i).map_or(1, char::len_utf8)
}

/// `gn`: skip a run of `target` starting at `i`.
pub(crate) fn skip_byte(s: &str, mut i: usize, target: u8) -> usize {
    while byte(s, i) == Some(target) {
        i += 1;
    }
    i
}

/// Index of the next byte `b` at or after `i` (an ASCII byte, so on a char boundary).
pub(crate) fn find_byte(s: &str, i: usize, b: u8) -> Option<usize> {
    let tail = s.as_bytes().get(i..)?;
    memchr::memchr(b, tail).map(|offset| i + offset)
}

/// `ln`: index of the next `\n` at or after `i`, or the length.
pub(crate) fn line_end(s: &str, i: usize) -> usize {
    find_byte(s, i, b'\n').unwrap_or(s.len())
}

/// `nr`: at the end of the text or on a `\n`.
pub(crate) fn at_eol(s: &str, i: usize) -> bool {
    i >= s.len() || byte(s, i) == Some(b'\n')
}

/// `oo`: skip up to three spaces.
pub(crate) fn skip_3_spaces(s: &str, i: usize) -> usize {
    let mut j = i;
    while j < i + 3 && byte(s, j) == Some(b' ') {
        j += 1;
    }
    j
}

/// `ml`: skip spaces and tabs.
pub(crate) fn skip_blanks(s: &str, mut i: usize) -> usize {
    while matches!(byte(s, i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// `mo`: skip JavaScript whitespace (`\s*`).
pub(crate) fn skip_js_space(s: &str, mut i: usize) -> usize {
    while let Some(c) = char_at(s, i) {
        if !is_js_space(c) {
            break;
        }
        i += c.len_utf8();
    }
    i
}

/// `gi`: strip trailing `\n` bytes.
pub(crate) fn trim_trailing_newlines(s: &str) -> &str {
    s.trim_end_matches('\n')
}

/// `tr`: index of the next line terminator (`[\u2028\u2029\n\r]`) at or after `i`, or the
/// length.
pub(crate) fn next_terminator(s: &str, i: usize) -> usize {
    let bytes = s.as_bytes();
    let mut from = i;
    // `\n`, `\r`, or the first byte of U+2028 / U+2029 (E2 80 A8 / E2 80 A9).
    while let Some(offset) = bytes
        .get(from..)
        .and_then(|tail| memchr::memchr3(b'\n', b'\r', 0xe2, tail))
    {
        let at = from + offset;
        if terminator_end(bytes, at).is_some() {
            return at;
        }
        from = at + 1; // another character starting with 0xE2
    }
    s.len()
}

/// Where the JavaScript line terminator (`[\n\r\u2028\u2029]`) at byte `i` ends, if one is
/// there.
pub(crate) fn terminator_end(bytes: &[u8], i: usize) -> Option<usize> {
    match bytes.get(i)? {
        b'\n' | b'\r' => Some(i + 1),
        0xe2 if bytes.get(i + 1) == Some(&0x80)
            && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9)) =>
        {
            Some(i + 3)
        }
        _ => None,
    }
}

/// `.*` from `i`: end of the run of chars that are not line terminators.
pub(crate) fn dot_star(s: &str, i: usize) -> usize {
    next_terminator(s, i)
}

/// JS `s.slice(count)` where `count` counts UTF-16 units; used where the count comes from
/// columns and the text may hold non-ASCII whitespace.
pub(crate) fn skip_utf16_units(s: &str, count: usize) -> &str {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        if units >= count {
            return &s[i..];
        }
        units += c.len_utf16();
    }
    ""
}

/// `s.search(/[^ ]|$/)`: index of the first non-space byte, or the length.
pub(crate) fn first_non_space(s: &str) -> usize {
    s.bytes().position(|b| b != b' ').unwrap_or(s.len())
}

/// Safe slice that clamps like JavaScript's `slice` (both ends clamped, empty when reversed).
pub(crate) fn js_slice(s: &str, start: usize, end: usize) -> &str {
    let end = end.min(s.len());
    let start = start.min(end);
    s.get(start..end).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_whitespace_differs_from_rust() {
        assert!(is_js_space('\u{feff}'));
        assert!(!is_js_space('\u{85}'));
        assert_eq!(js_trim("\u{feff} a \u{3000}"), "a");
        assert_eq!(js_trim("\u{85}a"), "\u{85}a");
    }

    #[test]
    fn classes() {
        assert_eq!(class_of(Some(' ')), 0);
        assert_eq!(class_of(Some('*')), 1);
        assert_eq!(class_of(Some('a')), 2);
        assert_eq!(class_of(Some('—')), 1);
        assert_eq!(class_of(Some('é')), 2);
        assert_eq!(class_of(None), 0);
        assert!(is_letter_or_number('é'));
        assert!(!is_letter_or_number('—'));
    }

    #[test]
    fn utf16_slicing() {
        assert_eq!(skip_utf16_units("\u{3000}x", 1), "x");
        assert_eq!(skip_utf16_units("\u{1F600}x", 2), "x");
        assert_eq!(skip_utf16_units("ab", 5), "");
    }
}

#[cfg(test)]
mod js_length_tests {
    use super::js_length;

    #[test]
    fn js_length_counts_utf16_code_units() {
        for text in [
            "",
            "abc",
            "caf\u{e9}",
            "\u{20ac}1",
            "a\u{1f600}b",
            "\u{10000}\u{10ffff}\u{ffff}",
        ] {
            assert_eq!(js_length(text), text.encode_utf16().count(), "{text:?}");
        }
    }
}
