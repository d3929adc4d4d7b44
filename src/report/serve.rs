//! `clawmd serve`: a long-lived process a runner keeps beside it (as esbuild's service runs
//! beside a bundler), reading one [`ServeRequest`] per line on standard input and printing one
//! [`ServeAnswer`] per line on standard output. A request is one spawn: the group is composed
//! exactly as `clawmd compose GROUP --json` composes it (the same locks, the same atomic
//! writes, the settings read again from `clawmd.json` at every request), and when it composed,
//! the answer also carries the binds `clawmd mounts GROUP --json` prints, so that a runner gets
//! the report, the spawn digest and the mount table from one round trip, without starting a
//! process per spawn. The deployment root is the service's, fixed when it starts: a request
//! cannot name another.

use serde::{Deserialize, Serialize};

use crate::plan::target::{Delivery, Provider};
use crate::report::{Code, ComposeReport, REPORT_VERSION, RunError, SchemaKind};
use crate::runtime::mounts::MountsReport;

/// One request line: compose one group for a spawn and return its binds. Only `group` is
/// required; every other field left out is taken as `clawmd compose` takes it (the flags
/// `clawmd serve` started with, `CLAWMD_*`, `clawmd.json`, `container.json`). An unknown field
/// is refused (`bad-request`), so that a misspelt option is never silently ignored.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServeRequest {
    /// A number or a string, echoed as the answer's `id` (to match answers to requests).
    #[serde(default)]
    #[schemars(schema_with = "id_schema")]
    pub id: serde_json::Value,
    /// The group to compose (its folder name under groups/).
    pub group: String,
    /// `--delivery`.
    #[serde(default)]
    pub delivery: Option<Delivery>,
    /// `--provider`: the backend when the group's config names none.
    #[serde(default)]
    pub provider: Option<Provider>,
    /// `--approve-external`.
    #[serde(default)]
    pub approve_external: bool,
    /// `--lock-timeout`: seconds to wait for another run holding the group's lock.
    #[serde(default)]
    pub lock_timeout_secs: Option<u64>,
    /// `--config -`: the group's config (container.json's shape), read instead of its
    /// `container.json`, for a runner that keeps it elsewhere (nanoclaw keeps `cli_scope` in
    /// its database row).
    // Kept as the text the line holds (checked as JSON, not parsed into values): the compose
    // reads it as the group's config, and the same text handed again is known by its bytes.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub config: Option<Box<serde_json::value::RawValue>>,
}

/// One answer line, for one request line, in the order the requests came.
///
/// - The group composed: `compose` is the report `clawmd compose GROUP --json` prints and
///   `mounts` the binds `clawmd mounts GROUP --json` prints; `ok` is the report's `ok`.
/// - The group failed (its entry in `compose` has an `error`): `mounts` is null, `ok` false.
/// - The run could not start (the groups folder or the shared content unreadable, a bad
///   `clawmd.json`), the request was not one (`bad-request`), or the binds could not be made
///   (`not-composed`, …): `error` says why; `ok` is false.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ServeAnswer {
    /// The `$id` of this document's JSON Schema (`clawmd schema serve-answer` prints it).
    #[serde(rename = "$schema")]
    #[schemars(schema_with = "crate::report::kind::serve_answer_id")]
    pub schema: &'static str,
    /// The JSON shape version.
    pub version: u32,
    /// The request's `id`, whenever it can be read from the line, even one that is not a valid
    /// request (null when it had none, or the line is not a JSON object).
    #[schemars(schema_with = "id_schema")]
    pub id: serde_json::Value,
    /// True when the group composed, everything composed reaches the agent's loader (the
    /// report's `ok`), and the binds were made.
    pub ok: bool,
    /// The compose report, when the run started.
    pub compose: Option<ComposeReport>,
    /// The binds of the group's container, in the order to apply them, when it composed.
    pub mounts: Option<MountsReport>,
    /// Why there is no report or no binds: `bad-request`, `run-failed`, or the code of the
    /// binds' failure (`not-composed`, …).
    pub error: Option<RunError>,
}

impl ServeAnswer {
    /// The answer to request `id`: what compose and mounts gave.
    pub fn new(
        id: serde_json::Value,
        compose: ComposeReport,
        mounts: Option<MountsReport>,
    ) -> Self {
        let ok = compose.ok && mounts.is_some();
        ServeAnswer {
            schema: SchemaKind::ServeAnswer.id(),
            version: REPORT_VERSION,
            id,
            ok,
            compose: Some(compose),
            mounts,
            error: None,
        }
    }

    /// The answer to request `id` that failed with `code`, `message` (`compose`: the report,
    /// when the run got that far).
    pub fn failed(
        id: serde_json::Value,
        compose: Option<ComposeReport>,
        code: Code,
        message: String,
    ) -> Self {
        ServeAnswer {
            schema: SchemaKind::ServeAnswer.id(),
            version: REPORT_VERSION,
            id,
            ok: false,
            compose,
            mounts: None,
            error: Some(RunError { code, message }),
        }
    }
}

/// The schema of a request's `id`: what a runner numbers its requests with.
fn id_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A number or a string the runner matches the answer by (null: none).",
        "type": ["number", "string", "null"],
    })
}
