//! Every machine-readable code clawmd reports, in one vocabulary: a group's error, a run's
//! error, a warning, a `check` finding. The JSON spelling is the kebab-case text given here,
//! and it is stable within a report version (docs/json-report.md).

use serde::{Deserialize, Serialize};

use crate::disk::fsops::FsError;
use crate::error::GroupError;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $text:literal, )*) => {
        /// A stable machine-readable code.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
            schemars::JsonSchema,
        )]
        pub enum Code {
            $( $(#[$doc])* #[serde(rename = $text)] $variant, )*
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The code as it is printed and serialised.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)*
                }
            }
        }
    };
}

codes! {
    // A run that could not start.
    /// `clawmd.json` could not be used, or the groups folder or the shared content could not
    /// be read; nothing was done.
    RunFailed = "run-failed",
    /// `clawmd serve`: a request line that is not a request (not JSON, an unknown field, a
    /// missing `group`, too long); the service answers it and reads the next line.
    BadRequest = "bad-request",

    // A group that failed (compose, migrate, and check's group errors).
    /// The group name cannot be a folder name.
    BadGroupName = "bad-group-name",
    /// The group name is reserved (`global`, the retired shared folder).
    ReservedGroup = "reserved-group",
    /// The group folder does not exist.
    MissingGroup = "missing-group",
    /// `container.json` is malformed.
    BadConfig = "bad-config",
    /// Two sections (a skill and an MCP server, …) would share a fragment file name.
    FragmentCollision = "fragment-collision",
    /// A path that must be a real file or folder is a link, a device, a FIFO…
    UnsafePath = "unsafe-path",
    /// A file is larger than clawmd reads or writes.
    TooLarge = "too-large",
    /// The group's rescued hand edits are over the per-group limit.
    TooManyRescues = "too-many-rescues",
    /// Another run held the group's lock for too long.
    LockTimeout = "lock-timeout",
    /// A system call failed.
    Io = "io",
    /// clawmd met a bug (a panic) while checking this group; the other groups were still
    /// checked. Please report it.
    InternalError = "internal-error",
    /// The memory loader could not start.
    Loader = "loader",
    /// `clawmd mounts`: a file the group's binds need is not composed yet.
    NotComposed = "not-composed",
    /// `clawmd mounts --format k8s`: a composed file (or folder) holds more than a ConfigMap
    /// can carry (1 MiB of data).
    OverConfigMapLimit = "over-configmap-limit",
    /// `clawmd mounts --format k8s`: the group's composition cannot be carried by ConfigMaps
    /// (link delivery's fragments are symbolic links).
    NotForKubernetes = "not-for-kubernetes",

    // Warnings (compose).
    /// `skills` names a skill that does not exist.
    UnknownSkill = "unknown-skill",
    /// A key in `container.json` (a near miss of `skills`, `mcpServers`, `provider` or
    /// `mcpServers.*.instructions`) or in `clawmd.json` that clawmd does not read; the message
    /// names the key it probably meant.
    UnknownKey = "unknown-key",
    /// `container/CLAUDE.md` is missing.
    MissingSharedBase = "missing-shared-base",
    /// A skill folder whose name cannot be a file name (top level).
    BadSkillName = "bad-skill-name",
    /// An optional section (a skill, MCP instructions) dropped over the target's byte budget.
    SectionDropped = "section-dropped",
    /// The target is over its byte budget even without every optional section.
    OverBudget = "over-budget",
    /// An import inside a shared source that clawmd cannot deliver (top level).
    SharedImportNotDelivered = "shared-import-not-delivered",
    /// Something about `clawmd.json` other than an unknown key (an unmodelled Claude Code
    /// version).
    Settings = "settings",
    /// A shared file or fragment folder the recipe (`sources` in `clawmd.json`) names does
    /// not exist.
    MissingSource = "missing-source",
    /// A value in the group's config that clawmd ignores (a provider it does not compose
    /// for, a per-group switch that is not what the recipe expects).
    IgnoredConfig = "ignored-config",
    /// `"groupConfig": "handed"` and no config handed for the group yet: composed from its
    /// `container.json`, which lacks what the runner keeps apart (nanoclaw's `cli_scope`).
    ConfigNotHanded = "config-not-handed",
    /// A file or folder of the group that the recipe reads is a link, a device or too large:
    /// it is left out of the group's memory.
    GroupSourceUnread = "group-source-unread",
    /// Something in the host's own managed policy (`hostManagedDir`) that the groups'
    /// managed folders do not take as it is (a memory switch clawmd pins off, a file it does
    /// not merge).
    HostManaged = "host-managed",
    /// The entry point in the group folder, a mount point, holds text of its own that never
    /// reaches the agent; it is left as it is (compose and check).
    MountPointEdited = "mount-point-edited",
    /// The group's own memory file (`CLAUDE.local.md`) is a link, a FIFO, a device or a
    /// folder: left as it is, the group composed without it (compose and check).
    LocalMemoryUnusable = "local-memory-unusable",
    /// `.claude-fragments` holds something clawmd did not write and nothing imports (a
    /// person's file, the agent's): left as it is, never removed (compose and check).
    ForeignFragment = "foreign-fragment",
    /// A flat document (Codex, opencode, Gemini CLI) carries only the first part of the
    /// group's memory: the rest did not fit in the room the operator's sections leave.
    LocalMemoryCut = "local-memory-cut",

    // `check` findings about the composition.
    /// The disk differs from what `container.json` asks for.
    OutOfDate = "out-of-date",
    /// `CLAUDE.md` was edited by hand.
    HandEdited = "hand-edited",
    /// The group is laid out as before bind folders: the composed entry point (or the shared
    /// base) is in the group folder, where a recompose detaches the runner's read-only bind.
    OldLayout = "old-layout",
    /// A fragment of a skill that is not enabled.
    DisabledSkillFragment = "disabled-skill-fragment",
    /// A temp file left by an interrupted run.
    StaleTemp = "stale-temp",
    /// A rescued hand edit waits to be merged.
    RescuedText = "rescued-text",
    /// Files named like rescued hand edits in a group folder (where clawmd kept them before it
    /// kept them outside the group): clawmd cannot tell them from files the agent wrote.
    LegacyRescues = "legacy-rescues",
    /// `@` words inside inline MCP instructions.
    ImportInInstructions = "import-in-instructions",

    // `check` findings from the loader's view inside the container.
    /// Imports dropped because external imports are not approved.
    ExternalImportDropped = "external-import-dropped",
    /// An import whose target does not exist.
    ImportMissing = "import-missing",
    /// An import beyond the depth limit.
    ImportTooDeep = "import-too-deep",
    /// Imports that form a cycle.
    ImportCycle = "import-cycle",
    /// An import of something that is not a text file.
    ImportNotLoaded = "import-not-loaded",
    /// A memory file over Claude Code's size limit.
    FileTooLarge = "file-too-large",
    /// A memory file that cannot be read.
    FileUnreadable = "file-unreadable",
    /// A memory file Claude Code cannot parse.
    FileUnparsable = "file-unparsable",
    /// A symlink loop.
    SymlinkLoop = "symlink-loop",
    /// A memory file over Claude Code's warning size.
    Oversized = "oversized",
    /// All memory together over Claude Code's warning size.
    MemoryOversized = "memory-oversized",
    /// A rule reached through a link that leaves the workspace.
    RuleExternal = "rule-external",
    /// `~/.claude.json` cannot be read.
    ConfigUnreadable = "config-unreadable",
    /// A link that dangles even inside the container.
    DanglingLink = "dangling-link",
    /// A memory file in a folder Claude Code refuses to load from (`connector-downloads`, a
    /// session scratchpad).
    FileProtected = "file-protected",
    /// A memory file reached through a link Claude Code does not follow to memory (since
    /// 2.1.333: a target whose name is not UTF-8, a process's own link such as
    /// `/proc/self/cwd`).
    LinkUnchecked = "link-unchecked",
    /// The working directory's path is not UTF-8: Claude Code does not start.
    CwdNotUtf8 = "cwd-not-utf8",
    /// `--claude-version` names a release outside the conformance corpus.
    ClaudeVersionUnverified = "claude-version-unverified",
    /// One of the loader's budgets was reached: the view of the memory is incomplete there.
    BudgetExceeded = "budget-exceeded",
    /// Something composed for the agent does not reach it (compose's `delivered` verdict).
    NotDelivered = "not-delivered",
    /// A settings file the agent can write turns all memory off
    /// (`env.CLAUDE_CODE_DISABLE_CLAUDE_MDS`).
    MemoryDisabled = "memory-disabled",
    /// A `claudeMdExcludes` pattern keeps a memory file from loading.
    Excluded = "excluded",
    /// A settings file Claude Code rejects as a whole (its memory settings do not apply).
    SettingsRejected = "settings-rejected",
    /// A setting that may change what loads and that clawmd cannot decide: the guardrails may
    /// not reach the agent.
    SettingsUndecided = "settings-undecided",
    /// An instruction file the agent planted (`AGENTS.md`) loads in place of the composed
    /// memory.
    PlantedInstructions = "planted-instructions",
    /// A setting the agent can write withholds a memory file (compose warning, `check`): a
    /// `permissions.deny` rule `Read(…)` matching it, `permissions.blockReadsOutsideWorkingDirectories`
    /// (an import outside the working folders), `env.CLAUDE_CODE_AUTOMOUNT_ROOTS` (its folder
    /// skipped); the message names the setting, its file and the file withheld.
    Withheld = "withheld",
    /// A setting the agent can write replaces Claude Code's whole system prompt with a file of
    /// its own (the CLI's main-thread `agent` with `.claude/agents/<name>.md`), where the
    /// managed settings do not pin it (compose warning, `check`).
    SystemPromptReplaced = "system-prompt-replaced",
}

impl From<&GroupError> for Code {
    /// The code of a group's failure.
    fn from(err: &GroupError) -> Self {
        match err {
            GroupError::BadName { .. } => Code::BadGroupName,
            GroupError::Reserved { .. } => Code::ReservedGroup,
            GroupError::TooManyRescues { .. } => Code::TooManyRescues,
            GroupError::Missing { .. } => Code::MissingGroup,
            GroupError::NotComposed { .. } | GroupError::NotUpToDate { .. } => Code::NotComposed,
            GroupError::OverConfigMapLimit { .. } => Code::OverConfigMapLimit,
            GroupError::NotForKubernetes { .. } => Code::NotForKubernetes,
            GroupError::Config(_) => Code::BadConfig,
            GroupError::Collision { .. } => Code::FragmentCollision,
            GroupError::Fs(err) => Code::from(err),
            GroupError::Skill { source, .. } | GroupError::Source { source, .. } => {
                Code::from(&**source)
            }
            GroupError::Loader(_) => Code::Loader,
            GroupError::AgentHomeUnknown { .. } => Code::SettingsUndecided,
        }
    }
}

impl From<&crate::Error> for Code {
    /// The code of a run that could not start: `run-failed`, or, when the one group a command
    /// is about cannot be used (`clawmd mounts GROUP`), that group's error's code, as `clawmd
    /// serve` answers it (`not-composed`, `missing-group`, …).
    fn from(err: &crate::Error) -> Self {
        match err {
            crate::Error::Group { source, .. } => Code::from(&**source),
            crate::Error::Settings(_)
            | crate::Error::Groups(_)
            | crate::Error::Sources(_)
            | crate::Error::Guard(_) => Code::RunFailed,
        }
    }
}

impl From<&FsError> for Code {
    /// The code of a refused or failed filesystem operation.
    fn from(err: &FsError) -> Self {
        match err {
            FsError::Unsafe { .. } => Code::UnsafePath,
            FsError::TooLarge { .. } => Code::TooLarge,
            FsError::LockTimeout { .. } => Code::LockTimeout,
            FsError::Io { .. } => Code::Io,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_serialises_as_its_text_and_is_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, code.as_str(), "{code:?}");
            assert!(seen.insert(code.as_str()), "{code:?} twice");
            let back: Code = serde_json::from_value(json).unwrap();
            assert_eq!(back, *code);
        }
    }
}
