//! Reading what an agent was given: the `Contents of PATH (LABEL):` sections of the memory block
//! Claude Code sends ([`sections`]), and whether lines stand in a text in order ([`in_order`]).

/// One `Contents of PATH (LABEL):` section of a memory block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The file the section is (`/etc/claude-code/CLAUDE.md`, ...).
    pub path: String,
    /// What Claude Code calls it (`project instructions, checked into the codebase`, ...);
    /// empty where the heading names none.
    pub label: String,
    /// Its body, trimmed.
    pub body: String,
}

impl Section {
    /// The body's lines, each trimmed at its end, blank lines left out.
    pub fn lines(&self) -> Vec<String> {
        self.body
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// The `Contents of PATH (LABEL):` sections of a memory block, in order: from the first such
/// heading up to what follows the last section (the `# currentDate` context, the reminder's
/// closing note or tag).
pub fn sections(block: &str) -> Vec<Section> {
    let start = block.find("Contents of ").unwrap_or(block.len());
    let mut body = &block[start..];
    for end in [
        "\n# currentDate\n",
        "\n\n      IMPORTANT: this context",
        "\n</system-reminder>",
    ] {
        if let Some(at) = body.find(end) {
            body = &body[..at];
        }
    }
    let mut out = Vec::new();
    for part in body.split("\n\nContents of ") {
        let part = part.strip_prefix("Contents of ").unwrap_or(part);
        let Some((head, text)) = part.split_once("):\n\n") else {
            continue;
        };
        let (path, label) = head.rsplit_once(" (").unwrap_or((head, ""));
        out.push(Section {
            path: path.to_owned(),
            label: label.to_owned(),
            body: text.trim().to_owned(),
        });
    }
    out
}

/// Whether each of `wanted` stands among `lines` (each compared trimmed at its end), in
/// `wanted`'s order, other lines between them allowed; the first one missing otherwise.
pub fn in_order<'a, 'l>(
    wanted: &'a [String],
    lines: impl IntoIterator<Item = &'l str>,
) -> Result<(), &'a str> {
    let mut want = wanted.iter().peekable();
    for line in lines {
        if want.peek().is_some_and(|w| line.trim_end() == w.as_str()) {
            want.next();
        }
    }
    match want.next() {
        None => Ok(()),
        Some(missing) => Err(missing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: &str = "<system-reminder>\nAs you answer the user's questions, you can use \
        the following context:\nContents of /etc/claude-code/CLAUDE.md (managed policy):\n\n\
        # Base\n\nRule one.  \n\nContents of /workspace/agent/CLAUDE.local.md (user's private \
        project instructions, not checked in):\n\nMemory.\n\n# currentDate\nToday is 1.\n\n      \
        IMPORTANT: this context may or may not be relevant.\n</system-reminder>\n";

    #[test]
    fn sections_are_each_heading_with_its_path_label_and_body() {
        let found = sections(BLOCK);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].path, "/etc/claude-code/CLAUDE.md");
        assert_eq!(found[0].label, "managed policy");
        assert_eq!(found[0].body, "# Base\n\nRule one.");
        assert_eq!(found[0].lines(), ["# Base", "Rule one."]);
        assert_eq!(found[1].path, "/workspace/agent/CLAUDE.local.md");
        assert_eq!(
            found[1].label,
            "user's private project instructions, not checked in"
        );
        assert_eq!(found[1].body, "Memory.");
        assert!(sections("no sections here").is_empty());
    }

    #[test]
    fn in_order_names_the_first_line_missing() {
        let wanted = ["a".to_owned(), "c".to_owned()];
        assert_eq!(in_order(&wanted, "a\nb\nc  \n".lines()), Ok(()));
        assert_eq!(in_order(&wanted, "c\na\n".lines()), Err("c"));
        assert_eq!(in_order(&wanted, ["b"]), Err("a"));
    }
}
