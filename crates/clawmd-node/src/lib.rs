//! clawmd's spawn service as a Node addon: `prepareSpawn` answered in the Node host's own
//! process, on its thread, rather than over a `clawmd serve` pipe. A process that waits on a
//! pipe between spawns pays its wake-up at each (0.1-0.3 ms on a host that pauses between
//! spawns: docs/performance.md, "Eleventh pass"); a call in the host's thread does not.
//!
//! JavaScript sees one class:
//!
//! ```text
//! new ClawmdService({ root, groupsDir?, containerDir?, appMount?, workspaceMount?,
//!                     delivery?, provider?, approveExternal?, claudeVersion?,
//!                     lockTimeoutSecs? })       // throws on an option it cannot read
//! service.answer(requestJson: string): string  // synchronous, as nanoclaw's own composer
//! service.finishLater(): void                  // the bookkeeping the last answer left
//! ```
//!
//! The options are `clawmd serve`'s flags (and the `CLAWMD_*` variables the runner reads for
//! them), fixed for the life of the service; each `answer` takes one request of `clawmd schema
//! serve-request` as JSON text and returns its answer (`clawmd schema serve-answer`) as JSON
//! text: exactly what `clawmd serve` prints for that line
//! ([`clawmd::service::Service::answer_now`]). As `clawmd serve` does, it hands the answer on
//! before the group's bookkeeping (the handed config kept, the group's record written, its
//! journal settled), which it leaves, with the group's lock, for `finishLater`: the caller
//! runs it once the answer is handed on (from `setImmediate`), and the next `answer` does it
//! first in any case. A bug (a panic) is answered `internal-error` and never crosses into Node.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clawmd::report::{Code, ServeAnswer};
use clawmd::service::Service;
use clawmd::settings::Overrides;
use napi::bindgen_prelude::{AsyncTask, Result};
use napi::{Env, Error, Status, Task};
use napi_derive::napi;

/// mimalloc for the addon's own allocations, as the binary has it (docs/performance.md,
/// "Sixth pass"); Node's are its own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The service's options: the deployment root and `clawmd serve`'s flags.
#[napi(object)]
pub struct ServiceOptions {
    /// The deployment root (`--root`): made absolute now.
    pub root: String,
    /// `--groups-dir`.
    pub groups_dir: Option<String>,
    /// `--container-dir`.
    pub container_dir: Option<String>,
    /// `--app-mount`.
    pub app_mount: Option<String>,
    /// `--workspace-mount`.
    pub workspace_mount: Option<String>,
    /// `--delivery`: managed, inline, copy, link.
    pub delivery: Option<String>,
    /// `--provider`: claude, codex, gemini, ….
    pub provider: Option<String>,
    /// `--approve-external`.
    pub approve_external: Option<bool>,
    /// `--claude-version`: X.Y.Z.
    pub claude_version: Option<String>,
    /// `--lock-timeout`, in seconds.
    pub lock_timeout_secs: Option<f64>,
}

/// The overrides `options` give, or an error naming the option at fault. An empty string is
/// refused, as `clawmd serve` refuses an empty flag (or `CLAWMD_*` variable).
fn overrides(options: &ServiceOptions) -> std::result::Result<Overrides, String> {
    for (name, value) in [
        ("groupsDir", &options.groups_dir),
        ("containerDir", &options.container_dir),
        ("appMount", &options.app_mount),
        ("workspaceMount", &options.workspace_mount),
        ("delivery", &options.delivery),
        ("provider", &options.provider),
        ("claudeVersion", &options.claude_version),
    ] {
        if value.as_deref() == Some("") {
            return Err(format!("{name}: a value is required, not an empty string"));
        }
    }
    fn parsed<T: std::str::FromStr>(
        name: &str,
        value: &Option<String>,
    ) -> std::result::Result<Option<T>, String>
    where
        T::Err: std::fmt::Display,
    {
        value
            .as_deref()
            .map(|text| {
                text.parse::<T>()
                    .map_err(|err| format!("{name}: {text:?}: {err}"))
            })
            .transpose()
    }
    let path = |value: &Option<String>| value.as_ref().map(PathBuf::from);
    let lock_timeout = match options.lock_timeout_secs {
        None => None,
        Some(secs) if secs >= 0.0 && secs.fract() == 0.0 && secs <= u32::MAX as f64 => {
            Some(secs as u64)
        }
        Some(secs) => {
            return Err(format!(
                "lockTimeoutSecs: {secs} is not a whole number of seconds"
            ));
        }
    };
    Ok(Overrides {
        groups_dir: path(&options.groups_dir),
        container_dir: path(&options.container_dir),
        app_mount: path(&options.app_mount),
        workspace_mount: path(&options.workspace_mount),
        lock_timeout,
        delivery: parsed("delivery", &options.delivery)?,
        provider: parsed("provider", &options.provider)?,
        approve_external: options.approve_external.unwrap_or(false),
        claude_version: parsed("claudeVersion", &options.claude_version)?,
    })
}

/// One deployment's spawn service (`clawmd serve` in the host's process).
#[napi]
pub struct ClawmdService {
    service: Arc<Mutex<Service>>,
}

#[napi]
impl ClawmdService {
    /// The service of the deployment at `options.root`; throws (`InvalidArg`) naming an option
    /// it cannot read.
    #[napi(constructor)]
    pub fn new(options: ServiceOptions) -> Result<Self> {
        let overrides = overrides(&options).map_err(|why| Error::new(Status::InvalidArg, why))?;
        let service = Service::new(&PathBuf::from(&options.root), overrides).map_err(|err| {
            Error::new(
                Status::InvalidArg,
                format!("root: {:?}: {err}", options.root),
            )
        })?;
        Ok(ClawmdService {
            service: Arc::new(Mutex::new(service)),
        })
    }

    /// The answer to one request (JSON text), as JSON text, on this thread, its bookkeeping
    /// left for [`ClawmdService::finish_later`].
    #[napi]
    pub fn answer(&self, request: String) -> Result<String> {
        answer_text(&self.service, &request, Bookkeeping::Left)
    }

    /// [`ClawmdService::answer`] on libuv's thread pool, its bookkeeping done there too: for a
    /// request that may wait for a group's lock another run holds (the event loop is not held
    /// meanwhile).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn answer_async(&self, request: String) -> AsyncTask<AnswerOffThread> {
        AsyncTask::new(AnswerOffThread {
            service: Arc::clone(&self.service),
            request,
        })
    }

    /// Does the bookkeeping the last answer left, releasing its group's lock. Never waits: when
    /// an answer is being made off the thread, that answer does it first.
    #[napi]
    pub fn finish_later(&self) {
        let mut service = match self.service.try_lock() {
            Ok(service) => service,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        service.finish_later();
    }
}

/// `service` under its lock (a lock poisoned by a panic is taken all the same: the service
/// catches its own, and its state is whole between requests).
fn locked(service: &Mutex<Service>) -> std::sync::MutexGuard<'_, Service> {
    service
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether an answer leaves its group's bookkeeping for `finishLater` or does it before
/// returning.
#[derive(Clone, Copy)]
enum Bookkeeping {
    Left,
    Done,
}

/// The answer to `request` as JSON text. [`Service`] answers a panic itself; this guard keeps
/// any other (serializing the answer) on this side of the FFI boundary too, as an answer of
/// the same shape.
fn answer_text(
    service: &Mutex<Service>,
    request: &str,
    bookkeeping: Bookkeeping,
) -> Result<String> {
    let answered = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut service = locked(service);
        let answer = match bookkeeping {
            Bookkeeping::Left => service.answer_now(request.as_bytes()),
            Bookkeeping::Done => service.answer_line(request.as_bytes()),
        };
        serde_json::to_string(&answer)
    }));
    match answered {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(err)) => Err(Error::new(
            Status::GenericFailure,
            format!("clawmd: cannot write the answer: {err}"),
        )),
        Err(_) => serde_json::to_string(&ServeAnswer::failed(
            serde_json::Value::Null,
            None,
            Code::InternalError,
            "clawmd met a bug (a panic) answering this request; please report it".to_owned(),
        ))
        .map_err(|err| Error::new(Status::GenericFailure, err.to_string())),
    }
}

/// One request answered on libuv's thread pool ([`ClawmdService::answer_async`]).
pub struct AnswerOffThread {
    service: Arc<Mutex<Service>>,
    request: String,
}

impl Task for AnswerOffThread {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> Result<String> {
        answer_text(&self.service, &self.request, Bookkeeping::Done)
    }

    fn resolve(&mut self, _env: Env, output: String) -> Result<String> {
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(root: &str) -> ServiceOptions {
        ServiceOptions {
            root: root.to_owned(),
            groups_dir: None,
            container_dir: None,
            app_mount: None,
            workspace_mount: None,
            delivery: None,
            provider: None,
            approve_external: None,
            claude_version: None,
            lock_timeout_secs: None,
        }
    }

    #[test]
    fn options_are_read_as_serves_flags() {
        let mut given = options("/srv");
        given.delivery = Some("inline".to_owned());
        given.provider = Some("codex".to_owned());
        given.claude_version = Some("2.1.0".to_owned());
        given.lock_timeout_secs = Some(5.0);
        given.approve_external = Some(true);
        given.groups_dir = Some("/srv/g".to_owned());
        let got = overrides(&given).unwrap();
        assert_eq!(got.delivery, Some(clawmd::Delivery::Inline));
        assert_eq!(got.provider, Some("codex".parse().unwrap()));
        assert_eq!(got.claude_version, Some("2.1.0".parse().unwrap()));
        assert_eq!(got.lock_timeout, Some(5));
        assert!(got.approve_external);
        assert_eq!(got.groups_dir, Some(PathBuf::from("/srv/g")));
        assert_eq!(overrides(&options("/srv")).unwrap(), Overrides::default());
    }

    #[test]
    fn an_option_it_cannot_read_is_named() {
        let mut given = options("/srv");
        given.delivery = Some("carrier-pigeon".to_owned());
        let why = overrides(&given).unwrap_err();
        assert!(why.starts_with("delivery: \"carrier-pigeon\": "), "{why}");
        let mut given = options("/srv");
        given.lock_timeout_secs = Some(1.5);
        assert!(
            overrides(&given)
                .unwrap_err()
                .starts_with("lockTimeoutSecs: 1.5")
        );
        let mut given = options("/srv");
        given.claude_version = Some("two".to_owned());
        assert!(
            overrides(&given)
                .unwrap_err()
                .starts_with("claudeVersion: \"two\": ")
        );
        let mut given = options("/srv");
        given.groups_dir = Some(String::new());
        let why = overrides(&given).unwrap_err();
        assert!(why.starts_with("groupsDir: a value is required"), "{why}");
    }
}
