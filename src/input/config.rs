//! `container.json`: the part of a group's config that clawmd reads.
//!
//! The file belongs to the container runner. clawmd reads two keys, `skills` and
//! `mcpServers.<name>.instructions`, ignores the rest (and never writes the file), and refuses a
//! malformed file with an error that names the line, column and field, so that a typo never
//! silently empties a group's composition.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::plan::target::Provider;
use crate::safe_name::{NameProblem, validate_name};

/// The largest `container.json` clawmd reads. A config is a few kilobytes; anything near this
/// is a mistake, and reading it whole at every spawn would be slow.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// A group's config handed to the run instead of read from the group folder (`compose GROUP
/// --config`, a `clawmd serve` request's `config`): bytes of at most [`MAX_CONFIG_BYTES`],
/// the limit a `container.json` is read under. [`HandedConfig::new`] is the one place that
/// limit is checked for a handed config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedConfig(Vec<u8>);

impl HandedConfig {
    /// Accepts `bytes` as a handed config, refusing them over [`MAX_CONFIG_BYTES`].
    pub fn new(bytes: Vec<u8>) -> Result<Self, HandedConfigTooLarge> {
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(HandedConfigTooLarge {
                limit: MAX_CONFIG_BYTES,
            });
        }
        Ok(HandedConfig(bytes))
    }

    /// The config's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The config's bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// A handed config ([`HandedConfig`]) over [`MAX_CONFIG_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}; fix: {}", self.problem(), self.fix())]
pub struct HandedConfigTooLarge {
    /// The limit in bytes.
    pub limit: u64,
}

impl HandedConfigTooLarge {
    /// What the message says before its fix.
    pub fn problem(&self) -> String {
        format!(
            "the handed config is over {} bytes, the most clawmd reads of a group's config",
            self.limit
        )
    }

    /// How to fix it: the text its message ends with, after "; fix: ".
    pub fn fix(&self) -> &'static str {
        "hand the group's container.json alone (a group's config is a few kilobytes)"
    }
}

/// The config a group without one of its own gets, bound read-only at the workspace's
/// `container.json` from clawmd's state folder (`<state>/binds/<group>/container.json`): a
/// group that relies on the defaults still has its config where the agent cannot write, so
/// the agent cannot create one that a later compose would take for the operator's.
pub const DEFAULT_CONFIG: &[u8] = b"{}\n";

/// Whether a group's `container.json`, as read (`None`: missing), is a config of its own: a
/// file with something in it. An empty one is the mount point a runtime leaves in the group
/// folder when it binds [`DEFAULT_CONFIG`] over a missing file, and means the defaults.
pub fn is_own_config(bytes: Option<&[u8]>) -> bool {
    bytes.is_some_and(|bytes| !bytes.trim_ascii().is_empty())
}

/// Which skills a group enables.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SkillSelection {
    /// Every skill under `container/skills/` (the default when `skills` is missing).
    #[default]
    All,
    /// Exactly these skills.
    Only(BTreeSet<String>),
}

impl SkillSelection {
    /// Whether `skill` is enabled.
    pub fn enables(&self, skill: &str) -> bool {
        match self {
            SkillSelection::All => true,
            SkillSelection::Only(set) => set.contains(skill),
        }
    }
}

/// The parsed, validated config of one group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupConfig {
    /// The `skills` selection.
    pub skills: SkillSelection,
    /// Inline MCP instructions by server name (sorted); servers without instructions are absent.
    pub mcp_instructions: BTreeMap<String, String>,
    /// The runner's `provider` key (the agent backend), when present. clawmd only reads it.
    pub provider: Option<Provider>,
    /// Keys that look like misspellings of clawmd's keys (`skils`, `mcpServers.db.instruction`),
    /// in the file's order. Every other key belongs to the runner and is not reported.
    pub unknown_keys: Vec<UnknownKey>,
    /// Values clawmd read and ignored, with why (a provider it does not compose for).
    pub ignored: Vec<Ignored>,
    /// Every other top-level key with its value: the runner's, read only by the recipe's
    /// per-group switches (`cli_scope`, `disabled_modules`, …).
    pub switches: BTreeMap<String, serde_json::Value>,
}

/// A value in the group config that clawmd read and does not use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Ignored {
    /// The JSON path of the value (`provider`).
    pub field: String,
    /// What is ignored and what clawmd does instead.
    pub message: String,
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "container.json `{}`: {}", self.field, self.message)
    }
}

impl GroupConfig {
    /// The value of the runner's top-level key `key`, as text (a string as it is, any other
    /// value as JSON); `None` when missing or null.
    pub fn switch_text(&self, key: &str) -> Option<String> {
        match self.switches.get(key)? {
            serde_json::Value::Null => None,
            serde_json::Value::String(text) => Some(text.clone()),
            other => Some(other.to_string()),
        }
    }
}

/// A key in `container.json` that is almost one clawmd reads, and so is probably a typo that
/// silently changes what the agent gets (`"skils"` enables every skill).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnknownKey {
    /// The JSON path of the key (`skils`, `mcpServers.db.instruction`).
    pub key: String,
    /// The key clawmd reads that was probably meant.
    pub suggestion: String,
}

impl UnknownKey {
    /// The full path of the key probably meant (`mcpServers.db.instructions`).
    pub fn meant(&self) -> String {
        match self.key.rsplit_once('.') {
            Some((parent, _)) => format!("{parent}.{}", self.suggestion),
            None => self.suggestion.clone(),
        }
    }
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meant = self.meant();
        write!(
            f,
            "container.json key `{}` is not one clawmd reads, so it has no effect; did you mean `{meant}`? (fix: rename the key)",
            self.key
        )
    }
}

/// The top-level keys clawmd reads; every other key belongs to the runner.
pub const KEYS: [&str; 3] = ["skills", "mcpServers", "provider"];
/// The key clawmd reads in an MCP server object; the others (`command`, `args`, `env`, …)
/// belong to the runner.
pub const SERVER_KEYS: [&str; 1] = ["instructions"];

/// The key of clawmd's own that `key` almost certainly misspells
/// ([`crate::suggest::near_miss`] among [`KEYS`]), remembered: a runner hands the same keys at
/// every spawn. At most [`MAX_KEYS_REMEMBERED`] keys are kept (then the memo starts afresh).
fn key_near_miss(key: &str) -> Option<&'static str> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static REMEMBERED: Mutex<Option<HashMap<String, Option<&'static str>>>> = Mutex::new(None);
    if KEYS.contains(&key) {
        return None; // clawmd's own keys are no other key's near miss (a unit test checks)
    }
    let mut remembered = REMEMBERED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let remembered = remembered.get_or_insert_with(HashMap::new);
    if let Some(meant) = remembered.get(key) {
        return *meant;
    }
    let meant = crate::suggest::near_miss(key, &KEYS);
    if remembered.len() >= MAX_KEYS_REMEMBERED {
        remembered.clear();
    }
    remembered.insert(key.to_owned(), meant);
    meant
}

/// The most top-level keys [`key_near_miss`] remembers.
const MAX_KEYS_REMEMBERED: usize = 1024;

/// Keys of `container.json` that are near misses of clawmd's own (see [`UnknownKey`]).
fn unknown_keys(top: &serde_json::Map<String, serde_json::Value>) -> Vec<UnknownKey> {
    let mut found = Vec::new();
    for (key, value) in top {
        if let Some(meant) = key_near_miss(key) {
            found.push(UnknownKey {
                key: key.clone(),
                suggestion: meant.to_owned(),
            });
        }
        // A misspelt `mcpServers` is reported once, as the key; its servers are not read.
        if key != "mcpServers" {
            continue;
        }
        let serde_json::Value::Object(servers) = value else {
            continue;
        };
        for (server, fields) in servers {
            let serde_json::Value::Object(fields) = fields else {
                continue;
            };
            if fields.contains_key("instructions") {
                continue;
            }
            for field in fields.keys() {
                if let Some(meant) = crate::suggest::near_miss(field, &SERVER_KEYS) {
                    found.push(UnknownKey {
                        key: format!("mcpServers.{server}.{field}"),
                        suggestion: meant.to_owned(),
                    });
                }
            }
        }
    }
    found
}

/// The UTF-8 encoding of U+FEFF, the byte-order mark some Windows editors put first.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A `container.json` that cannot be used, with where and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// The JSON path of the offending field (`mcpServers.db.instructions`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl ConfigError {
    /// What the message says before its fix: the file, where in it, and what is wrong.
    pub fn problem(&self) -> String {
        use std::fmt::Write as _;
        let mut text = self.path.display().to_string();
        if let Some((line, column)) = self.position {
            let _ = write!(text, ":{line}:{column}");
        }
        if let Some(field) = &self.field {
            let _ = write!(text, ": field `{field}`");
        }
        let _ = write!(text, ": {}", self.message);
        text
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; fix: {}", self.problem(), self.fix)
    }
}

impl std::error::Error for ConfigError {}

/// Parses and validates a `container.json`. `path` is only used in messages.
///
/// A config parsed lately in this process is not parsed again ([`recent`]): a spawn reads its
/// group's config for the plan and again for the mount table, and a service is handed the same
/// config at every spawn of a group.
pub fn parse_config(path: &Path, bytes: &[u8]) -> Result<GroupConfig, ConfigError> {
    if let Some(config) = recent::get(path, bytes) {
        return Ok(config);
    }
    let config = parse_config_anew(path, bytes)?;
    recent::put(path, bytes, &config);
    Ok(config)
}

/// The config [`parse_config`] last parsed for each path in this process, with its bytes
/// (compared whole): a parse is a pure function of both, so a config found here is exactly
/// what parsing it again gives. Bounded ([`crate::path_memo::PathMemo`]); a config over
/// [`recent::MAX_BYTES`] is parsed every time.
mod recent {
    use std::path::Path;

    use super::GroupConfig;
    use crate::path_memo::PathMemo;

    /// A config larger than this is not kept.
    pub(super) const MAX_BYTES: usize = 64 * 1024;

    /// Each path's config, with the bytes it was parsed from.
    static RECENT: PathMemo<(Vec<u8>, GroupConfig)> = PathMemo::new();

    pub(super) fn get(path: &Path, bytes: &[u8]) -> Option<GroupConfig> {
        RECENT.get(path, |(kept, config)| {
            (kept == bytes).then(|| config.clone())
        })
    }

    pub(super) fn put(path: &Path, bytes: &[u8], config: &GroupConfig) {
        if bytes.len() <= MAX_BYTES {
            RECENT.put(path, (bytes.to_vec(), config.clone()));
        }
    }
}

/// [`parse_config`] without [`recent`].
fn parse_config_anew(path: &Path, bytes: &[u8]) -> Result<GroupConfig, ConfigError> {
    let raw = parse_raw(path, bytes)?;
    let skills = match raw.skills {
        None | Some(RawSkills::All) => SkillSelection::All,
        Some(RawSkills::List(list)) => {
            for (index, name) in list.iter().enumerate() {
                check_name(path, &format!("skills[{index}]"), name, "skill")?;
            }
            SkillSelection::Only(list.into_iter().collect())
        }
    };
    // Any server name composes (the runner and the agent's own tools accept any): the name
    // becomes part of a file name only escaped (`safe_name::file_stem`).
    let mut mcp_instructions = BTreeMap::new();
    for (name, server) in raw.mcp_servers.unwrap_or_default() {
        if let Some(text) = server.instructions.filter(|t| !t.trim().is_empty()) {
            mcp_instructions.insert(name, text);
        }
    }
    let mut ignored = Vec::new();
    // nanoclaw lowercases the provider, and has providers of its own (`mock`): a provider
    // clawmd does not compose for is ignored with a warning, never a failed spawn.
    let provider = raw.provider.and_then(|name| {
        let parsed = Provider::parse(&name.to_ascii_lowercase());
        if parsed.is_none() {
            ignored.push(Ignored {
                field: "provider".to_owned(),
                message: format!(
                    "{name:?} is not an agent backend clawmd composes for ({}); the group is composed for the deployment's default provider",
                    Provider::ALL.map(Provider::as_str).join(", ")
                ),
            });
        }
        parsed
    });
    // The whole object, read once more as JSON values, for what clawmd does not read itself.
    let top = match serde_json::from_slice(bytes) {
        Ok(serde_json::Value::Object(top)) => top,
        _ => serde_json::Map::new(),
    };
    Ok(GroupConfig {
        skills,
        mcp_instructions,
        provider,
        unknown_keys: unknown_keys(&top),
        ignored,
        switches: switches(top),
    })
}

/// The runner's top-level keys (every key but clawmd's own) with their values.
fn switches(
    top: serde_json::Map<String, serde_json::Value>,
) -> BTreeMap<String, serde_json::Value> {
    top.into_iter()
        .filter(|(key, _)| !KEYS.contains(&key.as_str()))
        .collect()
}

fn parse_raw(path: &Path, bytes: &[u8]) -> Result<RawConfig, ConfigError> {
    // Refused, not skipped: nanoclaw's runner reads the file with `JSON.parse` on
    // `readFileSync(…, 'utf8')` (Node and Bun keep the mark, and `JSON.parse` rejects it), so
    // it would run the container on defaults; composing from this config would not match.
    if bytes.starts_with(UTF8_BOM) {
        return Err(ConfigError {
            path: path.to_owned(),
            position: Some((1, 1)),
            field: None,
            message: "the file starts with a UTF-8 byte-order mark (EF BB BF), which JSON does not allow: nanoclaw's runner (JSON.parse) cannot read it either and would start the agent with the default config".to_owned(),
            fix: "save the file as UTF-8 without a byte-order mark (\"UTF-8\", not \"UTF-8 with BOM\")".to_owned(),
        });
    }
    // Without tracking the path, which only an error's message needs.
    let raw = match serde_json::from_slice::<RawConfig>(bytes) {
        Ok(raw) => raw,
        Err(_) => {
            let mut deserializer = serde_json::Deserializer::from_slice(bytes);
            let raw: RawConfig =
                serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
                    let field = known_field(&err.path().to_string());
                    json_error(path, field, err.into_inner())
                })?;
            deserializer
                .end()
                .map_err(|err| json_error(path, None, err))?;
            raw
        }
    };
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(ConfigError {
            path: path.to_owned(),
            position: Some((1, 1)),
            field: None,
            message: "expected a JSON object (the group's container.json)".to_owned(),
            fix: "make the file a JSON object, for example {\"skills\": \"all\"}".to_owned(),
        });
    }
    Ok(raw)
}

/// The field an error is at, as far as it is known: serde_path_to_error writes a segment it
/// could not name (the parser stopped between two keys, at a trailing comma say) as `?`, which
/// names nothing, so the field is the object holding it (`mcpServers.pager`, not
/// `mcpServers.pager.?`); `None` at the top level.
pub(crate) fn known_field(path: &str) -> Option<String> {
    let mut field = path;
    while let Some(parent) = field.strip_suffix(".?") {
        field = parent;
    }
    (!matches!(field, "" | "." | "?")).then(|| field.to_owned())
}

fn json_error(path: &Path, field: Option<String>, err: serde_json::Error) -> ConfigError {
    let fix = if err.is_syntax() || err.is_eof() {
        "correct the JSON syntax at that position (the group's composition is left as it was)"
    } else if err.to_string().starts_with("duplicate field") {
        "keep one of the two (JSON.parse, which the runner uses, would silently keep the last)"
    } else {
        "give the field the type shown (see docs/container-json.md)"
    };
    ConfigError {
        path: path.to_owned(),
        position: (err.line() > 0).then(|| (err.line(), err.column())),
        field,
        message: strip_position(&err.to_string()),
        fix: fix.to_owned(),
    }
}

/// serde_json appends " at line L column C"; the position is reported separately.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(index) => message[..index].to_owned(),
        None => message.to_owned(),
    }
}

fn check_name(path: &Path, field: &str, name: &str, what: &str) -> Result<(), ConfigError> {
    validate_name(name).map_err(|problem| ConfigError {
        path: path.to_owned(),
        position: None,
        field: Some(field.to_owned()),
        message: format!("{what} name {name:?} cannot be used as a file name: {problem}"),
        fix: match problem {
            NameProblem::Empty => format!("remove the empty {what} name"),
            _ => format!("rename the {what} to use only ASCII letters, digits, '.', '_' and '-'"),
        },
    })
}

/// The part of `container.json` clawmd reads; every other key is the runner's.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(expecting = "a JSON object (the group's container.json)")]
#[schemars(
    title = "container.json (the part clawmd reads)",
    description = "A group's config; it belongs to the container runner, which may add any other key (docs/container-json.md)."
)]
struct RawConfig {
    /// Which skills under container/skills/ are enabled: "all" (the default) or a list.
    #[serde(default)]
    skills: Option<RawSkills>,
    /// MCP servers; clawmd reads only each one's `instructions`.
    #[serde(default, rename = "mcpServers")]
    mcp_servers: Option<BTreeMap<String, RawServer>>,
    /// The agent backend: claude, codex, opencode or gemini, in any case (default: the
    /// deployment's provider, else claude). Any other value is ignored with a warning.
    #[serde(default)]
    provider: Option<String>,
}

/// An MCP server; every key but `instructions` is the runner's.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(expecting = "an MCP server object")]
struct RawServer {
    /// Inline guidance composed into the group's memory, inside a fenced code block.
    #[serde(default)]
    instructions: Option<String>,
}

/// The JSON Schema of `container.json` (the part clawmd reads), derived from the parser's
/// own types.
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(RawConfig)
}

impl schemars::JsonSchema for RawSkills {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Skills".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "\"all\", or the names of the enabled skills (folders under container/skills/)",
            "anyOf": [
                { "const": "all" },
                { "type": "array", "items": { "type": "string" } }
            ]
        })
    }
}

enum RawSkills {
    All,
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for RawSkills {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkillsVisitor)
    }
}

struct SkillsVisitor;

impl<'de> Visitor<'de> for SkillsVisitor {
    type Value = RawSkills;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("\"all\" or a list of skill names")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<RawSkills, E> {
        if value == "all" {
            Ok(RawSkills::All)
        } else {
            Err(E::invalid_value(de::Unexpected::Str(value), &self))
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawSkills, A::Error> {
        let mut names = Vec::new();
        while let Some(name) = seq.next_element::<String>()? {
            names.push(name);
        }
        Ok(RawSkills::List(names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config parsed again is what parsing it anew gives, for its path and bytes only: other
    /// bytes at the same path, or the same bytes at another path, are parsed; an error is
    /// never kept.
    #[test]
    fn a_config_parsed_lately_is_what_parsing_it_anew_gives() {
        let path = Path::new("/recent-test/g/container.json");
        let first = br#"{"skills": ["web"], "mcpServers": {"db": {"instructions": "ONE"}}}"#;
        let second = br#"{"skills": ["web"], "mcpServers": {"db": {"instructions": "TWO"}}}"#;
        for bytes in [&first[..], &second[..], &first[..]] {
            assert_eq!(
                parse_config(path, bytes).unwrap(),
                parse_config_anew(path, bytes).unwrap()
            );
        }
        let other = Path::new("/recent-test/h/container.json");
        assert_eq!(
            parse_config(other, second).unwrap(),
            parse_config_anew(other, second).unwrap()
        );
        let bad = br#"{"skills": 3}"#;
        assert!(parse_config(path, bad).is_err());
        assert!(parse_config(path, bad).is_err());
        assert_eq!(
            parse_config(path, first).unwrap().mcp_instructions["db"],
            "ONE"
        );
    }

    /// A handed config is taken up to [`MAX_CONFIG_BYTES`] and refused one byte over, with a
    /// message that names the limit and the fix, the fix given apart too.
    #[test]
    fn a_handed_config_is_taken_up_to_the_limit() {
        let at = vec![b' '; MAX_CONFIG_BYTES as usize];
        assert_eq!(HandedConfig::new(at.clone()).unwrap().bytes(), &at[..]);
        let mut over = at;
        over.push(b' ');
        let err = HandedConfig::new(over).unwrap_err();
        assert_eq!(err.limit, MAX_CONFIG_BYTES);
        assert_eq!(
            err.to_string(),
            format!(
                "the handed config is over {MAX_CONFIG_BYTES} bytes, the most clawmd reads of a \
                 group's config; fix: {}",
                err.fix()
            )
        );
        assert!(err.fix().contains("container.json"), "{err}");
    }

    #[test]
    fn an_error_between_two_keys_names_the_object_it_is_in() {
        let err = parse_config(
            Path::new("container.json"),
            br#"{"mcpServers": {"pager": {"instructions": "x",}}}"#,
        )
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("mcpServers.pager"), "{err}");
        assert!(!err.to_string().contains(".?"), "{err}");
        let err = parse_config(Path::new("container.json"), br#"{"skills": "all",}"#).unwrap_err();
        assert_eq!(err.field, None, "{err}");
        assert_eq!(known_field("a.?.?"), Some("a".to_owned()));
        assert_eq!(known_field("?"), None);
        assert_eq!(known_field("skills[0]"), Some("skills[0]".to_owned()));
    }

    #[test]
    fn a_duplicate_key_says_to_keep_one() {
        let err = parse_config(
            Path::new("container.json"),
            br#"{"mcpServers": {"pager": {"instructions": "x", "instructions": "y"}}}"#,
        )
        .unwrap_err();
        assert!(err.fix.contains("keep one of the two"), "{err}");
    }
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<GroupConfig, ConfigError> {
        parse_config(Path::new("groups/g/container.json"), text.as_bytes())
    }

    #[test]
    fn a_byte_order_mark_is_refused_as_such() {
        let err = parse("\u{feff}{\"skills\": [\"web\"]}").unwrap_err();
        assert_eq!(err.position, Some((1, 1)));
        assert!(err.message.contains("byte-order mark"), "{err}");
        assert!(err.fix.contains("without a byte-order mark"), "{err}");
        // Only at the start: inside a string it is text.
        assert!(parse("{\"skills\": [], \"note\": \"\u{feff}\"}").is_ok());
    }

    #[test]
    fn missing_keys_mean_defaults() {
        assert_eq!(parse("{}").unwrap(), GroupConfig::default());
        let config = parse(r#"{"skills": null, "mcpServers": null}"#).unwrap();
        assert_eq!(config, GroupConfig::default());
    }

    #[test]
    fn reads_skills_and_instructions_and_ignores_other_keys() {
        let config = parse(
            r#"{
              "skills": ["web", "welcome", "web"],
              "imageTag": "v2", "additionalMounts": [{"hostPath": "/x"}],
              "mcpServers": {
                "db": {"command": "db-mcp", "args": ["--ro"], "instructions": "Read only."},
                "quiet": {"command": "q"},
                "blank": {"instructions": "   "}
              }
            }"#,
        )
        .unwrap();
        let expected: BTreeSet<String> = ["web", "welcome"].map(String::from).into();
        assert_eq!(config.skills, SkillSelection::Only(expected));
        assert_eq!(
            config.mcp_instructions.into_iter().collect::<Vec<_>>(),
            vec![("db".to_owned(), "Read only.".to_owned())]
        );
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = parse("{\n  \"skills\": \"all\",\n}").unwrap_err();
        assert_eq!(err.position, Some((3, 1)));
        let shown = err.to_string();
        assert!(
            shown.starts_with("groups/g/container.json:3:1: "),
            "{shown}"
        );
        assert!(shown.contains("fix:"), "{shown}");
    }

    #[test]
    fn type_errors_name_the_field() {
        let err = parse(r#"{"mcpServers": {"db": {"instructions": 3}}}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("mcpServers.db.instructions"));
        assert!(err.message.contains("expected a string"), "{}", err.message);
        assert_eq!(err.position, Some((1, 40)));

        let err = parse(r#"{"skills": "some"}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("skills"));
        assert!(err.message.contains("\"all\" or a list"), "{}", err.message);

        let err = parse(r#"{"skills": [1]}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("skills[0]"));

        let err = parse(r#"[]"#).unwrap_err();
        assert!(err.message.contains("JSON object"), "{}", err.message);
    }

    #[test]
    fn unsafe_skill_names_are_refused_and_any_server_name_is_read() {
        // A server name becomes a file name only escaped (safe_name::file_stem), so none is
        // refused: nanoclaw's runner and the agent's own tools accept any.
        let config = parse(
            r#"{"mcpServers": {"../../etc/x": {"instructions": "hi"}, "my server": {"instructions": "a"},
                "db:ro": {"instructions": "b"}, "me@host": {"command": "x"}}}"#,
        )
        .unwrap();
        let names: Vec<&str> = config.mcp_instructions.keys().map(String::as_str).collect();
        assert_eq!(names, ["../../etc/x", "db:ro", "my server"]);

        let err = parse(r#"{"skills": [""]}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("skills[0]"));
        assert!(err.message.contains("empty"), "{}", err.message);
    }

    #[test]
    fn provider_is_read_in_any_case_and_an_unknown_one_is_ignored_with_a_note() {
        assert_eq!(parse("{}").unwrap().provider, None);
        let config = parse(r#"{"provider": "codex"}"#).unwrap();
        assert_eq!(config.provider, Some(Provider::Codex));
        assert!(config.ignored.is_empty());
        // nanoclaw lowercases it.
        let config = parse(r#"{"provider": "Claude"}"#).unwrap();
        assert_eq!(config.provider, Some(Provider::Claude));
        assert!(config.ignored.is_empty());
        // nanoclaw's own `mock` provider, or anything else: not clawmd's, never a failure.
        for name in ["mock", "cobol"] {
            let config = parse(&format!(r#"{{"provider": "{name}"}}"#)).unwrap();
            assert_eq!(config.provider, None, "{name}");
            assert_eq!(config.ignored.len(), 1);
            assert_eq!(config.ignored[0].field, "provider");
            let shown = config.ignored[0].to_string();
            assert!(
                shown.contains(name) && shown.contains("claude, codex, opencode, gemini"),
                "{shown}"
            );
        }
        let err = parse(r#"{"provider": 3}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("provider"));
    }

    #[test]
    fn the_runners_keys_are_kept_for_the_recipes_switches() {
        let config = parse(
            r#"{"skills": "all", "cli_scope": "disabled", "disabled_modules": ["agents"], "n": 3, "z": null}"#,
        )
        .unwrap();
        assert_eq!(config.switch_text("cli_scope").as_deref(), Some("disabled"));
        assert_eq!(config.switch_text("n").as_deref(), Some("3"));
        assert_eq!(config.switch_text("z"), None);
        assert_eq!(
            config.switch_text("skills"),
            None,
            "clawmd's own keys are not switches"
        );
        assert_eq!(
            config.switches["disabled_modules"],
            serde_json::json!(["agents"])
        );
    }

    #[test]
    fn clawmd_keys_are_no_near_miss_of_one_another() {
        for key in KEYS {
            assert_eq!(crate::suggest::near_miss(key, &KEYS), None, "{key}");
        }
    }

    #[test]
    fn near_misses_of_clawmd_keys_are_reported_and_runner_keys_are_not() {
        let config = parse(
            r#"{"skils": ["web"], "packages": ["jq"], "imageTag": "v2",
                "mcpServers": {"db": {"command": "x", "env": {}, "instruction": "RO"},
                               "ok": {"instructions": "fine", "instrctions": "shadow"}}}"#,
        )
        .unwrap();
        let keys: Vec<(String, String)> = config
            .unknown_keys
            .iter()
            .map(|k| (k.key.clone(), k.meant()))
            .collect();
        assert_eq!(
            keys,
            [
                ("skils".to_owned(), "skills".to_owned()),
                (
                    "mcpServers.db.instruction".to_owned(),
                    "mcpServers.db.instructions".to_owned()
                ),
            ]
        );
        assert!(
            config.unknown_keys[0]
                .to_string()
                .contains("did you mean `skills`?")
        );
        // The typo changes what the agent gets: every skill, no instructions.
        assert_eq!(config.skills, SkillSelection::All);
        assert_eq!(config.mcp_instructions.len(), 1);
    }

    #[test]
    fn trailing_garbage_is_an_error() {
        let err = parse("{} {}").unwrap_err();
        assert_eq!(err.position, Some((1, 4)));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_config(Path::new("c.json"), &bytes);
        }

        #[test]
        fn accepted_configs_only_hold_safe_skill_names_and_every_server_name(
            names in proptest::collection::vec("\\PC{0,12}", 0..4)
        ) {
            let servers: serde_json::Map<String, serde_json::Value> = names
                .iter()
                .map(|n| (n.clone(), serde_json::json!({"instructions": "x"})))
                .collect();
            let text = serde_json::json!({"skills": names, "mcpServers": servers}).to_string();
            if let Ok(config) = parse(&text)
                && let SkillSelection::Only(skills) = &config.skills
            {
                for name in skills {
                    prop_assert!(validate_name(name).is_ok());
                }
            }
            let text = serde_json::json!({"mcpServers": servers}).to_string();
            let config = parse(&text).unwrap();
            prop_assert_eq!(config.mcp_instructions.len(), servers.len());
        }
    }
}
