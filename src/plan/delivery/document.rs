//! Generated documents: one file holding everything a group's agent must know.
//!
//! `--delivery inline` writes `CLAUDE.md` as one document whose only import is
//! `@./CLAUDE.local.md` (so the agent's live memory stays live); the flat targets of other
//! backends (`AGENTS.md`, `GEMINI.md`) hold the group's local memory too and no import line at
//! all. Sections are separated by HTML comments, which Claude Code strips.

use serde::Serialize;

use crate::input::layout::names;
use crate::input::sources::Section;
use crate::input::sources::expand::neutralise;
use crate::plan::composed_document_for;
use crate::safe_name::display_name;

/// A section left out because the target's budget was exceeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Dropped {
    /// `skill:<name>` or `mcp:<server>`.
    pub section: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// What a budget left of the sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    /// The sections kept, in their original order.
    pub kept: Vec<Section>,
    /// The sections dropped, in the order they were dropped.
    pub dropped: Vec<Dropped>,
    /// The size of the result with the kept sections.
    pub size: u64,
}

/// Drops whole optional sections, largest first (skills, then MCP instructions), until
/// `size(kept) <= budget`; then takes back, in the reverse order, every dropped section that
/// fits beside what is kept (an 8-byte skill dropped before a 3 MB MCP section comes back once
/// the large one is gone). The shared base is never dropped: when it alone (with what `size`
/// adds, such as the local memory) is over budget the result stays over budget, and the
/// caller reports it. The last call of `size` is always on the sections returned as kept.
pub fn fit(sections: &[Section], budget: u64, size: impl Fn(&[Section]) -> u64) -> Fitted {
    let mut kept = sections.to_vec();
    let mut order: Vec<&Section> = sections.iter().filter(|s| s.rank.is_some()).collect();
    order.sort_by(|a, b| {
        a.rank
            .cmp(&b.rank)
            .then(b.size.cmp(&a.size))
            .then(a.id.cmp(&b.id))
    });
    let mut current = size(&kept);
    let mut gone: Vec<&Section> = Vec::new();
    for candidate in order {
        if current <= budget {
            break;
        }
        kept.retain(|s| s.id != candidate.id);
        gone.push(candidate);
        current = size(&kept);
    }
    if current <= budget && gone.len() > 1 {
        // The last one dropped made it fit: the others may fit back.
        let mut last_tried_fits = true;
        for candidate in gone.iter().rev().skip(1) {
            let mut with = kept.clone();
            with.push((*candidate).clone());
            with.sort_by_key(|s| position(sections, s));
            let tried = size(&with);
            last_tried_fits = tried <= budget;
            if last_tried_fits {
                kept = with;
                current = tried;
            }
        }
        if !last_tried_fits {
            current = size(&kept);
        }
    }
    let dropped = gone
        .into_iter()
        .filter(|s| !kept.iter().any(|k| k.id == s.id))
        .map(|s| Dropped {
            section: s.id.name(),
            bytes: s.size,
        })
        .collect();
    Fitted {
        kept,
        dropped,
        size: current,
    }
}

/// Where `section` is in `sections` (the original order, which kept sections keep).
fn position(sections: &[Section], section: &Section) -> usize {
    sections
        .iter()
        .position(|s| s.id == section.id)
        .unwrap_or(usize::MAX)
}

/// How the group's own memory (`CLAUDE.local.md`) is part of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalMemory<'a> {
    /// Imported with `@./CLAUDE.local.md` (Claude Code reads it live).
    Import,
    /// Copied in, last (backends that do not follow imports).
    Inline(&'a [u8]),
    /// The recipe gives the group no memory file (`"memory": "none"`).
    None,
}

/// The generated document: clawmd's header, then the sections, each after a comment naming
/// it, and the group's own memory (imported first, so that nothing a source leaves open can
/// swallow the import line, or copied in last).
pub fn document(sections: &[Section], local: LocalMemory<'_>) -> Vec<u8> {
    document_for(sections, local, true)
}

/// [`document`] for a recipe with or without `CLAUDE.local.md` (`local_memory`: what the
/// header says of the group's own memory).
pub fn document_for(sections: &[Section], local: LocalMemory<'_>, local_memory: bool) -> Vec<u8> {
    composed_document_for(&body(sections, local), local_memory)
}

/// The body of [`document_for`]: everything after its header line (which carries a hash of
/// it, [`crate::plan::composed_len`] its length).
pub fn body<'s>(
    sections: impl IntoIterator<Item = &'s Section> + Clone,
    local: LocalMemory<'_>,
) -> String {
    // Sized once: the sections' texts and their comment lines.
    let capacity: usize = (sections.clone().into_iter())
        .map(|section| section.text.len() + section.id.as_str().len() + section.origin.len() + 40)
        .sum();
    let mut body = String::with_capacity(capacity + 64);
    if local == LocalMemory::Import {
        LOCAL_IMPORT.iter().for_each(|piece| body.push_str(piece));
    }
    let push_parts = |parts: &mut String| {
        for section in sections.clone() {
            for piece in section_line(section) {
                parts.push_str(&piece);
            }
            push_text(parts, &section.text);
        }
    };
    // A sealed section imports nothing and changes nothing after the blank line and comment
    // block that follow it, so a document of sealed sections is read as each alone. Otherwise
    // (a section not made by `sources::alone`, or one defining a link reference) side by side
    // a backtick one leaves open can pair with one in the next and expose a mention, so the
    // whole is neutralised again.
    if all_sealed(sections.clone()) {
        push_parts(&mut body);
    } else {
        let mut parts = String::with_capacity(capacity);
        push_parts(&mut parts);
        body.push_str(&neutralise(&parts));
    }
    if let LocalMemory::Inline(bytes) = local {
        body.push_str(&local_memory_line());
        push_text(&mut body, bytes);
    }
    body
}

/// The length of [`body`]`(sections, local)`, worked out without building it, when every
/// section is sealed (the body is then the sections side by side); `None` otherwise (the
/// whole would be neutralised: build it to measure it).
pub fn body_len<'s>(
    sections: impl IntoIterator<Item = &'s Section> + Clone,
    local: LocalMemory<'_>,
) -> Option<usize> {
    if !all_sealed(sections.clone()) {
        return None;
    }
    let mut len = match local {
        LocalMemory::Import => LOCAL_IMPORT.iter().map(|piece| piece.len()).sum(),
        _ => 0,
    };
    for section in sections {
        len += section_line(section)
            .iter()
            .map(|piece| piece.len())
            .sum::<usize>();
        len += text_len(&section.text);
    }
    if let LocalMemory::Inline(bytes) = local {
        len += local_memory_line().len() + text_len(bytes);
    }
    Some(len)
}

/// The line that imports the group's own memory at the top of a body, in pieces.
const LOCAL_IMPORT: [&str; 3] = ["@./", names::CLAUDE_LOCAL_MD, "\n"];

/// Whether every one of `sections` is sealed: the body is then the sections side by side, not
/// neutralised again as a whole.
fn all_sealed<'s>(sections: impl IntoIterator<Item = &'s Section>) -> bool {
    sections.into_iter().all(|section| section.sealed)
}

/// The comment line before a section in a document, in pieces.
fn section_line(section: &Section) -> [std::borrow::Cow<'_, str>; 5] {
    [
        "\n<!-- clawmd section ".into(),
        display_name(section.id.as_str()),
        ": from ".into(),
        display_name(&section.origin),
        " -->\n".into(),
    ]
}

/// The comment line before the group's own memory copied into a document.
fn local_memory_line() -> String {
    format!(
        "\n<!-- clawmd section local-memory: from {} (the group's own memory) -->\n",
        names::CLAUDE_LOCAL_MD
    )
}

/// The length of what [`push_text`] adds for `bytes`.
fn text_len(bytes: &[u8]) -> usize {
    crate::loader::content::lossy_text(bytes)
        .trim_end_matches('\n')
        .len()
        + 1
}

/// The part of the group's memory `bytes` that a flat document can carry in `room` bytes (what
/// the operator's sections leave of the budget, the memory's heading already counted): all of
/// it when it fits, else its first lines that do (or, with no line break in reach, as many
/// whole characters), as [`document`] writes them.
pub fn memory_within(bytes: &[u8], room: u64) -> &[u8] {
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    let mut body = String::new();
    push_text(&mut body, bytes);
    // The empty memory's line break is counted in `room` already.
    if body.len() <= room.saturating_add(1) {
        return bytes;
    }
    let mut cut = room.min(bytes.len());
    while cut > 0 && std::str::from_utf8(&bytes[..cut]).is_err() {
        cut -= 1;
    }
    match bytes[..cut].iter().rposition(|&b| b == b'\n') {
        Some(newline) => &bytes[..newline + 1],
        None => &bytes[..cut],
    }
}

fn push_text(body: &mut String, bytes: &[u8]) {
    let text = crate::loader::content::lossy_text(bytes);
    body.push_str(text.trim_end_matches('\n'));
    body.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::sources::SectionId;
    use crate::loader::content::scan_markdown;
    use crate::plan::{is_composed, is_pristine, mcp_fragment};

    #[test]
    fn a_body_is_as_long_as_body_len_says() {
        let mut sealed = sections();
        for section in &mut sealed {
            section.sealed = true;
        }
        sealed.push(Section::builtin(
            SectionId::new("bad\u{1}`>name"),
            b"bytes \xff\xfe\n\n\n",
        ));
        sealed.last_mut().unwrap().sealed = true;
        for local in [
            LocalMemory::Import,
            LocalMemory::None,
            LocalMemory::Inline(b"memory \xc3\n"),
            LocalMemory::Inline(b""),
        ] {
            for n in 0..=sealed.len() {
                let kept = &sealed[..n];
                assert_eq!(
                    body_len(kept, local),
                    Some(body(kept, local).len()),
                    "{n} {local:?}"
                );
            }
        }
        // An unsealed section makes the whole be neutralised: measured by building it.
        assert_eq!(body_len(&sections(), LocalMemory::None), None);
    }

    fn section(id: SectionId, text: &str) -> Section {
        Section::builtin(id, text.as_bytes())
    }

    fn sections() -> Vec<Section> {
        vec![
            section(SectionId::shared_base(), "BASE with `@./more.md`\n"),
            section(SectionId::skill("big"), &"B".repeat(300)),
            section(SectionId::skill("small"), "SMALL\n"),
            section(
                SectionId::mcp("db"),
                std::str::from_utf8(&mcp_fragment("db", "@/etc/hostname\nRead only.")).unwrap(),
            ),
        ]
    }

    #[test]
    fn inline_document_imports_only_the_local_memory() {
        let doc = document(&sections(), LocalMemory::Import);
        assert!(is_composed(&doc) && is_pristine(&doc));
        let text = String::from_utf8(doc).unwrap();
        let scan = scan_markdown(&text).unwrap();
        assert_eq!(scan.imports, ["./CLAUDE.local.md"]);
        for part in ["BASE with", "SMALL", "Read only.", &"B".repeat(300)] {
            assert!(
                scan.body.contains(part),
                "{part} missing from {}",
                scan.body
            );
        }
        assert!(
            !scan.body.contains("clawmd section"),
            "comments are stripped"
        );
    }

    #[test]
    fn flat_document_has_no_import_and_ends_with_the_local_memory() {
        let doc = document(&sections(), LocalMemory::Inline(b"LOCAL NOTES\n"));
        let text = String::from_utf8(doc).unwrap();
        assert!(scan_markdown(&text).unwrap().imports.is_empty(), "{text}");
        assert!(text.trim_end().ends_with("LOCAL NOTES"), "{text}");
    }

    proptest::proptest! {
        /// Whatever the shared sources leave open (fences, comments, quotes, lists) and
        /// whatever the MCP text says, the only import of an inline document is the local
        /// memory: no `@path` in the instructions, and none in a source, is ever followed.
        #[test]
        fn the_only_import_of_an_inline_document_is_the_local_memory(
            base in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("@[./~a-z]{1,10}").unwrap(),
                    proptest::string::string_regex("`{1,5}[a-z]{0,4}|~{3,4}|<!--|-->|> @q|- @l|    @i").unwrap(),
                    proptest::string::string_regex("\\PC{0,16}").unwrap(),
                ],
                0..8,
            ),
            mcp in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("@[./~a-z]{1,10}").unwrap(),
                    proptest::string::string_regex("`{1,6}[a-z@ ]{0,6}|~{3,5}|<!--|-->").unwrap(),
                ],
                0..6,
            ),
        ) {
            let base = crate::input::sources::expand::neutralise(&base.join("\n"));
            let sections = vec![
                section(SectionId::shared_base(), &base),
                section(
                    SectionId::mcp("db"),
                    std::str::from_utf8(&mcp_fragment("db", &mcp.join("\n"))).unwrap(),
                ),
            ];
            let doc = String::from_utf8(document(&sections, LocalMemory::Import)).unwrap();
            let scan = scan_markdown(&doc).unwrap();
            proptest::prop_assert_eq!(scan.imports, vec!["./CLAUDE.local.md".to_owned()], "{}", doc);
        }
    }

    #[test]
    fn fit_drops_skills_largest_first_then_mcp_and_never_the_base() {
        let all = sections();
        let size = |kept: &[Section]| document(kept, LocalMemory::Import).len() as u64;
        let full = size(&all);
        let fitted = fit(&all, full, size);
        assert!(fitted.dropped.is_empty());

        let fitted = fit(&all, full - 1, size);
        let names: Vec<&str> = fitted.dropped.iter().map(|d| d.section.as_str()).collect();
        assert_eq!(names, ["skill:big"]);
        assert_eq!(fitted.dropped[0].bytes, 300);
        assert!(fitted.size < full);

        let fitted = fit(&all, 0, size);
        let names: Vec<&str> = fitted.dropped.iter().map(|d| d.section.as_str()).collect();
        assert_eq!(names, ["skill:big", "skill:small", "mcp:db"]);
        assert_eq!(fitted.kept.len(), 1);
        assert_eq!(fitted.kept[0].id, SectionId::shared_base());
        assert!(fitted.size > 0, "over budget, but the base stays");
    }

    /// Issue 25: an 8-byte skill was dropped (skills go first) along with a 3 MB MCP section,
    /// although it fits once the large one is gone.
    #[test]
    fn fit_keeps_every_section_that_fits_after_the_drops() {
        let big = "m".repeat(3_000_000);
        let all = vec![
            section(SectionId::shared_base(), "BASE\n"),
            section(SectionId::skill("tiny"), "8 bytes\n"),
            section(SectionId::skill("medium"), &"s".repeat(2_000)),
            section(SectionId::mcp("huge"), &big),
        ];
        let size = |kept: &[Section]| document(kept, LocalMemory::Import).len() as u64;
        let without_huge: Vec<Section> = all
            .iter()
            .filter(|s| s.id != SectionId::mcp("huge"))
            .cloned()
            .collect();
        let budget = size(&without_huge);
        let fitted = fit(&all, budget, size);
        let names: Vec<&str> = fitted.dropped.iter().map(|d| d.section.as_str()).collect();
        assert_eq!(names, ["mcp:huge"]);
        assert_eq!(fitted.kept, without_huge, "kept in their order");
        assert_eq!(fitted.size, budget);
        // One byte less: the medium skill must go too, the tiny one still fits.
        let fitted = fit(&all, budget - 1, size);
        let names: Vec<&str> = fitted.dropped.iter().map(|d| d.section.as_str()).collect();
        assert_eq!(names, ["skill:medium", "mcp:huge"]);
        let kept: Vec<SectionId> = fitted.kept.iter().map(|s| s.id.clone()).collect();
        assert_eq!(kept, [SectionId::shared_base(), SectionId::skill("tiny")]);
        assert_eq!(fitted.size, size(&fitted.kept));
    }
}
