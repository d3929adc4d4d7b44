//! Validation of names that become file names.
//!
//! Skill and MCP server names come from `container.json` and from directory listings and are
//! turned into paths such as `.claude-fragments/mcp-<name>.md`. A name that could escape the
//! fragments directory, hide a file or confuse a reader is refused here, before any path is built.

use std::fmt;

use sha2::{Digest, Sha256};

/// The longest name accepted, in bytes. File names are limited to 255 bytes on common
/// filesystems; this leaves room for the `mcp-` prefix, the `.md` suffix and temp-name decoration.
pub const MAX_NAME_LEN: usize = 100;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameProblem {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_NAME_LEN`] bytes.
    TooLong(usize),
    /// The name contains a character outside `[A-Za-z0-9._-]`.
    BadChar(char),
    /// The name starts with `.` or `-`.
    BadStart(char),
    /// The name contains `..`.
    DotDot,
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::Empty => write!(f, "the name is empty"),
            NameProblem::TooLong(len) => {
                write!(
                    f,
                    "the name is {len} bytes long (the limit is {MAX_NAME_LEN})"
                )
            }
            NameProblem::BadChar(c) => write!(
                f,
                "the name contains {}, but only ASCII letters, digits, '.', '_' and '-' are allowed",
                describe_char(*c)
            ),
            NameProblem::BadStart(c) => write!(f, "the name starts with {:?}", c),
            NameProblem::DotDot => write!(f, "the name contains \"..\""),
        }
    }
}

fn describe_char(c: char) -> String {
    match c {
        '/' => "'/' (a path separator)".to_owned(),
        '\\' => "'\\' (a path separator)".to_owned(),
        '\0' => "a NUL byte".to_owned(),
        c if c.is_control() => format!("the control character U+{:04X}", c as u32),
        c if !c.is_ascii() => format!("{c:?} (U+{:04X}, not ASCII)", c as u32),
        c => format!("{c:?}"),
    }
}

/// Checks that `name` is safe to use as (part of) a single file name.
///
/// Accepted: 1 to [`MAX_NAME_LEN`] bytes of ASCII letters, digits, `.`, `_` and `-`, not
/// starting with `.` or `-`, and not containing `..`. Everything else, including Unicode
/// look-alikes of `/`, is refused.
pub fn validate_name(name: &str) -> Result<(), NameProblem> {
    let first = name.chars().next().ok_or(NameProblem::Empty)?;
    if name.len() > MAX_NAME_LEN {
        return Err(NameProblem::TooLong(name.len()));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(NameProblem::BadChar(bad));
    }
    if matches!(first, '.' | '-') {
        return Err(NameProblem::BadStart(first));
    }
    if name.contains("..") {
        return Err(NameProblem::DotDot);
    }
    Ok(())
}

/// `name` as (part of) a single file name: itself when [`validate_name`] accepts it and it
/// does not end with a `.` (which would meet the extension's: `mcp-A..md`), else
/// every byte outside `[A-Za-z0-9_-]` written as `%XX` (so it holds a `%`, which no accepted
/// name does: two names never share a stem), and past [`MAX_NAME_LEN`] bytes cut with a hash
/// of the whole name. Names that clawmd only needs to write down (an MCP server's, which
/// nanoclaw and the agent's own tools accept with spaces, `:` or `@`) compose this way
/// instead of failing.
pub fn file_stem(name: &str) -> std::borrow::Cow<'_, str> {
    if validate_name(name).is_ok() && !name.ends_with('.') {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() * 3);
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    if out.is_empty() {
        // The empty name: a lone `%`, which no other name becomes.
        out.push('%');
    }
    if out.len() > MAX_NAME_LEN {
        let hash = short_hash(name.as_bytes());
        out.truncate(MAX_NAME_LEN - hash.len() - 1);
        // Never cut inside a `%XX`.
        if let Some(at) = out
            .get(out.len().saturating_sub(2)..)
            .and_then(|tail| tail.find('%'))
        {
            out.truncate(out.len() - 2 + at);
        }
        out.push('~');
        out.push_str(&hash);
    }
    std::borrow::Cow::Owned(out)
}

/// `name` for a line of generated markdown (an HTML comment, a code span): itself unless it
/// holds `<`, `>`, a backtick or a control character, each then written as `%XX`, so that a
/// name never ends a comment or a code span, nor starts a line.
pub fn display_name(name: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| matches!(c, '<' | '>' | '`') || c.is_control();
    if !name.chars().any(bad) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if bad(c) {
            let mut buf = [0; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The first 16 hex digits of the SHA-256 of `bytes`.
pub fn short_hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes)[..SHORT_HASH_HEX / 2])
}

/// The length of every [`short_hash`].
pub const SHORT_HASH_HEX: usize = 16;

/// `bytes` in lowercase hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_ordinary_names() {
        for name in ["welcome", "agent-browser", "my_db", "v1.2", "A9"] {
            assert_eq!(validate_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn refuses_traversal_and_separators() {
        assert_eq!(validate_name(""), Err(NameProblem::Empty));
        assert_eq!(validate_name("../x"), Err(NameProblem::BadChar('/')));
        assert_eq!(validate_name("a/b"), Err(NameProblem::BadChar('/')));
        assert_eq!(validate_name("a\\b"), Err(NameProblem::BadChar('\\')));
        assert_eq!(validate_name(".."), Err(NameProblem::BadStart('.')));
        assert_eq!(validate_name("a..b"), Err(NameProblem::DotDot));
        assert_eq!(validate_name(".hidden"), Err(NameProblem::BadStart('.')));
        assert_eq!(validate_name("-rf"), Err(NameProblem::BadStart('-')));
    }

    #[test]
    fn refuses_control_nul_and_lookalikes() {
        assert_eq!(validate_name("a\0b"), Err(NameProblem::BadChar('\0')));
        assert_eq!(validate_name("a\nb"), Err(NameProblem::BadChar('\n')));
        assert_eq!(
            validate_name("a\u{2215}b"),
            Err(NameProblem::BadChar('\u{2215}'))
        );
        assert_eq!(validate_name("a b"), Err(NameProblem::BadChar(' ')));
    }

    #[test]
    fn refuses_overlong_names() {
        assert_eq!(validate_name(&"a".repeat(MAX_NAME_LEN)), Ok(()));
        let long = "a".repeat(10_000);
        assert_eq!(validate_name(&long), Err(NameProblem::TooLong(10_000)));
    }

    #[test]
    fn problems_explain_themselves() {
        let msg = validate_name("a\u{2215}b").unwrap_err().to_string();
        assert!(msg.contains("U+2215"), "{msg}");
        let msg = validate_name("a\0").unwrap_err().to_string();
        assert!(msg.contains("NUL"), "{msg}");
    }

    #[test]
    fn file_stems_keep_safe_names_and_escape_the_rest() {
        assert_eq!(file_stem("notes-db"), "notes-db");
        assert_eq!(file_stem("my server"), "my%20server");
        assert_eq!(file_stem("db:ro"), "db%3Aro");
        assert_eq!(file_stem("me@host"), "me%40host");
        assert_eq!(file_stem("../../etc/x"), "%2E%2E%2F%2E%2E%2Fetc%2Fx");
        assert_eq!(file_stem("a\0b"), "a%00b");
        assert_eq!(file_stem(""), "%");
        // A trailing dot would meet the extension's (`mcp-A..md`, found by the property below).
        assert_eq!(file_stem("A."), "A%2E");
        assert_eq!(file_stem("v1.2"), "v1.2");
        let long = file_stem(&"é".repeat(200)).into_owned();
        assert!(long.len() <= MAX_NAME_LEN && long.contains('~'), "{long}");
        assert_ne!(file_stem(&"é".repeat(200)), file_stem(&"é".repeat(201)));
    }

    #[test]
    fn display_names_never_end_a_comment_or_a_span() {
        assert_eq!(display_name("my server@x:y"), "my server@x:y");
        assert_eq!(display_name("x-->y`z\n"), "x--%3Ey%60z%0A");
    }

    proptest! {
        #[test]
        fn every_name_has_a_single_safe_component_stem(name in "\\PC{0,160}|[A-Za-z0-9._-]{1,8}") {
            let stem = file_stem(&name);
            let file = format!("mcp-{stem}.md");
            prop_assert!(validate_name(&file).is_ok() || stem.contains('%'), "{file}");
            let path = std::path::Path::new(&file);
            prop_assert_eq!(path.components().count(), 1);
            prop_assert!(!file.contains('/') && !file.contains('\0'));
            prop_assert!(stem.len() <= MAX_NAME_LEN);
        }
    }

    proptest! {
        #[test]
        fn accepted_names_are_single_safe_components(name in "\\PC{0,120}") {
            if validate_name(&name).is_ok() {
                let path = std::path::Path::new(&name);
                prop_assert_eq!(path.components().count(), 1);
                prop_assert!(matches!(
                    path.components().next(),
                    Some(std::path::Component::Normal(_))
                ));
                prop_assert!(!name.starts_with('.'));
                prop_assert!(name.len() <= MAX_NAME_LEN);
            }
        }
    }
}
