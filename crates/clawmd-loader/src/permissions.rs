//! `Read` deny rules (`permissions.deny` in a settings file) as Claude Code applies them to
//! memory files (issue 38): a project or local memory file, or anything such a file imports,
//! whose path (as written or as resolved) a `Read` deny rule matches is *withheld* — not
//! loaded, with no trace in the memory block. Measured with the real 2.1.328, 2.1.332 and
//! 2.1.333 (CLI and Agent SDK; `tests/fixtures/agent-settings-probe/`, and the forms below by
//! `scripts/probe-agent-settings one`):
//!
//! * the rule is `Read` (every file) or `Read(<pattern>)`; `Read()` and any other tool's rule
//!   (`Edit(…)`, `read(…)`) withhold nothing;
//! * the pattern's root: `//x` is `/x`; `~/x` is `<home>/x`; `/x` is `x` under the settings
//!   file's own root (the project folder for project and local settings; `~/.claude` for the
//!   user's); anything else (`./x`, `x`) is relative to the working directory, `./` dropped;
//! * then gitignore's rules, as the `ignore` package applies them, **case-insensitively**
//!   (`Read(./claude.local.md)` and `Read(//WORKSPACE/agent/claude.local.md)` withhold
//!   `/workspace/agent/CLAUDE.local.md`): a pattern with no `/` but a trailing one matches a
//!   name at any depth (`CLAUDE.local.md`, `*.md`, `C?AUDE.local.md`); one with a `/` is
//!   anchored at the root (`.claude-fragments/**`, `/CLAUDE.md`); `*` and `?` stay within a
//!   name, `**` as a whole segment spans folders; a trailing `/` matches folders only; a
//!   folder that matches withholds everything in it (`Read(./.claude-fragments)`); trailing
//!   spaces are dropped; `{a,b}` is literal, and a path outside the root never matches;
//! * the managed file and the user's own files are never withheld.
//!
//! What clawmd does not reproduce exactly (a `[class]`, a `\` escape, a leading `!` or `#`, a
//! `**` inside a name, a `..` segment, text that is not ASCII) is *undecided*: the verdict is
//! never complete while such a rule is there.

use std::path::{Component, Path, PathBuf};

/// A `Read` deny rule, resolved against its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    /// `None`: bare `Read`, every path.
    pub(crate) root: Option<PathBuf>,
    /// The gitignore pattern, relative to `root`, trailing spaces dropped.
    pub(crate) pattern: String,
}

/// Where a rule's pattern starts.
pub(crate) struct Roots<'a> {
    /// The working directory (real path).
    pub(crate) cwd: &'a Path,
    /// `$HOME`, when known.
    pub(crate) home: Option<&'a Path>,
    /// The settings file's own root (`/x`), when known.
    pub(crate) settings_root: Option<&'a Path>,
}

/// What a rule string is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// Not a `Read` rule (another tool's, or `Read()`): withholds nothing.
    Other,
    /// A `Read` rule clawmd matches exactly.
    Exact(Rule),
    /// A `Read` rule clawmd cannot read as Claude Code does, and why.
    Undecided(String),
    /// A `Read` rule clawmd matches on a best reading only (a class, an escape…), and why it
    /// is not exact.
    Inexact(Rule, String),
}

/// Reads one `permissions.deny` entry.
pub(crate) fn parse(rule: &str, roots: &Roots<'_>) -> Parsed {
    if rule == "Read" {
        return Parsed::Exact(Rule {
            root: None,
            pattern: String::new(),
        });
    }
    let Some(inner) = rule
        .strip_prefix("Read(")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        // Claude Code's parser accepts some spellings clawmd does not model (spaces around
        // the tool name, escaped parentheses): undecided rather than ignored.
        let after = rule.trim().strip_prefix("Read").map(str::trim_start);
        return match after.is_some_and(|rest| rest.is_empty() || rest.starts_with('(')) {
            true => Parsed::Undecided(format!(
                "clawmd cannot tell how Claude Code reads the rule {rule:?}"
            )),
            false => Parsed::Other,
        };
    };
    if inner.is_empty() {
        return Parsed::Other;
    }
    if inner.contains(['(', ')']) {
        return Parsed::Undecided(format!(
            "the rule {rule:?} holds a parenthesis, which Claude Code's rule parser may read otherwise"
        ));
    }
    let (root, pattern) = if let Some(rest) = inner.strip_prefix("//") {
        (PathBuf::from("/"), format!("/{rest}"))
    } else if let Some(rest) = inner.strip_prefix("~/") {
        let Some(home) = roots.home else {
            return Parsed::Undecided(format!(
                "the rule {rule:?} is relative to the agent's home, which clawmd does not know here"
            ));
        };
        (home.to_owned(), format!("/{rest}"))
    } else if inner.starts_with('/') {
        let Some(root) = roots.settings_root else {
            return Parsed::Undecided(format!(
                "the rule {rule:?} is relative to its settings file's root, which clawmd does not model for this file"
            ));
        };
        (root.to_owned(), inner.to_owned())
    } else {
        let rest = inner.strip_prefix("./").unwrap_or(inner);
        (roots.cwd.to_owned(), rest.to_owned())
    };
    // gitignore drops unescaped trailing spaces.
    let pattern = pattern.trim_end_matches(' ').to_owned();
    let checked = check_exact(&pattern);
    let rule_read = Rule {
        root: Some(root),
        pattern,
    };
    match checked {
        Ok(()) => Parsed::Exact(rule_read),
        Err(why) => Parsed::Inexact(
            rule_read,
            format!("clawmd cannot match the rule {rule:?} exactly as Claude Code does ({why})"),
        ),
    }
}

/// The subset of gitignore patterns clawmd matches exactly.
fn check_exact(pattern: &str) -> Result<(), &'static str> {
    if !pattern.is_ascii() {
        return Err("it is not ASCII, and the match ignores case");
    }
    if pattern.contains(['[', ']', '\\']) {
        return Err("character classes and escapes are not modelled");
    }
    if pattern.starts_with(['!', '#']) {
        return Err("a leading ! or # is not modelled");
    }
    let body = pattern.trim_start_matches('/').trim_end_matches('/');
    for segment in body.split('/') {
        if segment.contains("**") && segment != "**" {
            return Err("** inside a name is not modelled");
        }
        if segment == ".." || segment == "." {
            return Err("a . or .. segment is not modelled");
        }
    }
    if body.is_empty() {
        return Err("an empty pattern is not modelled");
    }
    Ok(())
}

impl Rule {
    /// Whether the rule withholds `path` (absolute, lexically normal).
    pub(crate) fn matches(&self, path: &Path) -> bool {
        let Some(root) = &self.root else {
            return true;
        };
        let Ok(rel) = path.strip_prefix(root) else {
            return false;
        };
        let names: Vec<String> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name.to_string_lossy().to_ascii_lowercase()),
                _ => None,
            })
            .collect();
        if names.is_empty() {
            return false;
        }
        // Best reading: a negation or a comment alone denies nothing (measured for `!`).
        if self.pattern.starts_with(['!', '#']) {
            return false;
        }
        let dir_only = self.pattern.ends_with('/');
        let body = self.pattern.trim_end_matches('/');
        let anchored = body.contains('/');
        let body = body.trim_start_matches('/').to_ascii_lowercase();
        let segments: Vec<&str> = body.split('/').collect();
        // The path and each folder above it, within the root (the `ignore` package checks the
        // parents first: a folder that matches withholds everything in it).
        (1..=names.len()).any(|end| {
            let is_dir = end < names.len();
            if dir_only && !is_dir {
                return false;
            }
            let prefix = &names[..end];
            match anchored {
                true => segments_match(&segments, prefix),
                false => name_match(segments[0], &prefix[end - 1]),
            }
        })
    }
}

/// gitignore segments (`**` spans folders) against path names.
fn segments_match(pattern: &[&str], names: &[String]) -> bool {
    match pattern.split_first() {
        None => names.is_empty(),
        Some((&"**", rest)) => (0..=names.len()).any(|skip| segments_match(rest, &names[skip..])),
        Some((first, rest)) => names
            .split_first()
            .is_some_and(|(name, names)| name_match(first, name) && segments_match(rest, names)),
    }
}

/// One piece of a segment.
enum Token {
    Byte(u8),
    /// `*` (a `**` inside a name reads as one, gitignore's reading).
    Star,
    /// `?`.
    Any,
    /// `[…]`: ranges, negated with a leading `!` or `^` (best reading: not in the exact subset).
    Class(bool, Vec<(u8, u8)>),
}

fn tokens(pattern: &str) -> Vec<Token> {
    let p = pattern.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => {
                if !matches!(out.last(), Some(Token::Star)) {
                    out.push(Token::Star);
                }
            }
            b'?' => out.push(Token::Any),
            b'\\' if i + 1 < p.len() => {
                i += 1;
                out.push(Token::Byte(p[i]));
            }
            b'[' => match p[i + 1..].iter().skip(1).position(|c| *c == b']') {
                Some(len) => {
                    let body = &p[i + 1..i + 2 + len];
                    let (negated, body) = match body.first() {
                        Some(b'!' | b'^') => (true, &body[1..]),
                        _ => (false, body),
                    };
                    let mut ranges = Vec::new();
                    let mut j = 0;
                    while j < body.len() {
                        if j + 2 < body.len() && body[j + 1] == b'-' {
                            ranges.push((body[j], body[j + 2]));
                            j += 3;
                        } else {
                            ranges.push((body[j], body[j]));
                            j += 1;
                        }
                    }
                    out.push(Token::Class(negated, ranges));
                    i += len + 2;
                }
                None => out.push(Token::Byte(b'[')),
            },
            c => out.push(Token::Byte(c)),
        }
        i += 1;
    }
    out
}

/// One name against one segment: `*` any run, `?` one character (never a `/`); both already
/// lower-cased (the match ignores case).
fn name_match(pattern: &str, name: &str) -> bool {
    let p = tokens(pattern);
    let n = name.as_bytes();
    let one = |token: &Token, c: u8| match token {
        Token::Byte(b) => *b == c,
        Token::Any => true,
        Token::Class(negated, ranges) => {
            ranges.iter().any(|(lo, hi)| {
                (lo.to_ascii_lowercase()..=hi.to_ascii_lowercase()).contains(&c)
                    || (*lo..=*hi).contains(&c.to_ascii_uppercase())
            }) != *negated
        }
        Token::Star => false,
    };
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(Token::Star) => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(token) if one(token, n[ni]) => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|t| matches!(t, Token::Star))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: &str = "/workspace/agent/CLAUDE.local.md";
    const SHARED: &str = "/workspace/agent/.claude-fragments/.claude-shared.md";

    fn rule(text: &str, settings_root: Option<&str>) -> Parsed {
        parse(
            text,
            &Roots {
                cwd: Path::new("/workspace/agent"),
                home: Some(Path::new("/home/agent")),
                settings_root: settings_root.map(Path::new),
            },
        )
    }

    fn withholds(text: &str, path: &str) -> bool {
        match rule(text, Some("/workspace/agent")) {
            Parsed::Exact(rule) => rule.matches(Path::new(path)),
            other => panic!("{text}: {other:?}"),
        }
    }

    /// Every form measured with the real 2.1.328 in the sandbox (inline and copy layouts,
    /// project settings): withheld or not, as the binary did.
    #[test]
    fn the_measured_forms() {
        for (text, path, withheld) in [
            ("Read", LOCAL, true),
            ("Read(*)", LOCAL, true),
            ("Read(CLAUDE.*)", LOCAL, true),
            ("Read(CLAUDE.*)", "/workspace/agent/CLAUDE.md", true),
            ("Read(C?AUDE.local.md)", LOCAL, true),
            ("Read(**/CLAUDE.local.md)", LOCAL, true),
            ("Read(/workspace/agent/CLAUDE.local.md)", LOCAL, false),
            ("Read(./claude.local.md)", LOCAL, true),
            ("Read(./CLAUDE.local.md )", LOCAL, true),
            ("Read( ./CLAUDE.local.md )", LOCAL, false),
            ("Read(agent/CLAUDE.local.md)", LOCAL, false),
            ("Read(//WORKSPACE/agent/claude.local.md)", LOCAL, true),
            ("Read(./CLAUDE.local.md/)", LOCAL, false),
            ("Read(CLAUDE.local.m?)", LOCAL, true),
            ("Read(CLAUDE.local.md, Write)", LOCAL, false),
            ("Read(*.local.md)", LOCAL, true),
            ("Read(//workspace/*/CLAUDE.local.md)", LOCAL, true),
            ("Read(//**/CLAUDE.local.md)", LOCAL, true),
            ("Read(CLAUDE.{local,x}.md)", LOCAL, false),
            ("Read(./CLAUDE.md)", LOCAL, false),
            ("Read(./CLAUDE.md)", "/workspace/agent/CLAUDE.md", true),
            ("Read(/CLAUDE.local.md)", LOCAL, true),
            ("Read(**)", LOCAL, true),
            ("Read(*.md)", SHARED, true),
            ("Read(./**)", LOCAL, true),
            ("Read(//workspace/**)", LOCAL, true),
            ("Read(//etc/**)", LOCAL, false),
            ("Read(./.claude-fragments)", SHARED, true),
            ("Read(.claude-fragments/)", SHARED, true),
            ("Read(./.claude-fragments/*.md)", SHARED, true),
            ("Read(./.claude-fragments/**)", SHARED, true),
            ("Read(//app/**)", "/app/CLAUDE.md", true),
            ("Read(~/.claude/**)", LOCAL, false),
        ] {
            assert_eq!(withholds(text, path), withheld, "{text} on {path}");
        }
    }

    #[test]
    fn what_is_not_a_read_rule_or_not_modelled() {
        for other in [
            "Read()",
            "read(./CLAUDE.local.md)",
            "Edit(./CLAUDE.md)",
            "Bash",
        ] {
            assert_eq!(rule(other, None), Parsed::Other, "{other}");
        }
        for undecided in [" Read(./CLAUDE.md)", "Read (./CLAUDE.md)"] {
            assert!(
                matches!(rule(undecided, None), Parsed::Undecided(_)),
                "{undecided}: {:?}",
                rule(undecided, None)
            );
        }
        // Matched on a best reading, as the real 2.1.328 did, but not claimed exact.
        for (inexact, withheld) in [
            ("Read([C]LAUDE.local.md)", true),
            ("Read(\\CLAUDE.local.md)", true),
            ("Read(!CLAUDE.local.md)", false),
            ("Read(./sub/../CLAUDE.local.md)", false),
            ("Read(CLAUDE.l**.md)", true),
            ("Read([!a-b]LAUDE.local.md)", true),
            ("Read([a-b]LAUDE.local.md)", false),
            ("Read(./ü.md)", false),
        ] {
            match rule(inexact, Some("/workspace/agent")) {
                Parsed::Inexact(rule, _) => {
                    assert_eq!(rule.matches(Path::new(LOCAL)), withheld, "{inexact}")
                }
                other => panic!("{inexact}: {other:?}"),
            }
        }
        // `/x` needs the settings file's root.
        assert!(matches!(
            rule("Read(/CLAUDE.md)", None),
            Parsed::Undecided(_)
        ));
    }

    #[test]
    fn names_match_as_globs() {
        assert!(name_match("*", "a"));
        assert!(name_match("a*b*c", "aXbYc"));
        assert!(!name_match("a*b*c", "aXbY"));
        assert!(name_match("?", "x"));
        assert!(!name_match("?", ""));
        assert!(name_match("**", "x"));
    }
}
