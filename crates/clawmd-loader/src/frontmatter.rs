//! Frontmatter: the `---` block at the top of a memory file, and the `paths:` that make a
//! rule conditional (JS `qc`, `Bar`, `nu`, `HZr`, `Cxn`/`Us`, `au`).
//!
//! Claude Code parses the block with Bun's YAML parser; when that fails it quotes values that
//! look like globs (`nu`) and turns leading tabs into spaces, and parses again; when that fails
//! too the block counts as empty. clawmd parses with `yaml-rust2` (YAML 1.2, like Bun's) and
//! follows the same fallback, then reads `paths` with JavaScript's truthiness.

use yaml_rust2::{Yaml, YamlLoader};

use super::markdown;
use super::model::Budgets;
use super::version::{Behaviour, ClaudeVersion};

/// The `paths:` of a frontmatter block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Paths {
    /// The globs that make the file conditional; `None`: unconditional.
    pub(crate) paths: Option<Vec<String>>,
    /// The expansion stopped at a budget (Claude Code's own, which keeps the pattern
    /// unexpanded, or clawmd's glob budgets, which keep only the globs within them).
    pub(crate) truncated: bool,
}

/// More alias references than this in one block are not expanded: each alias copies its
/// anchor's whole node, so a few lines could otherwise ask for gigabytes. Such a block is
/// treated as not YAML (no `paths`), with the budget flag set.
const MAX_ALIASES: usize = 64;

/// Strip a leading `---` block (JS `qc`) and read its `paths:` (JS `HZr`).
///
/// The block is matched like Claude Code's `/^---\s*\n([\s\S]*?)---\s*\n?/` on the text
/// without a leading BOM (since 2.1.239; before, a BOM hides the block): the closing `---`
/// need not start a line, and the whitespace after it (blank lines, the next line's
/// indentation) goes with it.
pub(crate) fn split<'t>(
    text: &'t str,
    version: ClaudeVersion,
    budgets: &Budgets,
) -> (&'t str, Paths) {
    let t = if version.has(Behaviour::FrontmatterAfterBom) {
        text.strip_prefix('\u{feff}').unwrap_or(text)
    } else {
        text
    };
    // JS checks `indexOf("---", 3)` first; the regex needs a leading `---` anyway.
    let Some(after_open) = t.strip_prefix("---") else {
        return (text, Paths::default());
    };
    if !after_open.contains("---") {
        return (text, Paths::default());
    }
    let ws = after_open.len() - after_open.trim_start_matches(markdown::is_js_space).len();
    // `\s*\n`: greedy whitespace that must end with a newline (backtracking to the last one).
    let Some(nl) = after_open[..ws].rfind('\n') else {
        return (text, Paths::default());
    };
    let inner_start = 3 + nl + 1;
    let Some(close) = t[inner_start..].find("---") else {
        return (text, Paths::default());
    };
    let yaml = &t[inner_start..inner_start + close];
    let mut end = inner_start + close + 3;
    let rest = &t[end..];
    let ws = rest.len() - rest.trim_start_matches(markdown::is_js_space).len();
    end += ws;
    // `\n?` after a greedy `\s*` never adds anything: `\s` already took every newline.
    (&t[end..], paths(yaml, version, budgets))
}

/// JS `Bar`: the block as YAML, with Claude Code's one retry; `None` when both fail. The retry
/// quotes glob values, and since 2.1.113 also turns leading tabs into spaces.
fn parse_yaml(block: &str, version: ClaudeVersion) -> Option<Yaml> {
    match load_first(block) {
        Ok(doc) => Some(doc),
        Err(first) => {
            let quoted = quote_glob_values(block);
            let retry = if version.has(Behaviour::FrontmatterTabRetry) {
                indent_tabs_as_spaces(&quoted)
            } else {
                quoted
            };
            match load_first(&retry) {
                Ok(doc) => Some(doc),
                Err(second) => {
                    tracing::debug!(%first, %second, "frontmatter is not YAML; ignored");
                    None
                }
            }
        }
    }
}

fn load_first(text: &str) -> Result<Yaml, yaml_rust2::ScanError> {
    Ok(YamlLoader::load_from_str(text)?
        .into_iter()
        .next()
        .unwrap_or(Yaml::Null))
}

/// JS `tu`: a value that needs quoting to survive as a string.
fn needs_quotes(value: &str) -> bool {
    value.contains(|c| "{}[]*&#!|>%@`".contains(c)) || value.contains(": ")
}

/// JS `nu`: on each `key: value` line (key `[a-zA-Z_-]+`), a value that is not quoted, not a
/// valid flow sequence and holds a YAML indicator is wrapped in double quotes.
fn quote_glob_values(block: &str) -> String {
    let lines: Vec<String> = block
        .split('\n')
        .map(|line| match key_value(line) {
            Some((key, value)) if !keeps_its_form(value) && needs_quotes(value) => {
                let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
                format!("{key}: \"{escaped}\"")
            }
            _ => line.to_string(),
        })
        .collect();
    lines.join("\n")
}

/// `/^([a-zA-Z_-]+):\s+(\S.*)$/` on one line: the key and the value.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let key_len = line
        .bytes()
        .take_while(|b| b.is_ascii_alphabetic() || matches!(b, b'_' | b'-'))
        .count();
    let rest = line[key_len..].strip_prefix(':')?;
    let value = rest.trim_start_matches(markdown::is_js_space);
    // `\s+` needs at least one space; `.` stops at line terminators and `$` is the end.
    if key_len == 0
        || value.len() == rest.len()
        || value.is_empty()
        || value.contains(['\r', '\u{2028}', '\u{2029}'])
    {
        return None;
    }
    Some((&line[..key_len], value))
}

/// Quoted values, and flow sequences that already parse, are left as written.
fn keeps_its_form(value: &str) -> bool {
    let quoted = |q: char| value.starts_with(q) && value.ends_with(q);
    if quoted('"') || quoted('\'') {
        return true;
    }
    value.starts_with('[')
        && value.ends_with(']')
        && matches!(load_first(value), Ok(Yaml::Array(_)))
}

/// JS `.replace(/^\t+/gm, t => "  ".repeat(t.length))`: at the start of the text and after
/// every line terminator, each leading tab becomes two spaces.
fn indent_tabs_as_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at_line_start = true;
    for c in text.chars() {
        if at_line_start && c == '\t' {
            out.push_str("  ");
            continue;
        }
        at_line_start = matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}');
        out.push(c);
    }
    out
}

/// JS `HZr` on a parsed block: `paths` expanded (`Cxn`), a trailing `/**` dropped; none
/// left, or only `**`, means unconditional (`None`). Within clawmd's glob budgets: past them
/// only the globs within are kept (the file stays conditional exactly when it would be).
fn paths(block: &str, version: ClaudeVersion, budgets: &Budgets) -> Paths {
    if alias_count(block) > MAX_ALIASES {
        tracing::debug!("frontmatter holds too many YAML aliases; not expanded");
        return Paths {
            paths: None,
            truncated: true,
        };
    }
    // Without the word (nor a backslash, whose escapes could spell it in a quoted key) no key
    // can be `paths`: whatever the block parses to, it has none.
    if !block.contains("paths") && !block.contains('\\') {
        return Paths::default();
    }
    let Some(Yaml::Hash(map)) = parse_yaml(block, version) else {
        // JS `Ws`: only a mapping counts as frontmatter.
        return Paths::default();
    };
    let Some(value) = map
        .get(&Yaml::String("paths".into()))
        .filter(|v| is_truthy(v))
    else {
        return Paths::default();
    };
    let mut budget = Budget {
        results: 1000,
        units: 4_194_304,
        exceeded: false,
    };
    let globs: Vec<String> = split_globs(value, &mut budget)
        .into_iter()
        .map(|g| g.strip_suffix("/**").map(str::to_string).unwrap_or(g))
        .filter(|g| !g.is_empty())
        .collect();
    if globs.is_empty() || globs.iter().all(|g| g == "**") {
        return Paths {
            paths: None,
            truncated: budget.exceeded,
        };
    }
    let mut kept = Vec::new();
    let mut bytes = 0;
    let mut truncated = budget.exceeded;
    for g in globs {
        if kept.len() >= budgets.glob_patterns || bytes + g.len() > budgets.glob_bytes {
            truncated = true;
            break;
        }
        bytes += g.len();
        kept.push(g);
    }
    Paths {
        paths: Some(kept),
        truncated,
    }
}

/// Alias references (`*name` where a YAML node may start) in a block.
fn alias_count(block: &str) -> usize {
    let b = block.as_bytes();
    (0..b.len())
        .filter(|&i| {
            b[i] == b'*'
                && (i == 0
                    || matches!(
                        b[i - 1],
                        b' ' | b'\t' | b'\n' | b'[' | b'{' | b',' | b':' | b'-'
                    ))
                && b.get(i + 1)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        })
        .count()
}

/// JavaScript truthiness of the value Bun's parser would give.
fn is_truthy(v: &Yaml) -> bool {
    match v {
        Yaml::Null | Yaml::BadValue => false,
        Yaml::Boolean(b) => *b,
        Yaml::Integer(i) => *i != 0,
        Yaml::Real(r) => r
            .parse::<f64>()
            .map(|f| f != 0.0 && !f.is_nan())
            .unwrap_or(true),
        Yaml::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// The shared limits of one `Cxn` call (JS `{results: 1000, bytes: 4194304}`).
struct Budget {
    results: i64,
    units: i64,
    /// Set when a pattern was left unexpanded because of these limits.
    exceeded: bool,
}

/// JS `Us`: lists are flattened, strings split on commas outside braces (trimmed, empties
/// dropped) and brace-expanded; anything else gives nothing.
fn split_globs(v: &Yaml, budget: &mut Budget) -> Vec<String> {
    let s = match v {
        Yaml::Array(items) => return items.iter().flat_map(|i| split_globs(i, budget)).collect(),
        Yaml::String(s) => s,
        _ => return Vec::new(),
    };
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '{' => {
                depth += 1;
                current.push(c);
            }
            '}' => {
                depth -= 1;
                current.push(c);
            }
            ',' if depth == 0 => {
                let piece = markdown::js_trim(&current);
                if !piece.is_empty() {
                    parts.push(piece.to_string());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    let piece = markdown::js_trim(&current);
    if !piece.is_empty() {
        parts.push(piece.to_string());
    }
    parts
        .into_iter()
        .flat_map(|p| expand_braces(&p, budget))
        .collect()
}

/// JS `au`: expand `{a,b}` groups (the first `{`, up to the first `}` after it), depth first;
/// over budget, the pattern is used unexpanded.
fn expand_braces(pattern: &str, budget: &mut Budget) -> Vec<String> {
    if !pattern.contains('{') {
        return vec![pattern.to_string()];
    }
    let units = |s: &str| s.encode_utf16().count() as i64;
    let whole = units(pattern);
    let mut out: Vec<String> = Vec::new();
    let mut stack = vec![pattern.to_string()];
    while let Some(current) = stack.pop() {
        let Some((head, alternatives, tail)) = brace_group(&current) else {
            out.push(current);
            continue;
        };
        let alternatives: Vec<&str> = alternatives.split(',').map(markdown::js_trim).collect();
        budget.units -= units(&current);
        let n = (out.len() + stack.len() + alternatives.len()) as i64;
        if budget.units < 0 || n > budget.results || n * whole > budget.units {
            tracing::debug!(pattern, "brace expansion over budget; used unexpanded");
            budget.exceeded = true;
            return vec![pattern.to_string()];
        }
        for alt in alternatives.iter().rev() {
            stack.push(format!("{head}{alt}{tail}"));
        }
    }
    budget.results -= out.len() as i64;
    budget.units -= out.len() as i64 * whole;
    out
}

/// `/^([^{]*)\{([^}]+)\}(.*)$/`: the first `{`, a non-empty group up to the first `}`, and a
/// tail without line terminators.
fn brace_group(s: &str) -> Option<(&str, &str, &str)> {
    let open = s.find('{')?;
    let close = open + 1 + s[open + 1..].find('}')?;
    let (head, group, tail) = (&s[..open], &s[open + 1..close], &s[close + 1..]);
    if group.is_empty() || tail.contains(['\n', '\r', '\u{2028}', '\u{2029}']) {
        return None;
    }
    Some((head, group, tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(yaml: &str) -> Option<Vec<String>> {
        paths(yaml, ClaudeVersion::newest_verified(), &Budgets::default()).paths
    }

    #[test]
    fn forms_seen_in_the_corpus() {
        // Cases 43–49: what makes a rule conditional.
        assert_eq!(p("\"paths\": src/**\n"), Some(vec!["src".into()]));
        assert_eq!(p("'paths': [\"x/**\"]\n"), Some(vec!["x".into()]));
        assert_eq!(p("paths : y/**\n"), Some(vec!["y".into()]));
        assert!(p("paths: [src/{a,b}/**, \"{c,d}.md\"]\n").is_some());
        assert_eq!(p("paths: [ \"**\" ]\n"), None);
        assert_eq!(p("paths: {a: b}\n"), None);
        assert_eq!(p("x: &g src/**\npaths: *g\n"), Some(vec!["src".into()]));
        assert_eq!(p("paths: &p [\"**\"]\n"), None);
        assert_eq!(p("base: &l\n  - q/**\npaths: *l\n"), Some(vec!["q".into()]));
        assert_eq!(p("paths: |\n  src/**\n"), Some(vec!["src".into()]));
        assert_eq!(p("paths: >-\n  **\n"), None);
        assert_eq!(p("paths:\n- x/**\n"), Some(vec!["x".into()]));
        assert_eq!(p("paths: [unclosed\n"), Some(vec!["[unclosed".into()]));
        assert_eq!(p("paths:\n\t- a/**\n"), Some(vec!["a".into()]));
        assert_eq!(p("paths: a/**\npaths: \"**\"\n"), None);
        for unconditional in ["paths:\n", "paths: []\n", "paths: ~\n", "paths: 42\n"] {
            assert_eq!(p(unconditional), None, "{unconditional}");
        }
        assert_eq!(
            p("paths: \"**, x/**\"\n"),
            Some(vec!["**".into(), "x".into()])
        );
    }

    #[test]
    fn glob_values_are_quoted_for_the_retry() {
        assert_eq!(p("paths: **/*.ts\n"), Some(vec!["**/*.ts".into()]));
        assert_eq!(
            quote_glob_values("paths: src/**\ntitle: plain\nq: \"x\""),
            "paths: \"src/**\"\ntitle: plain\nq: \"x\""
        );
    }

    #[test]
    fn braces_expand_like_claude_code() {
        let mut b = Budget {
            results: 1000,
            units: 4_194_304,
            exceeded: false,
        };
        assert_eq!(
            expand_braces("a/{b,c}/{d,e}", &mut b),
            vec!["a/b/d", "a/b/e", "a/c/d", "a/c/e"]
        );
        assert_eq!(expand_braces("x{}", &mut b), vec!["x{}"]);
        assert_eq!(
            p("paths: \"a/**, {b,c}.ts\"\n"),
            Some(vec!["a".into(), "b.ts".into(), "c.ts".into()])
        );
    }

    #[test]
    fn frontmatter_is_stripped_with_following_whitespace() {
        let v = ClaudeVersion::default();
        let b = Budgets::default();
        assert_eq!(
            split("---\ntitle: x\n---\n\n  body\n", v, &b),
            ("body\n", Paths::default())
        );
        assert_eq!(split("--- x\n---\nbody", v, &b).0, "--- x\n---\nbody");
        assert_eq!(split("\u{feff}---\na: 1\n---\nB", v, &b).0, "B");
        let before_bom_rule = ClaudeVersion::new(2, 1, 238);
        assert_eq!(
            split("\u{feff}---\na: 1\n---\nB", before_bom_rule, &b).0,
            "\u{feff}---\na: 1\n---\nB"
        );
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn alias_bombs_are_not_expanded() {
        let mut yaml = String::from("a: &a [x, x, x, x, x, x, x, x]\n");
        for i in 0..70 {
            yaml += &format!("b{i}: &b{i} [*a, *a, *a, *a, *a, *a, *a, *a]\n");
        }
        yaml += "paths: *b69\n";
        let p = paths(&yaml, ClaudeVersion::newest_verified(), &Budgets::default());
        assert!(p.truncated);
        assert_eq!(p.paths, None);
    }

    #[test]
    fn globs_past_the_budgets_are_cut() {
        let budgets = Budgets {
            glob_patterns: 2,
            ..Budgets::default()
        };
        let p = paths(
            "paths: [a, b, c]\n",
            ClaudeVersion::newest_verified(),
            &budgets,
        );
        assert!(p.truncated);
        assert_eq!(p.paths, Some(vec!["a".into(), "b".into()]));
    }
}
