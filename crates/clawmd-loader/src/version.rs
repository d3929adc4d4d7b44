//! Which Claude Code release the loader reproduces.
//!
//! Claude Code ships almost daily and deployments pin whatever their image was built with, so
//! the loader models every behaviour that changed between releases as a [`Behaviour`] with the
//! first release that shows it, in one table ([`FIRST_RELEASE`]). The wrapper text around the
//! memory block is its own axis ([`Behaviour::SystemReminderWrapper`]). The releases the
//! conformance corpus was recorded on are [`CORPUS`]; a release outside it renders with the
//! nearest known rules and [`ClaudeVersion::is_verified`] is false.

use std::fmt;
use std::str::FromStr;

/// A Claude Code release, `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaudeVersion {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl ClaudeVersion {
    /// `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        ClaudeVersion {
            major,
            minor,
            patch,
        }
    }

    /// The newest release the conformance corpus covers.
    pub const fn newest_verified() -> Self {
        CORPUS[0]
    }

    /// The default release: the newest the conformance corpus covers whose reading of the
    /// agent's settings was measured too ([`MEASURED`]); a newer
    /// corpus release (2.1.331, recorded with every case and matching 2.1.330; 2.1.333 and
    /// 2.1.334, the Agent SDK 0.3.333's and 0.3.334's) is judged when pinned, but the default
    /// stays where every verdict, settings included, was measured.
    pub fn default_release() -> Self {
        CORPUS
            .iter()
            .copied()
            .find(|v| MEASURED.contains(v))
            .unwrap_or(CORPUS[0])
    }

    /// Does this release show `behaviour`?
    pub fn has(self, behaviour: Behaviour) -> bool {
        let first = FIRST_RELEASE
            .iter()
            .find(|(b, _)| *b == behaviour)
            .map(|(_, v)| *v)
            .unwrap_or(ClaudeVersion::new(0, 0, 0));
        if self < first {
            return false;
        }
        // The one behaviour that went away for a while and came back.
        if behaviour == Behaviour::RelativeWorktreeSkipsMainCheckout
            && self >= ClaudeVersion::new(2, 1, 84)
            && self < ClaudeVersion::new(2, 1, 198)
        {
            return false;
        }
        true
    }

    /// Was this exact release recorded in the conformance corpus?
    pub fn is_verified(self) -> bool {
        CORPUS.contains(&self)
    }

    /// The corpus release whose rules are closest (the newest one at or below this release,
    /// else the oldest), for messages about unverified releases.
    pub fn nearest_verified(self) -> ClaudeVersion {
        CORPUS
            .iter()
            .copied()
            .find(|v| *v <= self)
            .unwrap_or(CORPUS[CORPUS.len() - 1])
    }

    /// How an unverified release is modelled, for warnings: from the release table
    /// ([`ClaudeVersion::has`]), between the recorded releases around it.
    pub fn unverified_note(self) -> String {
        let below = CORPUS.iter().find(|v| **v < self);
        let above = CORPUS.iter().rev().find(|v| **v > self);
        let between = match (below, above) {
            (Some(below), Some(above)) => format!("between the recorded {below} and {above}"),
            (Some(below), None) => format!("newer than the newest recorded, {below}"),
            (None, Some(above)) => format!("older than the oldest recorded, {above}"),
            (None, None) => "with no recorded release".to_owned(),
        };
        format!(
            "not in the conformance corpus: modelled from the loader's release table, {between}, so a change the table misses may differ"
        )
    }
}

impl Default for ClaudeVersion {
    fn default() -> Self {
        ClaudeVersion::default_release()
    }
}

impl fmt::Display for ClaudeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A release string that is not `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a Claude Code release: {0:?} (expected MAJOR.MINOR.PATCH, e.g. 2.1.328)")]
pub struct BadVersion(pub String);

impl FromStr for ClaudeVersion {
    type Err = BadVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadVersion(s.to_string());
        let mut parts = s.trim().split('.');
        let mut next = || -> Result<u32, BadVersion> {
            let p = parts.next().ok_or_else(bad)?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 9 {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        let v = ClaudeVersion::new(next()?, next()?, next()?);
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(v)
    }
}

impl serde::Serialize for ClaudeVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ClaudeVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A loader behaviour that changed between Claude Code releases. Each is "the 2.1.330
/// behaviour"; a release before its first release (see [`FIRST_RELEASE`]) does not show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Behaviour {
    /// An import whose extension is not a text extension does not load.
    NonTextImportsSkipped,
    /// A `#…` suffix is cut from import paths.
    ImportFragmentCut,
    /// `claudeMdExcludes` is applied.
    ClaudeMdExcludes,
    /// Inside a linked git worktree nested in its main checkout, the main checkout's
    /// `CLAUDE.md`, `.claude/CLAUDE.md` and rules are skipped (`CLAUDE.local.md` still loads).
    WorktreeSkipsMainCheckout,
    /// The same, for a worktree whose `.git` file holds a relative path (absent in
    /// 2.1.84–2.1.197).
    RelativeWorktreeSkipsMainCheckout,
    /// Whole-line HTML comment blocks are stripped.
    CommentBlocksStripped,
    /// The text after the comments of a comment block (`<!-- c --> @x.md`) is searched for
    /// imports.
    CommentBlockTextSearched,
    /// Bodies are trimmed.
    BodiesTrimmed,
    /// Files are deduplicated by real path (`.claude/CLAUDE.md -> ../CLAUDE.md` once).
    RealPathDedupe,
    /// Imports and rules whose symlink target leaves the cwd are external.
    LinkTargetsExternal,
    /// Frontmatter after a BOM is stripped.
    FrontmatterAfterBom,
    /// Frontmatter that fails to parse is retried with its leading tabs turned into spaces
    /// (before: only with its glob values quoted, so `\t- a/**` leaves the rule unconditional).
    FrontmatterTabRetry,
    /// The `<system-reminder>\nCodebase and user instructions…` wrapper; before it the
    /// `# claudeMd … # currentDate` one.
    SystemReminderWrapper,
    /// The old wrapper ends with a `# currentDate` section (2.0.x has none).
    CurrentDateInContext,
    /// The managed file is labelled `organization-managed policy instructions` (before 2.1.136:
    /// the user's label; it is loaded, and cannot be excluded, all the same).
    ManagedLabel,
    /// `AGENTS.md` is loaded when no CLAUDE.md-family file has content.
    AgentsMdFallback,
    /// A `.claude` folder linked outside the cwd: its rules need approval.
    LinkedClaudeDirExternal,
    /// Device and process files (`/proc/self/environ`, `/dev/stdin`…) are never read.
    ProcessFilesRefused,
    /// Files in (or linked into) a `connector-downloads` folder are refused.
    ConnectorDownloadsProtected,
    /// Files under `claude/<project>/<uuid>/scratchpad/` are refused.
    ScratchpadProtected,
    /// CR and CRLF become LF only when an HTML comment block is actually stripped (before:
    /// whenever the text contains `<!--`).
    CrNormalisedOnlyWhenStripped,
    /// A file reached through a link whose text is not UTF-8 (a target whose name is not
    /// UTF-8) is not loaded: imports, and project and local files, `AGENTS.md` and project
    /// rules found by name (JS `Ao(…, { judged: true })`, `literalLinkText: "undecodable"`;
    /// `src/links.rs`). Before, the kernel followed the link (case 67).
    UndecodableLinkTargetsRefused,
    /// A file whose path goes through one of a process's own links (`/proc/self/cwd/…`,
    /// `/proc/self/root/…`, `/proc/<pid>/fd/<n>`, `/dev/fd`…) is not loaded, approved or not,
    /// for the same files (JS `Kt` on every link the judged walk follows). Before, approved
    /// `/proc/self/cwd/…` and `/proc/self/root/…` imports loaded (cases 75, 77, 79, 80).
    ProcessLinksUnchecked,
    /// The managed drop-in folder `managed-settings.d/` is read after
    /// `managed-settings.json` ([`crate::managed`], cases 86 to 99).
    ManagedDropIns,
    /// The managed settings' `claudeMd` text is shown as a managed section,
    /// `<managed-settings>` (cases 81 to 84).
    ManagedClaudeMd,
    /// A managed settings file whose key has the wrong type loses that key only (case 97);
    /// before, the whole file is rejected.
    ManagedKeysOneByOne,
    /// A rules folder is listed in the directory's own order. Before (the npm package's
    /// `cli.js`, run on Node, through 2.1.112) libuv's `scandir` sorts it by name, byte by
    /// byte (cases 100, 101 on 2.0.77).
    RulesInDirectoryOrder,
    /// A rules-folder link whose real path is not UTF-8 ends the walk of its folder (Bun's
    /// `realpathSync` returns the path with U+FFFD, whose `stat` fails). Before (Node, through
    /// 2.1.112) `realpathSync` itself fails, and the link alone is passed over (case 113).
    UndecodableRuleLinkAbortsFolder,
    /// A memory file is checked against the permission rules before it loads: a
    /// `permissions.deny` `Read` rule matching it, or `permissions.blockReadsOutsideWorkingDirectories`
    /// (for what is imported from outside the working folders), withholds it ([`crate::settings`]).
    /// Before, neither changes what loads (measured on 2.1.128 and 2.1.257).
    MemoryReadsChecked,
    /// The folders of the user's `env.CLAUDE_CODE_AUTOMOUNT_ROOTS` are skipped by the memory
    /// walk ([`crate::settings`]). Before, the variable changes nothing that loads.
    AutomountRootsSkipped,
}

/// Behaviour → the first release that shows it, as bisected on the real npm releases
/// (`scripts/conformance-drift --bisect`; docs/loader.md lists the cases behind each row).
pub const FIRST_RELEASE: &[(Behaviour, ClaudeVersion)] = &[
    (
        Behaviour::NonTextImportsSkipped,
        ClaudeVersion::new(2, 1, 2),
    ),
    (Behaviour::ImportFragmentCut, ClaudeVersion::new(2, 1, 41)),
    (Behaviour::ClaudeMdExcludes, ClaudeVersion::new(2, 1, 48)),
    (
        Behaviour::WorktreeSkipsMainCheckout,
        ClaudeVersion::new(2, 1, 69),
    ),
    (
        Behaviour::RelativeWorktreeSkipsMainCheckout,
        ClaudeVersion::new(2, 1, 69),
    ),
    (
        Behaviour::CommentBlocksStripped,
        ClaudeVersion::new(2, 1, 72),
    ),
    (
        Behaviour::CommentBlockTextSearched,
        ClaudeVersion::new(2, 1, 72),
    ),
    (Behaviour::BodiesTrimmed, ClaudeVersion::new(2, 1, 79)),
    (
        Behaviour::FrontmatterTabRetry,
        ClaudeVersion::new(2, 1, 113),
    ),
    (Behaviour::RealPathDedupe, ClaudeVersion::new(2, 1, 142)),
    (
        Behaviour::LinkTargetsExternal,
        ClaudeVersion::new(2, 1, 232),
    ),
    (
        Behaviour::FrontmatterAfterBom,
        ClaudeVersion::new(2, 1, 239),
    ),
    // Bisected on the published releases: 2.1.133 labels /etc/claude-code/CLAUDE.md like the
    // user's file, 2.1.136 (the next one published) as managed policy.
    (Behaviour::ManagedLabel, ClaudeVersion::new(2, 1, 136)),
    (
        Behaviour::CurrentDateInContext,
        ClaudeVersion::new(2, 1, 42),
    ),
    (
        Behaviour::SystemReminderWrapper,
        ClaudeVersion::new(2, 1, 268),
    ),
    (Behaviour::AgentsMdFallback, ClaudeVersion::new(2, 1, 281)),
    (
        Behaviour::LinkedClaudeDirExternal,
        ClaudeVersion::new(2, 1, 284),
    ),
    (
        Behaviour::ProcessFilesRefused,
        ClaudeVersion::new(2, 1, 311),
    ),
    (
        Behaviour::ConnectorDownloadsProtected,
        ClaudeVersion::new(2, 1, 319),
    ),
    (
        Behaviour::ScratchpadProtected,
        ClaudeVersion::new(2, 1, 327),
    ),
    (
        Behaviour::CrNormalisedOnlyWhenStripped,
        ClaudeVersion::new(2, 1, 330),
    ),
    // 2.1.333 is published only inside the Agent SDK (0.3.333); the CLI release before it,
    // 2.1.332, loads every case as 2.1.331 does (scripts/conformance-drift --releases 2.1.332).
    (
        Behaviour::UndecodableLinkTargetsRefused,
        ClaudeVersion::new(2, 1, 333),
    ),
    (
        Behaviour::ProcessLinksUnchecked,
        ClaudeVersion::new(2, 1, 333),
    ),
    (Behaviour::ManagedDropIns, ClaudeVersion::new(2, 1, 83)),
    (Behaviour::ManagedClaudeMd, ClaudeVersion::new(2, 1, 139)),
    // Bisected on npm: 2.1.165 rejects the whole file, 2.1.166 drops the key alone.
    (
        Behaviour::ManagedKeysOneByOne,
        ClaudeVersion::new(2, 1, 166),
    ),
    // 2.1.112 is the last npm release whose `bin` is `cli.js` (run on Node), 2.1.113 the first
    // that ships the native `bin/claude.exe`; cases 111, 112 and 113 recorded on both (outside
    // the corpus) change there.
    (
        Behaviour::RulesInDirectoryOrder,
        ClaudeVersion::new(2, 1, 113),
    ),
    // The same change of runtime (Node to the native binary).
    (
        Behaviour::UndecodableRuleLinkAbortsFolder,
        ClaudeVersion::new(2, 1, 113),
    ),
    // Bisected on npm with scripts/bisect-agent-settings (a `Read(./CLAUDE.md)` deny
    // rule, `blockReadsOutsideWorkingDirectories` in link delivery): 2.1.289 loads everything,
    // 2.1.290 withholds.
    (Behaviour::MemoryReadsChecked, ClaudeVersion::new(2, 1, 290)),
    // The same, `CLAUDE_CODE_AUTOMOUNT_ROOTS=/workspace/agent` in the user's settings: 2.1.322
    // loads the workspace's files, 2.1.323 skips them.
    (
        Behaviour::AutomountRootsSkipped,
        ClaudeVersion::new(2, 1, 323),
    ),
];

/// The releases the conformance corpus (`tests/fixtures/conformance`) is recorded on, newest
/// first. Keep in step with `tests/fixtures/conformance/VERSIONS`. 2.1.333 and 2.1.334 are
/// recorded from the Claude Code the Agent SDK 0.3.333 and 0.3.334 bundle (neither was
/// published as a CLI package).
pub const CORPUS: &[ClaudeVersion] = &[
    ClaudeVersion::new(2, 1, 334),
    ClaudeVersion::new(2, 1, 333),
    ClaudeVersion::new(2, 1, 331),
    ClaudeVersion::new(2, 1, 330),
    ClaudeVersion::new(2, 1, 328),
    ClaudeVersion::new(2, 1, 300),
    ClaudeVersion::new(2, 1, 280),
    ClaudeVersion::new(2, 1, 257),
    ClaudeVersion::new(2, 1, 250),
    ClaudeVersion::new(2, 1, 238),
    ClaudeVersion::new(2, 1, 200),
    ClaudeVersion::new(2, 1, 128),
    ClaudeVersion::new(2, 0, 77),
];

/// The releases on which the reading of the agent's settings ([`super::settings`]) was measured against the real binary (CLI
/// and Agent SDK 0.3.328; 2.1.257, nanoclaw v2.3's pin, and 2.1.332 with the CLI:
/// `tests/fixtures/agent-settings-probe/`, the settings oracle's `cases-<release>.json`). On any
/// other release a setting that could change memory is undecided.
pub const MEASURED: [ClaudeVersion; 4] = [
    ClaudeVersion::new(2, 1, 257),
    ClaudeVersion::new(2, 1, 328),
    ClaudeVersion::new(2, 1, 330),
    ClaudeVersion::new(2, 1, 332),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let v: ClaudeVersion = "2.1.328".parse().unwrap();
        assert_eq!(v, ClaudeVersion::new(2, 1, 328));
        assert_eq!(v.to_string(), "2.1.328");
        for bad in ["", "2.1", "2.1.x", "2.1.3.4", "v2.1.3", "2..1", "-1.0.0"] {
            assert!(bad.parse::<ClaudeVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn table_gates() {
        let v = |s: &str| s.parse::<ClaudeVersion>().unwrap();
        assert!(v("2.1.330").has(Behaviour::CrNormalisedOnlyWhenStripped));
        assert!(!v("2.1.329").has(Behaviour::CrNormalisedOnlyWhenStripped));
        assert!(v("2.1.281").has(Behaviour::AgentsMdFallback));
        assert!(!v("2.1.280").has(Behaviour::AgentsMdFallback));
        assert!(!v("2.0.77").has(Behaviour::BodiesTrimmed));
        assert!(v("2.1.100").has(Behaviour::WorktreeSkipsMainCheckout));
        assert!(!v("2.1.100").has(Behaviour::RelativeWorktreeSkipsMainCheckout));
        assert!(v("2.1.198").has(Behaviour::RelativeWorktreeSkipsMainCheckout));
        assert!(v("2.1.83").has(Behaviour::RelativeWorktreeSkipsMainCheckout));
        assert!(v("2.1.333").has(Behaviour::UndecodableLinkTargetsRefused));
        assert!(v("2.1.333").has(Behaviour::ProcessLinksUnchecked));
        assert!(!v("2.1.332").has(Behaviour::UndecodableLinkTargetsRefused));
        assert!(!v("2.1.332").has(Behaviour::ProcessLinksUnchecked));
        // 2.1.334 (Agent SDK 0.3.334) loads every case as 2.1.333: no row starts there.
        assert!(v("2.1.334").has(Behaviour::UndecodableLinkTargetsRefused));
        assert!(v("2.1.334").has(Behaviour::ProcessLinksUnchecked));
    }

    #[test]
    fn every_behaviour_has_one_row() {
        for (i, (b, _)) in FIRST_RELEASE.iter().enumerate() {
            assert!(!FIRST_RELEASE[i + 1..].iter().any(|(o, _)| o == b), "{b:?}");
        }
    }

    #[test]
    fn verification() {
        assert_eq!(ClaudeVersion::default(), ClaudeVersion::new(2, 1, 330));
        assert!(ClaudeVersion::new(2, 1, 328).is_verified());
        assert!(ClaudeVersion::new(2, 1, 333).is_verified());
        assert!(ClaudeVersion::new(2, 1, 334).is_verified());
        assert_eq!(
            ClaudeVersion::newest_verified(),
            ClaudeVersion::new(2, 1, 334)
        );
        assert!(!ClaudeVersion::new(2, 1, 335).is_verified());
        assert_eq!(
            ClaudeVersion::new(2, 1, 335).nearest_verified(),
            ClaudeVersion::new(2, 1, 334)
        );
        assert!(!ClaudeVersion::new(2, 1, 332).is_verified());
        assert!(!ClaudeVersion::new(2, 1, 329).is_verified());
        assert_eq!(
            ClaudeVersion::new(2, 1, 329).nearest_verified(),
            ClaudeVersion::new(2, 1, 328)
        );
        assert_eq!(
            ClaudeVersion::new(1, 0, 0).nearest_verified(),
            ClaudeVersion::new(2, 0, 77)
        );
    }
}
