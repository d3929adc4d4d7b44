//! A runner's spawns answered by one long-lived service: one JSON request
//! ([`ServeRequest`], `clawmd schema serve-request`), one answer ([`ServeAnswer`], `clawmd
//! schema serve-answer`): what `clawmd serve` answers for each line it reads
//! ([`Service::answer_line`]), and what any other host of the service would answer.
//!
//! Each request is `clawmd compose GROUP --json` and, when the group composed, `clawmd mounts
//! GROUP --json`: the same library calls, the same locks and atomic writes, the settings
//! resolved again at every request (kept while `clawmd.json` and the pin files are as they
//! were: [`SettingsKept`]). The deployment root and the
//! overrides of the command line (the folders, the default delivery, …) are fixed when the
//! service is made; a request's own `delivery`, `provider`, `approve_external` and
//! `lock_timeout_secs` win over them. Between requests the service keeps the shared sources
//! as the last request read them ([`KeptAcrossRuns`]), used again while their record vouches for
//! them. A request that is not one is answered `bad-request`; a bug met while answering (a
//! panic) is answered `internal-error`, and what was kept is dropped then.
//!
//! A service answers one request at a time (`&mut self`): a caller answering from several
//! threads holds it under a lock, which serializes the answers as `clawmd serve` does.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::compose::{ComposeOptions, KeptAcrossRuns, compose_keeping};
use crate::config::{ConfigError, HandedConfig};
use crate::deployment::{Selection, hand_config};
use crate::input::sources::vouch::Vouchers;
use crate::report::{Code, ServeAnswer, ServeRequest, WarningReport};
use crate::settings::{Overrides, Resolved, SETTINGS_FILE, read_settings};

/// A deployment's spawn service: its root, the base overrides and the sources kept between
/// requests.
#[derive(Debug)]
pub struct Service {
    root: PathBuf,
    overrides: Overrides,
    kept: KeptAcrossRuns,
    settings: SettingsKept,
}

impl Service {
    /// The service of the deployment at `root`, with `overrides` (what the command line says
    /// over `clawmd.json`) under every request. The root and the overrides' folders are made
    /// absolute now: a later change of the working directory (a Node host's
    /// `process.chdir`) cannot move the deployment under a running service.
    pub fn new(root: &Path, mut overrides: Overrides) -> std::io::Result<Service> {
        for dir in [&mut overrides.groups_dir, &mut overrides.container_dir]
            .into_iter()
            .flatten()
        {
            *dir = std::path::absolute(&*dir)?;
        }
        Ok(Service {
            root: std::path::absolute(root)?,
            overrides,
            kept: KeptAcrossRuns::answering(),
            settings: SettingsKept::default(),
        })
    }

    /// The deployment root, absolute.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The answer to one request (`line`: its JSON text, without the line break or with it),
    /// once everything the request made clawmd do is done. Never panics: a bug met while
    /// answering is answered `internal-error`.
    pub fn answer_line(&mut self, line: &[u8]) -> ServeAnswer {
        self.answer_line_then(line, |answer| answer)
    }

    /// The answer to one request handed to `deliver` as soon as it is known: the group's
    /// documents are in place and its verdict worked out, and the bookkeeping that changes
    /// neither (the handed config kept, the group's verdict record, its temp journal settled)
    /// is done after `deliver` returns, before this returns what `deliver` did
    /// (`compose::Later`). The group's lock is held until then. Never panics, as
    /// [`Service::answer_line`].
    pub fn answer_line_then<R>(
        &mut self,
        line: &[u8],
        deliver: impl FnOnce(ServeAnswer) -> R,
    ) -> R {
        let answer = self.answer_now(line);
        let delivered = deliver(answer);
        self.finish_later();
        delivered
    }

    /// Does the bookkeeping [`Service::answer_now`] left (`compose::Later`), releasing the
    /// groups' locks. Never panics: after a bug, what was left is dropped with its locks (the
    /// next run under each group's lock removes what its journal names), and what the service
    /// kept with it.
    pub fn finish_later(&mut self) {
        let finished = std::panic::catch_unwind(AssertUnwindSafe(|| self.kept.finish_later()));
        if finished.is_err() {
            self.forget();
        }
    }

    /// What the service kept, dropped after a bug.
    fn forget(&mut self) {
        self.kept = KeptAcrossRuns::answering();
        self.settings = SettingsKept::default();
    }

    /// The answer to one request, its group's bookkeeping left for [`Service::finish_later`],
    /// for a host that hands the answer on first and cannot wait in between (an in-process
    /// caller returning to its event loop): the group's lock is held until then, so call it
    /// soon. What an earlier answer left is done first. Never panics, as
    /// [`Service::answer_line`].
    pub fn answer_now(&mut self, line: &[u8]) -> ServeAnswer {
        self.finish_later();
        let Service {
            root,
            overrides,
            kept,
            settings,
        } = self;
        let answered = std::panic::catch_unwind(AssertUnwindSafe(|| {
            answer(root, overrides, line, kept, settings)
        }));
        answered.unwrap_or_else(|_| {
            self.forget();
            ServeAnswer::failed(
                request_id(line),
                None,
                Code::InternalError,
                "clawmd met a bug (a panic) answering this request; please report it".to_owned(),
            )
        })
    }
}

/// The deployment's settings: `overrides` over `<root>/clawmd.json` over the defaults, with
/// the deployment's pins; the warnings about the settings file as the report gives them.
pub fn resolve_quietly(
    root: &Path,
    overrides: &Overrides,
) -> Result<(Resolved, Vec<WarningReport>), ConfigError> {
    let (settings, warnings) = read_settings(root)?;
    let mut warnings: Vec<WarningReport> = warnings
        .iter()
        .map(|warning| WarningReport {
            code: warning.code,
            message: warning.to_string(),
        })
        .collect();
    let resolved = settings.resolve(root, overrides).with_deployment_pins();
    warnings.extend(init_needed(root, &resolved.layout));
    Ok((resolved, warnings))
}

/// A nanoclaw checkout with no `clawmd.json`: composed as clawmd's defaults have it, its
/// groups lack what only `clawmd init` writes down (nanoclaw's module guidance; on today's
/// nanoclaw the persona, the memory note and no `CLAUDE.local.md`; the runner's `cli_scope`).
fn init_needed(root: &Path, layout: &crate::input::layout::Layout) -> Option<WarningReport> {
    if rustix::fs::lstat(root.join(SETTINGS_FILE)).is_ok() {
        return None;
    }
    let detected = crate::commands::init::detect(root, layout);
    let missed = match (&detected.project_doc, &detected.modules) {
        (Some((composer, _)), _) => format!(
            "{} composes today's nanoclaw: its module guidance, each group's persona (instructions.prepend.md) and the memory note are not composed, `{}` reaches the agents as it is, and every group gets a CLAUDE.local.md nanoclaw does not use",
            composer.display(),
            crate::commands::init::NANOCLAW_MEMORY_NOTE
        ),
        (None, Some((folder, _))) => format!(
            "{} holds nanoclaw's module guidance, which no group gets",
            folder.display()
        ),
        (None, None) => return None,
    };
    Some(WarningReport {
        code: Code::Settings,
        message: format!(
            "{}: no clawmd.json in a nanoclaw checkout: {missed} (fix: run `clawmd init` there, then compose again)",
            root.display()
        ),
    })
}

/// The settings a request resolved ([`resolve_quietly`]), kept for the requests after it
/// while every file they were read from (`clawmd.json`, the pin files of
/// [`crate::pin::pin_files`]) is as it was: the same identity, settled when it was taken
/// ([`crate::reads::settled`]: a change in the same tick of the clock as the read is never
/// taken for no change), or still missing. A request with other overrides resolves again.
///
/// Where the holder watches ([`crate::input::sources::vouch::Vouchers`]), the files found as they
/// were are vouched for as shared sources are: the requests that come within
/// [`crate::input::sources::vouch::VOUCH_FOR`] while the kernel reports no change to any of them (nor
/// to a folder above them) look at none.
#[derive(Debug, Default)]
struct SettingsKept(Option<KeptSettings>);

#[derive(Debug)]
struct KeptSettings {
    overrides: Overrides,
    files: Vec<(PathBuf, FileState)>,
    resolved: Resolved,
    warnings: Vec<WarningReport>,
    /// What the vouch for `files` is made for: the files and their states, as text.
    vouched_as: Vec<u8>,
}

/// The item the kept settings are vouched for under (no source's item has this form).
const SETTINGS_ITEM: &str = "\0settings";

/// A settled file's identity, or `None` for no file.
type FileState = Option<[i64; 8]>;

/// The state of `path` at `now` (links followed, as the settings and pins are read), or
/// `None` when it cannot stand for the file's bytes (changed too lately, or unreadable).
fn file_state(path: &Path, now: SystemTime) -> Option<FileState> {
    match rustix::fs::stat(path) {
        Ok(stat) => crate::reads::settled(&stat, now).map(Some),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => Some(None),
        Err(_) => None,
    }
}

impl SettingsKept {
    /// [`resolve_quietly`], answered by the kept settings when they still hold.
    fn resolve(
        &mut self,
        root: &Path,
        overrides: &Overrides,
        vouchers: &Vouchers,
    ) -> Result<(Resolved, Vec<WarningReport>), ConfigError> {
        if let Some(kept) = &self.0
            && kept.overrides == *overrides
            && kept.holds(vouchers)
        {
            return Ok((kept.resolved.clone(), kept.warnings.clone()));
        }
        self.0 = None;
        let (resolved, warnings) = resolve_quietly(root, overrides)?;
        // Looked at after the reads: a file settled now did not change during them.
        let paths = std::iter::once(root.join(SETTINGS_FILE))
            .chain(crate::pin::pin_files(&resolved.layout.container_dir));
        let now = SystemTime::now();
        let files: Option<Vec<(PathBuf, FileState)>> = paths
            .map(|path| file_state(&path, now).map(|state| (path, state)))
            .collect();
        if let Some(files) = files {
            self.0 = Some(KeptSettings {
                overrides: overrides.clone(),
                vouched_as: format!("{files:?}").into_bytes(),
                files,
                resolved: resolved.clone(),
                warnings: warnings.clone(),
            });
        }
        Ok((resolved, warnings))
    }
}

impl KeptSettings {
    /// Whether every file is as it was: vouched for since the holder last looked, else each
    /// looked at (and then vouched for, its watches added first).
    fn holds(&self, vouchers: &Vouchers) -> bool {
        let item = Some(SETTINGS_ITEM.to_owned());
        if vouchers.vouched(&item, &self.vouched_as) {
            return true;
        }
        let armed = vouchers.arm_paths(self.files.iter().map(|(path, _)| path.clone()));
        let now = SystemTime::now();
        let holds = (self.files.iter()).all(|(path, state)| file_state(path, now) == Some(*state));
        if holds && let Some(armed) = armed {
            vouchers.vouch(&item, &self.vouched_as, armed);
        }
        holds
    }
}

/// The `id` of a line that is not a valid request, to answer it by: its `id` whenever that can
/// be read, whatever else is wrong with the line (null when there is none). Only the id is
/// parsed and the other fields are skipped, so that what serde_json cannot hold as a value
/// (nesting past its limit, a lone surrogate escape) does not hide it; nor does what is wrong
/// after it (a line cut short, more after the object).
fn request_id(line: &[u8]) -> serde_json::Value {
    let mut id = serde_json::Value::Null;
    let mut reader = serde_json::Deserializer::from_slice(line);
    // An error met after the id keeps the id read.
    let _ = serde::Deserializer::deserialize_map(&mut reader, IdOf(&mut id));
    id
}

/// Reads an object's `id` into the value it holds, skipping every other field unread.
struct IdOf<'a>(&'a mut serde_json::Value);

impl<'de> serde::de::Visitor<'de> for IdOf<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "id" {
                *self.0 = map.next_value()?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The request on `line`, or why it is not one (naming the field at fault).
fn parse_request(line: &[u8]) -> Result<ServeRequest, String> {
    // The usual case without tracking the path, which only an error's message needs.
    if let Ok(request) = serde_json::from_slice(line) {
        return Ok(request);
    }
    let mut reader = serde_json::Deserializer::from_slice(line);
    let request: ServeRequest = serde_path_to_error::deserialize(&mut reader).map_err(|err| {
        match err.path().to_string() {
            path if path == "." => err.inner().to_string(),
            path => format!("{path}: {}", err.inner()),
        }
    })?;
    reader.end().map_err(|err| err.to_string())?;
    Ok(request)
}

/// The answer to one request line.
fn answer(
    root: &Path,
    base: &Overrides,
    line: &[u8],
    kept: &mut KeptAcrossRuns,
    settings: &mut SettingsKept,
) -> ServeAnswer {
    let request = match parse_request(line) {
        Ok(request) => request,
        Err(why) => {
            return ServeAnswer::failed(
                request_id(line),
                None,
                Code::BadRequest,
                format!(
                    "not a clawmd serve request ({why}): one JSON object per line, \
                     {{\"id\": …, \"group\": \"NAME\"}} and the optional fields of \
                     `clawmd schema serve-request`"
                ),
            );
        }
    };
    let id = request.id.clone();
    let failed = |code: Code, message: String| ServeAnswer::failed(id.clone(), None, code, message);
    let overrides = Overrides {
        delivery: request.delivery.or(base.delivery),
        provider: request.provider.or(base.provider),
        approve_external: request.approve_external || base.approve_external,
        lock_timeout: request.lock_timeout_secs.or(base.lock_timeout),
        ..base.clone()
    };
    // What the kernel reported since the last request: the kept settings' vouch is as of now.
    kept.vouchers().look();
    let (mut resolved, warnings) = match settings.resolve(root, &overrides, kept.vouchers()) {
        Ok(resolved) => resolved,
        Err(err) => return failed(Code::RunFailed, crate::error::chain_text(&err)),
    };
    if let Some(config) = &request.config {
        let config = match HandedConfig::new(config.get().as_bytes().to_vec()) {
            Ok(config) => config,
            Err(err) => return failed(Code::BadRequest, format!("config: {err}")),
        };
        if let Err(err) = hand_config(&mut resolved.layout, &request.group, config) {
            return failed(Code::from(&err), crate::error::chain_text(&err));
        }
    }
    let options = ComposeOptions {
        settings: resolved.delivery,
        dry_run: false,
        lock_timeout: resolved.lock_timeout,
    };
    let selection = Selection::Named(vec![request.group.clone()]);
    let mut report = match compose_keeping(&resolved.layout, &selection, &options, &(), kept) {
        Ok(report) => report,
        Err(err) => return failed(Code::RunFailed, crate::error::chain_text(&err)),
    };
    report.warnings.extend(warnings);
    let composed = report.groups.iter().any(|group| group.error.is_none());
    if !composed {
        return ServeAnswer::new(id, report, None);
    }
    // The binds of the group as the compose just found it, else as `clawmd mounts` works
    // them out.
    let found = (report.groups.iter())
        .find(|group| group.group == request.group)
        .and_then(|group| Some((group.target?, group.own_config?)));
    let binds = match found {
        Some((target, own_config)) => crate::mounts::mounts_of(
            &resolved.layout,
            &request.group,
            &target,
            own_config,
            &resolved.guards,
        ),
        None => crate::mounts::mounts(
            &resolved.layout,
            &request.group,
            &resolved.delivery,
            &resolved.guards,
        ),
    };
    match binds {
        Ok(binds) => ServeAnswer::new(id, report, Some(binds)),
        Err(err) => ServeAnswer::failed(
            id,
            Some(report),
            Code::from(&err),
            crate::error::chain_text(&err),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn a_line_that_is_no_request_is_answered_bad_request_by_its_id() {
        let root = tempfile::tempdir().unwrap();
        let mut service = Service::new(root.path(), Overrides::default()).unwrap();
        let answer = service.answer_line(br#"{"id": 7, "group": 3}"#);
        let answer = serde_json::to_value(&answer).unwrap();
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], "bad-request", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("group: invalid type"), "{message}");
        let answer = serde_json::to_value(service.answer_line(b"not json")).unwrap();
        assert_eq!(answer["id"], serde_json::Value::Null, "{answer}");
        assert_eq!(answer["error"]["code"], "bad-request", "{answer}");
    }

    /// The answer to a line that is not a request carries the line's `id` whenever the id can
    /// be read, whatever else is wrong: a field the request does not know or a bad value, and
    /// also what serde_json cannot hold as a value (a config nested deeper than its limit, a
    /// lone surrogate escape, which JavaScript's `JSON.stringify` writes), a line cut short or
    /// with more after the object.
    #[test]
    fn a_bad_request_is_answered_by_its_id_whenever_the_id_can_be_read() {
        let root = tempfile::tempdir().unwrap();
        let mut service = Service::new(root.path(), Overrides::default()).unwrap();
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let lines = [
            (r#"{"id":5,"grup":"main"}"#.to_owned(), json!(5)),
            (
                r#"{"id":6,"group":"main","delivery":"managedd"}"#.to_owned(),
                json!(6),
            ),
            (
                format!(r#"{{"id":7,"grup":"main","config":{deep}}}"#),
                json!(7),
            ),
            (
                r#"{"id":"eight","group":"m\ud800"}"#.to_owned(),
                json!("eight"),
            ),
            (r#"{"group":"m\ud800","id":9}"#.to_owned(), json!(9)),
            (r#"{"id":10,"group":"main"} and more"#.to_owned(), json!(10)),
            (r#"{"id":11,"group":"ma"#.to_owned(), json!(11)),
            (r#"{"grup":"main"}"#.to_owned(), Value::Null),
            ("[1]".to_owned(), Value::Null),
            ("not json".to_owned(), Value::Null),
        ];
        for (line, id) in lines {
            let answer = serde_json::to_value(service.answer_line(line.as_bytes())).unwrap();
            assert_eq!(
                answer["error"]["code"], "bad-request",
                "{line:.80}: {answer}"
            );
            assert_eq!(answer["id"], id, "{line:.80}: {answer}");
        }
    }

    #[test]
    fn the_root_and_the_folders_are_made_absolute() {
        let overrides = Overrides {
            groups_dir: Some(PathBuf::from("g")),
            container_dir: Some(PathBuf::from("c")),
            app_mount: Some(PathBuf::from("app")),
            ..Overrides::default()
        };
        let service = Service::new(Path::new("some/where"), overrides).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(service.root(), cwd.join("some/where"));
        assert_eq!(service.overrides.groups_dir, Some(cwd.join("g")));
        assert_eq!(service.overrides.container_dir, Some(cwd.join("c")));
        // a path in the container, not on the host: as given
        assert_eq!(service.overrides.app_mount, Some(PathBuf::from("app")));
    }
}
