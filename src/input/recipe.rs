//! The recipe: which sources a group's memory is composed from, in which order, and how each
//! is delivered (clawmd.json's `sources` and `memory`).
//!
//! A source is one of five kinds:
//!
//! * `shared` — a file under `container/` (default `CLAUDE.md`, the shared base), its own
//!   imports expanded from `container/`, where its owner put them;
//! * `group-file` — a file in the group folder (a persona, standing instructions): the agent's
//!   to write, so it is read through the group's safe view (never through a link, never a
//!   device) and its `@` imports are never followed on the host: they are shown as text;
//! * `skills` — a skill root: `container/skills/` (default) or the group's own `skills/`,
//!   each selected skill's `instructions.md` in full, or an index of every selected skill's
//!   name and description from its `SKILL.md` frontmatter;
//! * `fragments` — a folder of fragments under `container/` (nanoclaw's module guidance
//!   `agent-runner/src/mcp-tools/*.instructions.md`, an operator's `fragments/*.md`), each
//!   file matching the pattern a section, with per-group switches that drop some of them
//!   (a config key listing names, or a config key's value);
//! * `mcp` — the MCP servers' inline instructions from the group's config, fenced.
//!
//! `memory` says whether the group has its own live memory file, `CLAUDE.local.md` (the
//! default: seeded empty, imported, never changed), or none (`"none"`: the newer model, where
//! the agent keeps its memory in a folder of its own that clawmd leaves alone).
//!
//! [`Recipe::default`] is clawmd's built-in behaviour: `shared`, `skills`, `mcp` and
//! `CLAUDE.local.md`, and composes byte for byte what clawmd composed before recipes existed.
//! Sources produce sections; where the sections go (the delivery mode, the target) is the
//! [`delivery`](crate::plan::delivery) module's business.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use crate::input::names;

/// The ordered sources of every group's memory, and its own memory file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Recipe {
    /// The sources, in the order their sections are delivered.
    pub sources: Vec<Source>,
    /// The group's own memory file.
    pub memory: MemoryFile,
}

impl Default for Recipe {
    /// clawmd's built-in recipe: the shared base, the selected skills' guidance, the MCP
    /// instructions, and `CLAUDE.local.md`.
    fn default() -> Self {
        Recipe {
            sources: vec![
                Source::shared(names::CLAUDE_MD),
                Source::container_skills(),
                Source::mcp(),
            ],
            memory: MemoryFile::Local,
        }
    }
}

impl Recipe {
    /// Where a person puts text of the group's own so that it reaches the agent, as fixes
    /// say it: `CLAUDE.local.md`, or with no memory file the group folder's file the recipe
    /// delivers (nanoclaw v2.3's persona, `instructions.prepend.md`).
    pub fn own_text_file(&self) -> String {
        if self.memory == MemoryFile::Local {
            return names::CLAUDE_LOCAL_MD.to_owned();
        }
        let group_file = self.sources.iter().find_map(|source| match &source.kind {
            SourceKind::GroupFiles {
                first: Some(first), ..
            } => Some(first.clone()),
            SourceKind::GroupFile { file } => Some(file.display().to_string()),
            _ => None,
        });
        match group_file {
            Some(file) => format!("the group folder's {file}"),
            None => "a source the deployment's recipe delivers (clawmd.json)".to_owned(),
        }
    }
}

/// The group's own memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MemoryFile {
    /// `CLAUDE.local.md`: created empty when missing, never changed, imported by the composed
    /// document so every consumer loads it.
    #[default]
    Local,
    /// None: no `CLAUDE.local.md` is created or imported (the agent keeps its memory where
    /// the recipe's own instructions tell it to).
    None,
}

/// One source of a group's memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Source {
    /// What it reads.
    pub kind: SourceKind,
    /// The name of its section (single-file kinds) or the prefix of its sections' names
    /// (`<name>:<item>`), as reports print them.
    pub name: String,
    /// A heading line (`# <heading>`) put before each of its sections in a document (inline,
    /// managed, flat), `{name}` replaced by the item's name (a skill, a fragment, a server):
    /// nanoclaw's `# NanoClaw Module: core`.
    pub heading: Option<String>,
    /// The order in which its sections are dropped over budget (lower first; the default:
    /// skills 0, fragments and MCP instructions 1; shared files, the group's own files and the
    /// native-skills section are never dropped). Sources of the same rank drop largest first.
    pub rank: Option<u8>,
}

/// Where a skill root lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillRoot {
    /// Under `container/`, mounted read-only into every container.
    Container,
    /// In the group folder (the agent's to write).
    Group,
}

/// How a skill root is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillForm {
    /// Each selected skill's guidance file, whole.
    #[default]
    Full,
    /// One section listing each selected skill's name and description (from its `SKILL.md`
    /// frontmatter) and where to read it: the agent opens a skill when it needs it.
    Index,
}

/// Which skills of a root a group gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Select {
    /// The group config's `skills` (`"all"` or a list; missing means all).
    #[default]
    Config,
    /// Every skill of the root.
    All,
}

/// A per-group switch that drops some items of a fragments folder.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DropRule {
    /// The group config's keys and the value each must have for the rule to apply (all of
    /// them), e.g. `{"cli_scope": "disabled"}`.
    pub when: std::collections::BTreeMap<String, String>,
    /// The items dropped then (fragment names, e.g. `["cli"]`).
    pub names: Vec<String>,
}

/// What a source reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// A file under `container/`, delivered with its imports expanded from there.
    Shared {
        /// Its path under `container/`.
        file: PathBuf,
        /// Where the container sees it (default `<appMount>/<file>`).
        mount: Option<PathBuf>,
        /// A placeholder paragraph (`{{provider-memory-note}}`) replaced by the group's
        /// backend's memory note, or removed with the blank line before it where the backend
        /// has none (nanoclaw's `renderBaseInstructions`).
        memory_note: Option<String>,
    },
    /// The group folder's files whose names match a pattern (nanoclaw's `*.prepend.md`), the
    /// `first` one first and the others sorted by name, each trimmed, empty ones skipped,
    /// joined by a blank line, as one section: the agent's to write, so read through the
    /// group's safe view (a link, a FIFO or a device is refused with a warning).
    GroupFiles {
        /// The file names taken, with one `*`.
        pattern: Pattern,
        /// The file that leads (`instructions.prepend.md`).
        first: Option<String>,
    },
    /// The group's backend's native skill discovery (where it finds the shared skills and
    /// where the agent's own go), for backends whose documents must say it (Codex, Cursor).
    NativeSkills,
    /// A notice, last in a document, naming the sections dropped over its budget (nanoclaw's
    /// "Omitted for size"); nothing when none was.
    Omitted,
    /// A file in the group folder, delivered as its text (imports shown, never followed).
    GroupFile {
        /// Its path in the group folder.
        file: PathBuf,
    },
    /// A folder of skills, one subfolder each.
    Skills {
        /// Under `container/` or in the group folder.
        root: SkillRoot,
        /// The folder, relative to the root.
        dir: PathBuf,
        /// The guidance file in each skill's folder (default `instructions.md`).
        file: String,
        /// Whole, or an index.
        form: SkillForm,
        /// Which skills.
        select: Select,
        /// Where the container sees a container root (default `<appMount>/<dir>`).
        mount: Option<PathBuf>,
    },
    /// A folder of fragments under `container/`, never changed by clawmd.
    Fragments {
        /// The folder, under `container/`.
        dir: PathBuf,
        /// The file names taken: one `*`, whose match is the fragment's name.
        pattern: Pattern,
        /// Where the container sees the folder (default `<appMount>/<dir>`).
        mount: Option<PathBuf>,
        /// A group config key holding a list of fragment names to leave out.
        drop_listed_in: Option<String>,
        /// Fragments left out when the group config says so.
        drop: Vec<DropRule>,
    },
    /// The MCP servers' inline instructions from the group's config.
    Mcp,
}

/// A file-name pattern with one `*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    prefix: String,
    suffix: String,
}

impl Pattern {
    /// The pattern `text`, which must hold exactly one `*` and no `/`.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        if text.contains('/') {
            return Err(format!(
                "pattern {text:?} holds a '/': it matches file names in one folder"
            ));
        }
        match text.split_once('*') {
            Some((prefix, suffix)) if !suffix.contains('*') => Ok(Pattern {
                prefix: prefix.to_owned(),
                suffix: suffix.to_owned(),
            }),
            _ => Err(format!(
                "pattern {text:?} must hold exactly one '*' (the fragment's name), e.g. \"*.md\""
            )),
        }
    }

    /// The part of `file_name` the `*` matches (never empty), when it matches.
    pub fn matches<'n>(&self, file_name: &'n str) -> Option<&'n str> {
        let rest = file_name.strip_prefix(&self.prefix)?;
        let name = rest.strip_suffix(&self.suffix)?;
        (!name.is_empty()).then_some(name)
    }

    /// The file name of the fragment `name`.
    pub fn file_name(&self, name: &str) -> String {
        format!("{}{name}{}", self.prefix, self.suffix)
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}*{}", self.prefix, self.suffix)
    }
}

impl Source {
    /// A file under `container/`; the shared base (`CLAUDE.md`) is named `shared-base`.
    pub fn shared(file: &str) -> Source {
        Source {
            name: default_shared_name(Path::new(file)),
            kind: SourceKind::Shared {
                file: PathBuf::from(file),
                mount: None,
                memory_note: None,
            },
            heading: None,
            rank: None,
        }
    }

    /// `container/skills/<skill>/instructions.md`, selected by the group config's `skills`.
    pub fn container_skills() -> Source {
        Source {
            name: "skill".to_owned(),
            kind: SourceKind::Skills {
                root: SkillRoot::Container,
                dir: PathBuf::from(names::SKILLS),
                file: names::SKILL_INSTRUCTIONS.to_owned(),
                form: SkillForm::Full,
                select: Select::Config,
                mount: None,
            },
            heading: None,
            rank: None,
        }
    }

    /// The MCP servers' inline instructions.
    pub fn mcp() -> Source {
        Source {
            name: "mcp".to_owned(),
            kind: SourceKind::Mcp,
            heading: None,
            rank: None,
        }
    }

    /// Whether this source reads the group folder (so a plan depends on more than the config).
    pub fn reads_group(&self) -> bool {
        matches!(
            self.kind,
            SourceKind::GroupFile { .. }
                | SourceKind::GroupFiles { .. }
                | SourceKind::Skills {
                    root: SkillRoot::Group,
                    ..
                }
        )
    }

    /// Whether this is clawmd's built-in skill root (`container/skills`, full text, named
    /// `skill`), whose fragments keep their historical file names (`<skill>.md`).
    pub fn is_builtin_skills(&self) -> bool {
        self.name == "skill"
            && matches!(
                &self.kind,
                SourceKind::Skills {
                    root: SkillRoot::Container,
                    form: SkillForm::Full,
                    ..
                }
            )
    }
}

fn default_shared_name(file: &Path) -> String {
    if file == Path::new(names::CLAUDE_MD) {
        "shared-base".to_owned()
    } else {
        format!("shared:{}", file.display())
    }
}

impl Recipe {
    /// The container-side folders and files the sources read, as `(container path, host
    /// path)` mounts, beside the runner's mount table: shared files other than the base, skill
    /// roots other than `skills`, fragment folders.
    pub fn mounts(&self, app: &Path, container_dir: &Path) -> Vec<(PathBuf, PathBuf)> {
        let mut mounts = Vec::new();
        for source in &self.sources {
            let (relative, mount) = match &source.kind {
                SourceKind::Shared { file, mount, .. } => (file, mount),
                SourceKind::Skills {
                    root: SkillRoot::Container,
                    dir,
                    mount,
                    ..
                }
                | SourceKind::Fragments { dir, mount, .. } => (dir, mount),
                _ => continue,
            };
            let container = mount.clone().unwrap_or_else(|| app.join(relative));
            let host = container_dir.join(relative);
            // The runner's own table already has `<app>/CLAUDE.md` and `<app>/skills`.
            let builtin = [names::CLAUDE_MD, names::SKILLS]
                .iter()
                .any(|name| container == app.join(name) && host == container_dir.join(name));
            if !builtin && !mounts.contains(&(container.clone(), host.clone())) {
                mounts.push((container, host));
            }
        }
        mounts
    }

    /// Whether any source reads the group folder.
    pub fn reads_group(&self) -> bool {
        self.sources.iter().any(Source::reads_group)
    }
}

// Parsing (clawmd.json)

/// One entry of clawmd.json's `sources`, as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum RawSource {
    /// A file under the container folder, its imports expanded from there.
    #[serde(rename_all = "camelCase")]
    Shared {
        /// Its path under the container folder (default "CLAUDE.md", the shared base).
        #[serde(default)]
        file: Option<String>,
        /// Where the container sees it (default: under appMount, at the same relative path).
        #[serde(default)]
        mount: Option<String>,
        /// The section's name in reports (default "shared-base" for CLAUDE.md, else
        /// "shared:`<file>`").
        #[serde(default)]
        name: Option<String>,
        /// A placeholder paragraph in the file, e.g. "{{provider-memory-note}}", replaced by
        /// the sentence naming the files the group's backend loads that must not hold memory
        /// (Codex, Cursor), or removed with the blank line before it (the others).
        #[serde(default)]
        memory_note: Option<String>,
        /// A heading line put before the section in a document, e.g. "NanoClaw Runtime
        /// Contract".
        #[serde(default)]
        heading: Option<String>,
    },
    /// A file in the group folder (the agent's to write), delivered as its text: its `@`
    /// imports are shown, never followed.
    GroupFile {
        /// Its path in the group folder, e.g. "persona.md".
        file: String,
        /// The section's name in reports (default "group:`<file>`").
        #[serde(default)]
        name: Option<String>,
        /// A heading line put before the section in a document.
        #[serde(default)]
        heading: Option<String>,
    },
    /// The group folder's files whose names match a pattern, as one section (nanoclaw's
    /// persona: `instructions.prepend.md`, then the other `*.prepend.md` sorted): the agent's
    /// to write, read through the group's safe view (links refused).
    GroupFiles {
        /// The file names taken, with one `*`, e.g. "*.prepend.md".
        pattern: String,
        /// The file that leads, e.g. "instructions.prepend.md" (the others follow sorted by
        /// name).
        #[serde(default)]
        first: Option<String>,
        /// The section's name in reports (default "group-files").
        #[serde(default)]
        name: Option<String>,
        /// A heading line put before the section in a document, e.g. "Persona".
        #[serde(default)]
        heading: Option<String>,
    },
    /// A notice, last in the document, naming the sections dropped over its budget (by their
    /// headings where they have one); nothing when none was.
    Omitted {
        /// The section's name in reports (default "omitted").
        #[serde(default)]
        name: Option<String>,
        /// A heading line put before the notice, e.g. "Omitted for size".
        #[serde(default)]
        heading: Option<String>,
    },
    /// Where the group's backend discovers the shared skills natively, and where skills the
    /// agent writes go (Codex, Cursor; nothing for the others).
    NativeSkills {
        /// The section's name in reports (default "native-skills").
        #[serde(default)]
        name: Option<String>,
        /// A heading line put before the section in a document, e.g. "Native Runtime Skills".
        #[serde(default)]
        heading: Option<String>,
    },
    /// A folder of skills, one subfolder each.
    Skills {
        /// "container" (default: under the container folder) or "group" (the group's own).
        #[serde(default)]
        root: Option<SkillRoot>,
        /// The folder, relative to the root (default "skills").
        #[serde(default)]
        dir: Option<String>,
        /// The guidance file in each skill folder (default "instructions.md").
        #[serde(default)]
        file: Option<String>,
        /// "full" (default): each skill's guidance file; "index": its name and description
        /// from SKILL.md.
        #[serde(default)]
        form: Option<SkillForm>,
        /// "config" (default): the group config's `skills`; "all": every skill of the root.
        #[serde(default)]
        select: Option<Select>,
        /// Where the container sees a container root (default: under appMount).
        #[serde(default)]
        mount: Option<String>,
        /// The prefix of the sections' names (default "skill", or "group-skill" for the
        /// group root).
        #[serde(default)]
        name: Option<String>,
        /// A heading line put before each section in a document, `{name}` the skill's name,
        /// e.g. "NanoClaw Skill: {name}".
        #[serde(default)]
        heading: Option<String>,
        /// The drop rank of its sections over budget (default 0; lower drops first).
        #[serde(default)]
        rank: Option<u8>,
    },
    /// A folder of fragments under the container folder, never changed by clawmd.
    #[serde(rename_all = "camelCase")]
    Fragments {
        /// The folder, relative to the container folder.
        dir: String,
        /// The file names taken, with one `*` for the fragment's name (default "*.md").
        #[serde(default)]
        pattern: Option<String>,
        /// Where the container sees the folder (default: under appMount).
        #[serde(default)]
        mount: Option<String>,
        /// The prefix of the sections' names (default "fragment").
        #[serde(default)]
        name: Option<String>,
        /// A key of the group config holding a list of fragment names to leave out.
        #[serde(default)]
        drop_listed_in: Option<String>,
        /// Fragments left out when the group config has given values.
        #[serde(default)]
        drop: Option<Vec<DropRule>>,
        /// A heading line put before each section in a document, `{name}` the fragment's
        /// name, e.g. "NanoClaw Module: {name}".
        #[serde(default)]
        heading: Option<String>,
        /// The drop rank of its sections over budget (default 1; lower drops first).
        #[serde(default)]
        rank: Option<u8>,
    },
    /// The MCP servers' inline instructions from the group config, fenced.
    Mcp {
        /// The prefix of the sections' names (default "mcp").
        #[serde(default)]
        name: Option<String>,
        /// A heading line put before each section in a document, `{name}` the server's name,
        /// e.g. "MCP Server: {name}".
        #[serde(default)]
        heading: Option<String>,
        /// The drop rank of its sections over budget (default 1; lower drops first).
        #[serde(default)]
        rank: Option<u8>,
    },
}

/// clawmd.json's `memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
pub enum RawMemory {
    /// The group's own CLAUDE.local.md (the default).
    #[serde(rename = "CLAUDE.local.md")]
    Local,
    /// No CLAUDE.local.md: none is created or imported.
    #[serde(rename = "none")]
    None,
}

/// A recipe entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecipeError {
    /// The JSON path of the field (`sources[2].dir`).
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl Recipe {
    /// The recipe clawmd.json describes (`None`: the built-in one), checked.
    pub fn from_raw(
        sources: Option<&[RawSource]>,
        memory: Option<RawMemory>,
    ) -> Result<Recipe, RecipeError> {
        let mut recipe = Recipe::default();
        if let Some(memory) = memory {
            recipe.memory = match memory {
                RawMemory::Local => MemoryFile::Local,
                RawMemory::None => MemoryFile::None,
            };
        }
        let Some(raw) = sources else {
            return Ok(recipe);
        };
        recipe.sources = raw
            .iter()
            .enumerate()
            .map(|(index, raw)| source(index, raw))
            .collect::<Result<_, _>>()?;
        let mut seen = BTreeSet::new();
        let mut mcp = 0;
        for (index, source) in recipe.sources.iter().enumerate() {
            if !seen.insert(source.name.clone()) {
                return Err(RecipeError {
                    field: format!("sources[{index}].name"),
                    message: format!("two sources are named {:?}", source.name),
                    fix: "give each source its own `name`".to_owned(),
                });
            }
            if source.kind == SourceKind::Mcp {
                mcp += 1;
                if mcp > 1 {
                    return Err(RecipeError {
                        field: format!("sources[{index}]"),
                        message: "the MCP instructions are listed twice".to_owned(),
                        fix: "keep one {\"kind\": \"mcp\"} entry".to_owned(),
                    });
                }
            }
        }
        Ok(recipe)
    }
}

fn source(index: usize, raw: &RawSource) -> Result<Source, RecipeError> {
    let field = |name: &str| format!("sources[{index}].{name}");
    let relative = |name: &str, text: &str| {
        relative_path(text).map_err(|message| RecipeError {
            field: field(name),
            message,
            fix: "write a relative path of plain folder and file names, e.g. \"fragments\""
                .to_owned(),
        })
    };
    let mount = |text: &Option<String>| -> Result<Option<PathBuf>, RecipeError> {
        match text {
            None => Ok(None),
            Some(text) if text.starts_with('/') && relative_path(&text[1..]).is_ok() => {
                Ok(Some(PathBuf::from(text)))
            }
            Some(text) => Err(RecipeError {
                field: field("mount"),
                message: format!("mount {text:?} is not an absolute container path"),
                fix: "write where the container sees it, e.g. \"/app/src/mcp-tools\"".to_owned(),
            }),
        }
    };
    let named = |name: &Option<String>, default: String| -> Result<String, RecipeError> {
        let name = name.clone().unwrap_or(default);
        if name.is_empty() || name.chars().any(|c| c.is_control() || c == '>') {
            return Err(RecipeError {
                field: field("name"),
                message: format!("name {name:?} cannot name a section"),
                fix: "use letters, digits and '-', e.g. \"module\"".to_owned(),
            });
        }
        Ok(name)
    };
    let heading = |text: &Option<String>| -> Result<Option<String>, RecipeError> {
        match text {
            Some(text) if text.trim().is_empty() || text.chars().any(char::is_control) => {
                Err(RecipeError {
                    field: field("heading"),
                    message: format!("heading {text:?} is not one line of text"),
                    fix: "write the heading's words on one line, e.g. \"NanoClaw Module: {name}\""
                        .to_owned(),
                })
            }
            other => Ok(other.clone()),
        }
    };
    Ok(match raw {
        RawSource::Shared {
            file,
            mount: m,
            name,
            memory_note,
            heading: h,
        } => {
            let file = relative("file", file.as_deref().unwrap_or(names::CLAUDE_MD))?;
            if let Some(placeholder) = memory_note
                && (placeholder.is_empty() || placeholder.contains('\n'))
            {
                return Err(RecipeError {
                    field: field("memoryNote"),
                    message: format!("{placeholder:?} is not a placeholder on one line"),
                    fix: "write the placeholder as the file has it, e.g. \"{{provider-memory-note}}\""
                        .to_owned(),
                });
            }
            Source {
                name: named(name, default_shared_name(&file))?,
                kind: SourceKind::Shared {
                    file,
                    mount: mount(m)?,
                    memory_note: memory_note.clone(),
                },
                heading: heading(h)?,
                rank: None,
            }
        }
        RawSource::GroupFile {
            file,
            name,
            heading: h,
        } => {
            let file = relative("file", file)?;
            Source {
                name: named(name, format!("group:{}", file.display()))?,
                kind: SourceKind::GroupFile { file },
                heading: heading(h)?,
                rank: None,
            }
        }
        RawSource::GroupFiles {
            pattern,
            first,
            name,
            heading: h,
        } => {
            let pattern = Pattern::parse(pattern).map_err(|message| RecipeError {
                field: field("pattern"),
                message,
                fix: "write a file-name pattern such as \"*.prepend.md\"".to_owned(),
            })?;
            if let Some(first) = first
                && (crate::safe_name::validate_name(first).is_err()
                    || pattern.matches(first).is_none())
            {
                return Err(RecipeError {
                    field: field("first"),
                    message: format!("{first:?} is not a file name the pattern {pattern} takes"),
                    fix: "name one file of the group folder that matches `pattern`, e.g. \"instructions.prepend.md\""
                        .to_owned(),
                });
            }
            Source {
                name: named(name, "group-files".to_owned())?,
                kind: SourceKind::GroupFiles {
                    pattern,
                    first: first.clone(),
                },
                heading: heading(h)?,
                rank: None,
            }
        }
        RawSource::Omitted { name, heading: h } => Source {
            name: named(name, "omitted".to_owned())?,
            kind: SourceKind::Omitted,
            heading: heading(h)?,
            rank: None,
        },
        RawSource::NativeSkills { name, heading: h } => Source {
            name: named(name, "native-skills".to_owned())?,
            kind: SourceKind::NativeSkills,
            heading: heading(h)?,
            rank: None,
        },
        RawSource::Skills {
            root,
            dir,
            file,
            form,
            select,
            mount: m,
            name,
            heading: h,
            rank,
        } => {
            let root = root.unwrap_or(SkillRoot::Container);
            let dir = relative("dir", dir.as_deref().unwrap_or(names::SKILLS))?;
            let file = file
                .clone()
                .unwrap_or_else(|| names::SKILL_INSTRUCTIONS.to_owned());
            if let Err(problem) = crate::safe_name::validate_name(&file) {
                return Err(RecipeError {
                    field: field("file"),
                    message: format!("file {file:?} is not a file name: {problem}"),
                    fix: "name a file inside each skill folder, e.g. \"instructions.md\""
                        .to_owned(),
                });
            }
            if root == SkillRoot::Group && m.is_some() {
                return Err(RecipeError {
                    field: field("mount"),
                    message: "a group's own skills are in the group folder, not mounted".to_owned(),
                    fix: "remove `mount`".to_owned(),
                });
            }
            let default_name = match root {
                SkillRoot::Container => "skill",
                SkillRoot::Group => "group-skill",
            };
            Source {
                name: named(name, default_name.to_owned())?,
                kind: SourceKind::Skills {
                    root,
                    dir,
                    file,
                    form: form.unwrap_or_default(),
                    select: select.unwrap_or_default(),
                    mount: mount(m)?,
                },
                heading: heading(h)?,
                rank: *rank,
            }
        }
        RawSource::Fragments {
            dir,
            pattern,
            mount: m,
            name,
            drop_listed_in,
            drop,
            heading: h,
            rank,
        } => Source {
            name: named(name, "fragment".to_owned())?,
            kind: SourceKind::Fragments {
                dir: relative("dir", dir)?,
                pattern: Pattern::parse(pattern.as_deref().unwrap_or("*.md")).map_err(
                    |message| RecipeError {
                        field: field("pattern"),
                        message,
                        fix: "write a file-name pattern such as \"*.instructions.md\"".to_owned(),
                    },
                )?,
                mount: mount(m)?,
                drop_listed_in: drop_listed_in.clone(),
                drop: drop.clone().unwrap_or_default(),
            },
            heading: heading(h)?,
            rank: *rank,
        },
        RawSource::Mcp {
            name,
            heading: h,
            rank,
        } => Source {
            name: named(name, "mcp".to_owned())?,
            kind: SourceKind::Mcp,
            heading: heading(h)?,
            rank: *rank,
        },
    })
}

/// `text` as a relative path of plain names (no `..`, no root, not empty).
fn relative_path(text: &str) -> Result<PathBuf, String> {
    let path = Path::new(text);
    if text.is_empty() || text.contains('\0') {
        return Err(format!("{text:?} is not a path"));
    }
    if path
        .components()
        .all(|component| matches!(component, Component::Normal(_)))
    {
        Ok(path.components().collect())
    } else {
        Err(format!(
            "{text:?} must stay inside its folder (a relative path without `..`)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Recipe, RecipeError> {
        let raw: Vec<RawSource> = serde_json::from_str(json).unwrap();
        Recipe::from_raw(Some(&raw), None)
    }

    #[test]
    fn the_builtin_recipe_is_base_skills_mcp_and_local_memory() {
        let recipe = Recipe::default();
        let names: Vec<&str> = recipe.sources.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["shared-base", "skill", "mcp"]);
        assert_eq!(recipe.memory, MemoryFile::Local);
        assert!(recipe.sources[1].is_builtin_skills());
        assert!(!recipe.reads_group());
        assert_eq!(Recipe::from_raw(None, None).unwrap(), recipe);
        // The same three written out.
        let written = parse(r#"[{"kind": "shared"}, {"kind": "skills"}, {"kind": "mcp"}]"#);
        assert_eq!(written.unwrap(), recipe);
    }

    #[test]
    fn every_kind_parses_with_its_defaults() {
        let recipe = parse(
            r#"[
              {"kind": "group-file", "file": "persona.md"},
              {"kind": "shared"},
              {"kind": "fragments", "dir": "agent-runner/src/mcp-tools", "pattern": "*.instructions.md",
               "mount": "/app/src/mcp-tools", "name": "module", "dropListedIn": "disabled_modules",
               "drop": [{"when": {"cli_scope": "disabled"}, "names": ["cli"]}]},
              {"kind": "skills", "root": "group", "form": "index"},
              {"kind": "mcp"}
            ]"#,
        )
        .unwrap();
        let names: Vec<&str> = recipe.sources.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "group:persona.md",
                "shared-base",
                "module",
                "group-skill",
                "mcp"
            ]
        );
        assert!(recipe.reads_group());
        let SourceKind::Fragments { pattern, drop, .. } = &recipe.sources[2].kind else {
            panic!()
        };
        assert_eq!(pattern.matches("core.instructions.md"), Some("core"));
        assert_eq!(pattern.matches("core.ts"), None);
        assert_eq!(pattern.matches(".instructions.md"), None);
        assert_eq!(drop[0].names, ["cli"]);
        let mounts = recipe.mounts(Path::new("/app"), Path::new("/h/container"));
        assert_eq!(
            mounts,
            [(
                PathBuf::from("/app/src/mcp-tools"),
                PathBuf::from("/h/container/agent-runner/src/mcp-tools")
            )]
        );
    }

    #[test]
    fn nanoclaws_kinds_and_keys_parse() {
        let recipe = parse(
            r#"[
              {"kind": "group-files", "pattern": "*.prepend.md", "first": "instructions.prepend.md",
               "name": "persona", "heading": "Persona"},
              {"kind": "shared", "memoryNote": "{{provider-memory-note}}", "heading": "Contract"},
              {"kind": "native-skills"},
              {"kind": "skills", "heading": "Skill: {name}", "rank": 0},
              {"kind": "mcp", "heading": "MCP Server: {name}", "rank": 0},
              {"kind": "omitted", "heading": "Omitted for size"}
            ]"#,
        )
        .unwrap();
        let names: Vec<&str> = recipe.sources.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "persona",
                "shared-base",
                "native-skills",
                "skill",
                "mcp",
                "omitted"
            ]
        );
        assert!(recipe.reads_group());
        let SourceKind::GroupFiles { pattern, first } = &recipe.sources[0].kind else {
            panic!()
        };
        assert_eq!(pattern.matches("tone.prepend.md"), Some("tone"));
        assert_eq!(first.as_deref(), Some("instructions.prepend.md"));
        let SourceKind::Shared { memory_note, .. } = &recipe.sources[1].kind else {
            panic!()
        };
        assert_eq!(memory_note.as_deref(), Some("{{provider-memory-note}}"));
        assert_eq!(recipe.sources[3].rank, Some(0));
        assert_eq!(
            recipe.sources[4].heading.as_deref(),
            Some("MCP Server: {name}")
        );
        // The built-in skills keep their file names with a heading and a rank.
        assert!(recipe.sources[3].is_builtin_skills());
        let err =
            parse(r#"[{"kind": "group-files", "pattern": "*.md", "first": "x.txt"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[0].first");
        let err = parse(r#"[{"kind": "group-files", "pattern": "a/*.md"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[0].pattern");
        let err = parse(r#"[{"kind": "mcp", "heading": "two\nlines"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[0].heading");
        let err = parse(r#"[{"kind": "shared", "memoryNote": ""}]"#).unwrap_err();
        assert_eq!(err.field, "sources[0].memoryNote");
    }

    #[test]
    fn bad_entries_name_the_field() {
        let err = parse(r#"[{"kind": "fragments", "dir": "../x"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[0].dir");
        let err = parse(r#"[{"kind": "fragments", "dir": "f", "pattern": "*.*"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[0].pattern");
        let err = parse(r#"[{"kind": "shared", "mount": "app/x"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[0].mount");
        let err = parse(r#"[{"kind": "mcp"}, {"kind": "mcp", "name": "m2"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[1]");
        let err = parse(r#"[{"kind": "skills"}, {"kind": "skills"}]"#).unwrap_err();
        assert_eq!(err.field, "sources[1].name");
        let err = parse(r#"[{"kind": "group-file", "file": "/etc/passwd"}]"#).unwrap_err();
        assert!(err.message.contains("inside its folder"), "{}", err.message);
        assert!(
            serde_json::from_str::<Vec<RawSource>>(r#"[{"kind": "skills", "dirr": "x"}]"#).is_err()
        );
    }
}
