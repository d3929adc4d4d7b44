//! JSON Schemas of what clawmd reads and writes (`clawmd schema …`), derived with schemars
//! from the very types that parse `container.json` and `clawmd.json` and that serialise the
//! reports, so a schema cannot drift from the code.

use crate::report::{CheckReport, ComposeReport, MigrateReport};

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
}

impl SchemaKind {
    /// Every kind, with its command-line name.
    pub const ALL: [(SchemaKind, &'static str); 5] = [
        (SchemaKind::ContainerJson, "container-json"),
        (SchemaKind::Settings, "settings"),
        (SchemaKind::Report, "report"),
        (SchemaKind::CheckReport, "check-report"),
        (SchemaKind::MigrateReport, "migrate-report"),
    ];
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

/// The JSON Schema (draft 2020-12) of `kind`.
pub fn schema(kind: SchemaKind) -> serde_json::Value {
    let schema = match kind {
        SchemaKind::ContainerJson => crate::config::schema(),
        SchemaKind::Settings => schemars::schema_for!(crate::settings::Settings),
        SchemaKind::Report => schemars::schema_for!(ComposeReport),
        SchemaKind::CheckReport => schemars::schema_for!(CheckReport),
        SchemaKind::MigrateReport => schemars::schema_for!(MigrateReport),
    };
    schema.to_value()
}
