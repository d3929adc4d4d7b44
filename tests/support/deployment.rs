//! A deployment (`container/` + `groups/`) built in a temp dir, and the binary run on it.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::run::{Run, run_clawmd};
use super::tree::{TempTree, copy_tree};

/// A deployment in a fresh [`TempTree`] (which it derefs to: `root`, `path`, `read`, `write`,
/// `exists`, `tree`, ...). Printed to stderr when the test fails.
pub struct Deployment {
    tree: TempTree,
}

impl std::ops::Deref for Deployment {
    type Target = TempTree;
    fn deref(&self) -> &TempTree {
        &self.tree
    }
}

/// nanoclaw's six built-in modules that ship guidance (v2.0.64).
pub const NANOCLAW_MODULES: [&str; 6] = [
    "agents",
    "cli",
    "core",
    "interactive",
    "scheduling",
    "self-mod",
];

impl Deployment {
    /// An empty deployment: `container/skills/` and `groups/` exist and are empty.
    pub fn new() -> Self {
        Deployment::in_tree(TempTree::new())
    }

    /// An empty deployment in [`super::work_dir`] (tmpfs by default, `CLAWMD_TEST_DIR`): for
    /// the heavy tests that run the binary hundreds of times.
    pub fn on_work_dir() -> Self {
        Deployment::in_tree(TempTree::on_work_dir())
    }

    fn in_tree(tree: TempTree) -> Self {
        std::fs::create_dir_all(tree.path("container/skills")).unwrap();
        std::fs::create_dir_all(tree.path("groups")).unwrap();
        Deployment { tree }
    }

    /// A small deployment: a shared base, skills `web` and `hello` with instructions, `quiet`
    /// without, and no groups yet.
    pub fn standard() -> Self {
        Deployment::new().with_standard()
    }

    /// Adds the content of [`Deployment::standard`].
    pub fn with_standard(self) -> Self {
        self.file("container/CLAUDE.md", "BASE\n")
            .file("container/skills/web/SKILL.md", "web skill\n")
            .file("container/skills/web/instructions.md", "WEB\n")
            .file("container/skills/hello/SKILL.md", "hello skill\n")
            .file("container/skills/hello/instructions.md", "HELLO\n")
            .file("container/skills/quiet/SKILL.md", "no instructions\n")
    }

    /// The example deployment checked into this repository, copied.
    pub fn example() -> Self {
        let deployment = Deployment::new();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        copy_tree(&repo.join("container"), &deployment.path("container"));
        for group in ["main", "research", "ops"] {
            let from = repo.join("groups").join(group);
            let to = deployment.path(&format!("groups/{group}"));
            std::fs::create_dir_all(&to).unwrap();
            for name in ["container.json", "CLAUDE.local.md"] {
                std::fs::copy(from.join(name), to.join(name)).unwrap();
            }
        }
        deployment
    }

    /// A nanoclaw v2.0.64 checkout as clawmd reads it (tests/fixtures/nanoclaw: the shared
    /// base, the skills, the six module fragments, the Dockerfile and the runner's
    /// package.json, `groups/global` and `groups/main` as a fresh clone has them).
    pub fn nanoclaw() -> Self {
        let deployment = Deployment::new();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nanoclaw");
        for top in ["container", "groups", "src"] {
            copy_tree(&fixture.join(top), &deployment.path(top));
        }
        deployment
    }

    /// The first line of text of nanoclaw's built-in module `name`'s guidance
    /// (`container/agent-runner/src/mcp-tools/<name>.instructions.md`).
    pub fn module_line(&self, name: &str) -> String {
        self.read(&format!(
            "container/agent-runner/src/mcp-tools/{name}.instructions.md"
        ))
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap()
        .trim()
        .to_owned()
    }

    /// Copies the example recipe `docs/recipes/<name>/` into the root, as an operator would
    /// (every file but its README.md).
    pub fn with_recipe(self, name: &str) -> Self {
        let recipe = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/recipes")
            .join(name);
        assert!(recipe.is_dir(), "no recipe {}", recipe.display());
        copy_tree(&recipe, self.root());
        std::fs::remove_file(self.path("README.md")).unwrap();
        self
    }

    /// A copy of this deployment (symlinks kept as symlinks) in a fresh [`super::work_dir`].
    pub fn copy_on_work_dir(&self) -> Deployment {
        let to = Deployment {
            tree: TempTree::on_work_dir(),
        };
        for top in ["groups", "container"] {
            if self.path(top).exists() {
                copy_tree(&self.path(top), &to.path(top));
            }
        }
        // The files at the root (`clawmd.json`, a config to hand), as they are.
        for entry in std::fs::read_dir(self.root()).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.path(&entry.file_name().to_string_lossy())).unwrap();
            }
        }
        to
    }

    /// Writes a file (creating folders).
    #[track_caller]
    pub fn file(self, rel: &str, content: &str) -> Self {
        self.write(rel, content.as_bytes());
        self
    }

    /// Creates a group folder with this `container.json` (`None`: no config file).
    pub fn group(self, name: &str, config: Option<&str>) -> Self {
        std::fs::create_dir_all(self.path(&format!("groups/{name}"))).unwrap();
        match config {
            Some(config) => self.file(&format!("groups/{name}/container.json"), config),
            None => self,
        }
    }

    /// The relative path of the composed entry point of `group` (`CLAUDE.md`, `AGENTS.md`,
    /// `GEMINI.md`): in the group's bind folder in clawmd's state (the default state folder),
    /// which the runner binds over the group folder's mount point.
    pub fn composed(group: &str, entry: &str) -> String {
        format!("groups/.clawmd/binds/{group}/{entry}")
    }

    /// The relative path of a file of `group`'s managed-policy folder (managed delivery).
    pub fn managed(group: &str, name: &str) -> String {
        format!("groups/.clawmd/binds/{group}/managed/{name}")
    }

    /// The text of `group`'s composed `CLAUDE.md` (see [`Deployment::composed`]).
    #[track_caller]
    pub fn claude_md(&self, group: &str) -> String {
        self.read(&Deployment::composed(group, "CLAUDE.md"))
    }

    /// The text of `group`'s managed `CLAUDE.md` (the guardrails, in managed delivery).
    #[track_caller]
    pub fn managed_md(&self, group: &str) -> String {
        self.read(&Deployment::managed(group, "CLAUDE.md"))
    }

    /// The target of a symlink.
    #[track_caller]
    pub fn link(&self, rel: &str) -> PathBuf {
        self.read_link(rel)
    }

    /// Runs `clawmd ARGS` on the deployment (the root is passed as `CLAWMD_ROOT`).
    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_clawmd(args, &[("CLAWMD_ROOT", self.root().as_os_str())])
    }

    /// The host folder where compose keeps `group`'s hand edits (the default state folder).
    pub fn rescue_dir(&self, group: &str) -> PathBuf {
        self.path(&format!("groups/.clawmd/rescues/{group}"))
    }

    /// The names of the rescues kept for `group`, sorted (none when its rescue folder does not
    /// exist).
    pub fn rescues(&self, group: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.rescue_dir(group)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The text a report's `rescued[].to` names, which must be a host path in `group`'s rescue
    /// folder, outside the group.
    #[track_caller]
    pub fn read_rescued(&self, group: &str, to: &str) -> Vec<u8> {
        let path = Path::new(to);
        assert_eq!(
            path.parent(),
            Some(self.rescue_dir(group).as_path()),
            "{to} is not in the rescue folder of {group}"
        );
        std::fs::read(path).unwrap_or_else(|e| panic!("read {to}: {e}"))
    }

    /// Runs `clawmd ARGS` on the deployment again and again, each time aborted one step later
    /// (`CLAWMD_CRASH_AT`), until a crash leaves a temp file in each of `folders` (relative to
    /// the root); returns those temps (relative to the root). A real leftover of an
    /// interrupted run, recorded in its journal.
    #[track_caller]
    pub fn crash_leaving_temps(&self, args: &[&str], folders: &[&str]) -> Vec<String> {
        for crash_at in 1..200 {
            let run = super::run::clawmd(
                self.root(),
                args,
                &[("CLAWMD_CRASH_AT", crash_at.to_string().as_str())],
            );
            assert!(
                run.aborted(),
                "{args:?} completed before leaving temps: {}",
                run.show()
            );
            let temps = super::tree::temps(&self.tree());
            if folders.iter().all(|folder| {
                temps
                    .iter()
                    .any(|t| Path::new(t).parent() == Some(Path::new(folder)))
            }) {
                return temps;
            }
        }
        panic!("no crash of {args:?} left temps in {folders:?}");
    }

    /// A snapshot of every path under `groups/` and `container/` with its kind, content or
    /// target, inode and mtime: equal snapshots mean nothing was written. clawmd's records are
    /// made again, once, when a file their look found the same by its bytes has settled since
    /// (`records::a_groups_record_is_made_again_once_its_files_settle` and
    /// `records::the_shared_sources_record_is_made_again_once_its_files_settle` check when and
    /// that nothing is written after): the shared sources' record (`groups/.clawmd/sources/`)
    /// is left out, a group's record (`groups/.clawmd/verdicts/<group>`) stands as its key
    /// and verdict (and their folder as a folder), the journals (`groups/.clawmd/journal/<lock>`, which such a write settles)
    /// as their content.
    pub fn snapshot(&self) -> Vec<(String, String, u64, i64, i64)> {
        super::tree::walk(self.root())
            .into_iter()
            .filter(|(rel, ..)| !rel.starts_with(super::tree::SOURCES_RECORD))
            .map(|(rel, path, meta)| {
                if rel == super::tree::VERDICTS.trim_end_matches('/') {
                    return (rel, "dir".to_owned(), 0, 0, 0);
                }
                if rel.starts_with(super::tree::VERDICTS) && meta.is_file() {
                    let verdict = super::tree::record_verdict(std::fs::read(&path).unwrap());
                    return (rel, String::from_utf8_lossy(&verdict).into_owned(), 0, 0, 0);
                }
                if rel.starts_with("groups/.clawmd/journal/") && meta.is_file() {
                    let journal = std::fs::read(&path).unwrap();
                    return (rel, String::from_utf8_lossy(&journal).into_owned(), 0, 0, 0);
                }
                let what = if meta.file_type().is_symlink() {
                    format!("-> {}", std::fs::read_link(&path).unwrap().display())
                } else if meta.is_file() {
                    String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
                } else {
                    "dir".to_owned()
                };
                (rel, what, meta.ino(), meta.mtime(), meta.mtime_nsec())
            })
            .collect()
    }
}
