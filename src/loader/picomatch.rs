//! The glob dialect of `claudeMdExcludes`: picomatch with `{ dot: true }`, as Claude Code
//! calls it (`picomatch(patterns, { dot: true })`: a path is excluded when *any* pattern
//! matches it).
//!
//! A small port of what picomatch does with the patterns people write: `*`, `?`, `**` as a
//! whole segment, `[…]` classes (`!`/`^` negated), `{a,b}` alternatives, the extglobs
//! `@(a|b)`, `?(…)`, `+(…)`, `*(…)`, `!(…)`, `\` escapes, and a leading `!` that negates the
//! whole pattern (so `["!**/keep.md"]` excludes everything *but* `keep.md`: cases 50–56).
//! Matching is backtracking over a token list, capped at [`MAX_STEPS`] steps per path (a
//! pattern like `*a*a*a*a*b` could otherwise take exponential time, and an agent can write
//! the settings file): past the cap the pattern counts as not matching.

use std::cell::Cell;

/// Backtracking steps allowed for one pattern against one path.
const MAX_STEPS: u32 = 100_000;

thread_local! {
    static STEPS: Cell<u32> = const { Cell::new(0) };
}

/// One compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    negated: bool,
    tokens: Vec<Tok>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(char),
    /// `?`: one character other than `/`.
    One,
    /// `*`: any run of characters other than `/`.
    Star,
    /// `**` as a whole segment, with its following `/`: any number of whole segments.
    GlobStar,
    /// `[…]`.
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
    /// `{a,b}` and the extglobs.
    Group {
        kind: GroupKind,
        alts: Vec<Vec<Tok>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupKind {
    /// `@(…)` and `{…}`: exactly one.
    One,
    /// `?(…)`: zero or one.
    Optional,
    /// `+(…)`: one or more.
    Plus,
    /// `*(…)`: zero or more.
    Any,
    /// `!(…)`: anything in the segment that is none of them.
    Not,
}

impl Pattern {
    /// Compile `pattern` (backslashes already turned into `/` by the caller when wanted).
    pub(crate) fn new(pattern: &str) -> Pattern {
        let chars: Vec<char> = pattern.chars().collect();
        let mut negated = false;
        let mut start = 0;
        while chars.get(start) == Some(&'!') && chars.get(start + 1) != Some(&'(') {
            negated = !negated;
            start += 1;
        }
        let mut i = 0;
        let tokens = parse_seq(&chars[start..], &mut i, &[]);
        Pattern { negated, tokens }
    }

    /// Does `path` match?
    pub(crate) fn is_match(&self, path: &str) -> bool {
        let s: Vec<char> = path.chars().collect();
        STEPS.with(|c| c.set(0));
        let matched = matches_at(&self.tokens, &s, 0);
        if STEPS.with(Cell::get) > MAX_STEPS {
            tracing::debug!(
                path,
                "claudeMdExcludes pattern too costly to match; skipped"
            );
            return false;
        }
        matched != self.negated
    }
}

/// Parse until one of `stops` (at depth 0) or the end.
fn parse_seq(c: &[char], i: &mut usize, stops: &[char]) -> Vec<Tok> {
    let mut out = Vec::new();
    while *i < c.len() {
        let ch = c[*i];
        if stops.contains(&ch) {
            break;
        }
        let next = c.get(*i + 1).copied();
        let at_segment_start = *i == 0 || c[*i - 1] == '/';
        match ch {
            '\\' if next.is_some() => {
                out.push(Tok::Lit(c[*i + 1]));
                *i += 2;
            }
            '@' | '?' | '+' | '*' | '!' if next == Some('(') && has_close(c, *i + 2, ')') => {
                let kind = match ch {
                    '@' => GroupKind::One,
                    '?' => GroupKind::Optional,
                    '+' => GroupKind::Plus,
                    '*' => GroupKind::Any,
                    _ => GroupKind::Not,
                };
                *i += 2;
                let alts = parse_alts(c, i, '|', ')');
                out.push(Tok::Group { kind, alts });
            }
            '*' if next == Some('*')
                && at_segment_start
                && matches!(c.get(*i + 2), None | Some('/')) =>
            {
                *i += 2;
                if c.get(*i) == Some(&'/') {
                    *i += 1;
                }
                out.push(Tok::GlobStar);
            }
            '*' => {
                while c.get(*i) == Some(&'*') {
                    *i += 1;
                }
                out.push(Tok::Star);
            }
            '?' => {
                out.push(Tok::One);
                *i += 1;
            }
            '[' if has_close(c, *i + 1, ']') => {
                *i += 1;
                out.push(parse_class(c, i));
            }
            '{' if has_close(c, *i + 1, '}') && brace_has_comma(c, *i + 1) => {
                *i += 1;
                let alts = parse_alts(c, i, ',', '}');
                out.push(Tok::Group {
                    kind: GroupKind::One,
                    alts,
                });
            }
            _ => {
                out.push(Tok::Lit(ch));
                *i += 1;
            }
        }
    }
    out
}

/// Alternatives separated by `sep` up to `close` (consumed).
fn parse_alts(c: &[char], i: &mut usize, sep: char, close: char) -> Vec<Vec<Tok>> {
    let mut alts = Vec::new();
    loop {
        alts.push(parse_seq(c, i, &[sep, close]));
        match c.get(*i) {
            Some(&ch) if ch == sep => *i += 1,
            Some(_) => {
                *i += 1;
                break;
            }
            None => break,
        }
    }
    alts
}

fn parse_class(c: &[char], i: &mut usize) -> Tok {
    let negated = matches!(c.get(*i), Some('!' | '^'));
    if negated {
        *i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    while *i < c.len() && (c[*i] != ']' || first) {
        first = false;
        let mut lo = c[*i];
        if lo == '\\' && *i + 1 < c.len() {
            *i += 1;
            lo = c[*i];
        }
        *i += 1;
        if c.get(*i) == Some(&'-') && c.get(*i + 1).is_some_and(|h| *h != ']') {
            let hi = c[*i + 1];
            *i += 2;
            items.push((lo, hi));
        } else {
            items.push((lo, lo));
        }
    }
    *i += 1; // `]`
    Tok::Class { negated, items }
}

/// Is there a `close` after `from`, with parentheses or braces balanced?
fn has_close(c: &[char], from: usize, close: char) -> bool {
    let open = match close {
        ')' => '(',
        '}' => '{',
        _ => return c[from.min(c.len())..].contains(&close),
    };
    let mut depth = 0;
    for &ch in &c[from.min(c.len())..] {
        if ch == open {
            depth += 1;
        } else if ch == close {
            if depth == 0 {
                return true;
            }
            depth -= 1;
        }
    }
    false
}

/// `{a}` with no comma is literal in picomatch.
fn brace_has_comma(c: &[char], from: usize) -> bool {
    let mut depth = 0;
    for &ch in &c[from..] {
        match ch {
            '{' => depth += 1,
            '}' if depth == 0 => return false,
            '}' => depth -= 1,
            ',' if depth == 0 => return true,
            _ => {}
        }
    }
    false
}

/// Do `toks` match `s[p..]` entirely?
fn matches_at(toks: &[Tok], s: &[char], p: usize) -> bool {
    let steps = STEPS.with(|c| {
        c.set(c.get().saturating_add(1));
        c.get()
    });
    if steps > MAX_STEPS {
        return false;
    }
    let Some((tok, rest)) = toks.split_first() else {
        return p == s.len();
    };
    let segment_end = s[p..]
        .iter()
        .position(|c| *c == '/')
        .map_or(s.len(), |n| p + n);
    match tok {
        Tok::Lit(ch) => s.get(p) == Some(ch) && matches_at(rest, s, p + 1),
        Tok::One => s.get(p).is_some_and(|c| *c != '/') && matches_at(rest, s, p + 1),
        Tok::Star => (p..=segment_end).any(|e| matches_at(rest, s, e)),
        Tok::GlobStar => (p..=s.len())
            .filter(|&e| e == p || s[e - 1] == '/' || e == s.len())
            .any(|e| matches_at(rest, s, e)),
        Tok::Class { negated, items } => {
            s.get(p).is_some_and(|c| {
                *c != '/' && items.iter().any(|(lo, hi)| lo <= c && c <= hi) != *negated
            }) && matches_at(rest, s, p + 1)
        }
        Tok::Group { kind, alts } => {
            let one = |from: usize, to: usize| alts.iter().any(|a| matches_at(a, &s[from..to], 0));
            match kind {
                GroupKind::One => (p..=s.len()).any(|e| one(p, e) && matches_at(rest, s, e)),
                GroupKind::Optional => {
                    matches_at(rest, s, p)
                        || (p..=s.len()).any(|e| one(p, e) && matches_at(rest, s, e))
                }
                GroupKind::Plus | GroupKind::Any => {
                    repeat(alts, s, p, rest, *kind == GroupKind::Any)
                }
                GroupKind::Not => (p..=segment_end).any(|e| !one(p, e) && matches_at(rest, s, e)),
            }
        }
    }
}

/// One or more (`+(…)`) or zero or more (`*(…)`) alternatives, then `rest`.
fn repeat(alts: &[Vec<Tok>], s: &[char], p: usize, rest: &[Tok], zero_ok: bool) -> bool {
    if zero_ok && matches_at(rest, s, p) {
        return true;
    }
    (p + 1..=s.len())
        .any(|e| alts.iter().any(|a| matches_at(a, &s[p..e], 0)) && repeat(alts, s, e, rest, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        Pattern::new(pattern).is_match(path)
    }

    #[test]
    fn stars_and_globstars() {
        assert!(m("**/CLAUDE.md", "/r/x/CLAUDE.md"));
        assert!(m("**/*.md", "/r/.claude/CLAUDE.md"), "dot: true");
        assert!(!m("**/x/CLAUDE.md", "/r/x/y/CLAUDE.md"));
        assert!(m("/r/**", "/r/a/b.md"));
        assert!(m(
            "**/some-dir/.claude/rules/**",
            "/r/some-dir/.claude/rules/a/b.md"
        ));
        assert!(!m("*.md", "/r/a.md"));
        assert!(
            !m("CLAUDE.local.md", "/r/p/CLAUDE.local.md"),
            "no basename matching"
        );
        assert!(m("/r/?.md", "/r/a.md"));
        assert!(!m("/r/?.md", "/r/ab.md"));
    }

    #[test]
    fn negation_is_per_pattern() {
        assert!(!m("!**/p/CLAUDE.md", "/r/p/CLAUDE.md"));
        assert!(m("!**/p/CLAUDE.md", "/r/x/CLAUDE.md"));
        assert!(m("!!**/p/CLAUDE.md", "/r/p/CLAUDE.md"));
    }

    #[test]
    fn extglobs_braces_classes() {
        assert!(m("**/@(a|b)/*.md", "/r/p/b/two.md"));
        assert!(!m("**/@(a|b)/*.md", "/r/p/keep/three.md"));
        assert!(m("**/x/@(CLAUDE|AGENTS).md", "/r/x/CLAUDE.md"));
        assert!(m("**/p/!(keep)/*.md", "/r/p/a/one.md"));
        assert!(!m("**/p/!(keep)/*.md", "/r/p/keep/three.md"));
        assert!(m("**/+(x)/CLAUDE.md", "/r/xx/CLAUDE.md"));
        assert!(!m("**/+(x)/CLAUDE.md", "/r/y/CLAUDE.md"));
        assert!(m("**/*(b)/two.md", "/r/p/b/two.md"));
        assert!(m("**/?(k)eep/*.md", "/r/p/keep/three.md"));
        assert!(m("**/?(k)eep/*.md", "/r/p/eep/three.md"));
        assert!(m("**/[bk]*/*.md", "/r/p/keep/three.md"));
        assert!(!m("**/[!bk]*/two.md", "/r/p/b/two.md"));
        assert!(m("**/y/{CLAUDE,nothing}.md", "/r/x/y/CLAUDE.md"));
        assert!(
            m("/r/{a}.md", "/r/{a}.md"),
            "a brace without a comma is literal"
        );
    }

    #[test]
    fn costly_patterns_are_cut_off() {
        let path = format!("/{}", "a".repeat(200));
        let pattern = format!("/{}b", "*a".repeat(30));
        let started = std::time::Instant::now();
        assert!(!m(&pattern, &path));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // A negated costly pattern does not turn into "matches everything".
        assert!(!m(&format!("!{pattern}"), &path));
    }
}
