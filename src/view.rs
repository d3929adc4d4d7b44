//! The agent's view of its memory: the [`loader`](crate::loader) evaluated inside a group's
//! container, through the runner's mount table (DESIGN §1), so links that dangle on the host
//! (`.claude-shared.md -> /app/CLAUDE.md`) resolve as they do in the container and every path
//! is printed as the agent sees it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::GroupError;
use crate::layout::Layout;
use crate::loader::mounted::nanoclaw_mounts;
use crate::loader::{
    ClaudeVersion, ExternalImports, LoadOptions, Memory, Mount, MountedFs, Severity, load,
};

/// The default `$HOME` of the agent inside the container.
pub const DEFAULT_CONTAINER_HOME: &str = "/home/node";

/// Which Claude Code front end reads the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consumer {
    /// The CLI (`claude -p`): loads `CLAUDE.local.md` by discovery too.
    #[default]
    Cli,
    /// The Agent SDK with `settingSources: ['project','user']` (nanoclaw's setting): no
    /// `CLAUDE.local.md` unless it is imported.
    Sdk,
}

impl std::str::FromStr for Consumer {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "cli" => Ok(Consumer::Cli),
            "sdk" => Ok(Consumer::Sdk),
            _ => Err(format!("unknown consumer {text:?}: use cli or sdk")),
        }
    }
}

/// How to look at a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ViewOptions {
    /// Treat external imports as approved for the workspace (else: as `~/.claude.json` in the
    /// mounted home says, i.e. not approved when there is no home).
    pub approve_external: bool,
    /// A host folder mounted as the agent's `$HOME` (user memory, `~/.claude.json`).
    pub home: Option<PathBuf>,
    /// Where that home is mounted in the container (default [`DEFAULT_CONTAINER_HOME`]).
    pub container_home: Option<PathBuf>,
    /// The front end.
    pub consumer: Consumer,
    /// The Claude Code release whose loader to reproduce (default: the newest the conformance
    /// corpus covers). Deployments pin a release; set it from their settings.
    pub claude_version: ClaudeVersion,
}

/// The mounts of `group`'s container: the nanoclaw table, plus the home when given.
pub fn group_mounts(layout: &Layout, group: &str, options: &ViewOptions) -> Vec<Mount> {
    let mut mounts = nanoclaw_mounts(
        &layout.group_dir(group),
        &layout.container_dir,
        &layout.workspace_mount,
        &layout.app_mount,
    );
    if let Some(home) = &options.home {
        mounts.push(Mount::new(container_home(options), home));
    }
    mounts
}

fn container_home(options: &ViewOptions) -> PathBuf {
    options
        .container_home
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTAINER_HOME))
}

/// The options the loader runs with for a container started in `cwd`.
pub fn load_options(cwd: &Path, home: Option<PathBuf>, options: &ViewOptions) -> LoadOptions {
    let mut load_options = LoadOptions::new(cwd, home);
    load_options.claude_version = options.claude_version;
    if options.approve_external {
        load_options.external_imports = ExternalImports::Approved;
    }
    if options.consumer == Consumer::Sdk {
        load_options.load_local = false;
    }
    load_options
}

/// Loads what the agent of `group` gets at spawn. Returns the memory and the mounted
/// filesystem it was read through (to map container paths back to the host).
pub fn load_group(
    layout: &Layout,
    group: &str,
    options: &ViewOptions,
) -> Result<(Memory, MountedFs), GroupError> {
    let group_dir = crate::deployment::checked_group_dir(layout, group)?;
    if std::fs::symlink_metadata(&group_dir).is_err() {
        return Err(GroupError::Missing { path: group_dir });
    }
    let fs = MountedFs::new(group_mounts(layout, group, options));
    let home = options.home.as_ref().map(|_| container_home(options));
    let mut load_options = load_options(&layout.workspace_mount, home, options);
    load_options.managed_dir = None;
    let memory = load(&fs, &load_options)?;
    Ok((memory, fs))
}

/// A listing of what reaches the agent and what is dropped, for `render --delivery-view`.
pub fn delivery_view(memory: &Memory) -> String {
    let mut out = String::new();
    let approval = if memory.external_imports_approved {
        "approved"
    } else {
        "not approved"
    };
    let _ = writeln!(
        out,
        "memory for {} (external imports {approval}):",
        memory.cwd.display()
    );
    for file in &memory.files {
        let chars = file.body.chars().count();
        let via = match (&file.import, &file.parent) {
            (Some(import), Some(parent)) => format!(" via {import} in {}", parent.display()),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  loaded   {} ({chars} chars, {}){via}",
            file.path.display(),
            file.label()
        );
    }
    for diagnostic in &memory.diagnostics {
        let mark = match diagnostic.severity {
            Severity::Warning => "warning ",
            Severity::Info => "note    ",
        };
        let _ = writeln!(out, "  {mark} {}", diagnostic.message);
    }
    if memory.files.is_empty() {
        let _ = writeln!(out, "  (nothing: Claude Code sends no memory block)");
    }
    out
}
