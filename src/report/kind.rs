//! The identity of every JSON document clawmd has a schema for: [`SchemaKind`] and its `$id`.
//!
//! It lives with the reports, which carry their kind's `$id` as `$schema`, so that the reports
//! do not depend on [`crate::commands::schema`] (which builds the schemas from the report types).

/// A document clawmd has a schema for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    /// A group's `container.json` (the part clawmd reads).
    ContainerJson,
    /// The deployment's `clawmd.json`.
    Settings,
    /// compose's JSON report.
    Report,
    /// check's JSON report.
    CheckReport,
    /// migrate's JSON report.
    MigrateReport,
    /// The JSON document of any command whose run could not start.
    RunFailure,
    /// One line of `watch --format json`.
    WatchEvent,
    /// `clawmd mounts GROUP --format json`: the binds of a group's container (an array).
    Mounts,
    /// One request line `clawmd serve` reads.
    ServeRequest,
    /// One answer line `clawmd serve` prints.
    ServeAnswer,
}

impl SchemaKind {
    /// Every kind, with its command-line name.
    pub const ALL: [(SchemaKind, &'static str); 10] = [
        (SchemaKind::ContainerJson, "container-json"),
        (SchemaKind::Settings, "settings"),
        (SchemaKind::Report, "report"),
        (SchemaKind::CheckReport, "check-report"),
        (SchemaKind::MigrateReport, "migrate-report"),
        (SchemaKind::RunFailure, "run-failure"),
        (SchemaKind::WatchEvent, "watch-event"),
        (SchemaKind::Mounts, "mounts"),
        (SchemaKind::ServeRequest, "serve-request"),
        (SchemaKind::ServeAnswer, "serve-answer"),
    ];

    /// The schema's `$id`, which a report of this kind carries as its `$schema`. Stable within
    /// a report version (the trailing number is [`crate::report::REPORT_VERSION`]).
    pub const fn id(self) -> &'static str {
        match self {
            SchemaKind::ContainerJson => "urn:clawmd:schema:container-json:1",
            SchemaKind::Settings => "urn:clawmd:schema:settings:1",
            SchemaKind::Report => "urn:clawmd:schema:compose-report:1",
            SchemaKind::CheckReport => "urn:clawmd:schema:check-report:1",
            SchemaKind::MigrateReport => "urn:clawmd:schema:migrate-report:1",
            SchemaKind::RunFailure => "urn:clawmd:schema:run-failure:1",
            SchemaKind::WatchEvent => "urn:clawmd:schema:watch-event:1",
            SchemaKind::Mounts => "urn:clawmd:schema:mounts:1",
            SchemaKind::ServeRequest => "urn:clawmd:schema:serve-request:1",
            SchemaKind::ServeAnswer => "urn:clawmd:schema:serve-answer:1",
        }
    }
}

impl std::str::FromStr for SchemaKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        SchemaKind::ALL
            .iter()
            .find(|(_, name)| *name == text)
            .map(|(kind, _)| *kind)
            .ok_or_else(|| format!("unknown schema {text:?}"))
    }
}

/// The schema of a report's `$schema` field: exactly the `$id` of its kind.
fn id_field(kind: SchemaKind) -> schemars::Schema {
    schemars::json_schema!({
        "description": "The `$id` of this document's JSON Schema (`clawmd schema` prints it).",
        "type": "string",
        "const": kind.id(),
    })
}

pub(crate) fn compose_report_id(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    id_field(SchemaKind::Report)
}

pub(crate) fn check_report_id(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    id_field(SchemaKind::CheckReport)
}

pub(crate) fn migrate_report_id(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    id_field(SchemaKind::MigrateReport)
}

pub(crate) fn run_failure_id(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    id_field(SchemaKind::RunFailure)
}

pub(crate) fn serve_answer_id(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    id_field(SchemaKind::ServeAnswer)
}

pub(crate) fn watch_event_id(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    id_field(SchemaKind::WatchEvent)
}
