//! JSON Schemas of what clawmd reads and writes (`clawmd schema …`), derived with schemars
//! from the very types that parse `container.json` and `clawmd.json` and that serialise the
//! reports, so a schema cannot drift from the code.
//!
//! Each schema has a stable `$id` ([`SchemaKind::id`], a `urn:`: there is no website to fetch
//! it from; `clawmd schema KIND` prints the document), and every JSON report names its schema
//! by that `$id` in its first key, `$schema`, so a reader can tell a compose report from the
//! envelope of a run that could not start ([`crate::report::RunFailure`]) by one field.

use crate::report::{CheckReport, ComposeReport, MigrateReport, RunFailure};

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
    /// `clawmd mounts GROUP --format json`: the binds of a group's container (an array).
    Mounts,
}

impl SchemaKind {
    /// Every kind, with its command-line name.
    pub const ALL: [(SchemaKind, &'static str); 7] = [
        (SchemaKind::ContainerJson, "container-json"),
        (SchemaKind::Settings, "settings"),
        (SchemaKind::Report, "report"),
        (SchemaKind::CheckReport, "check-report"),
        (SchemaKind::MigrateReport, "migrate-report"),
        (SchemaKind::RunFailure, "run-failure"),
        (SchemaKind::Mounts, "mounts"),
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
            SchemaKind::Mounts => "urn:clawmd:schema:mounts:1",
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

/// The JSON Schema (draft 2020-12) of `kind`, with `$schema` and `$id` first.
pub fn schema(kind: SchemaKind) -> serde_json::Value {
    let schema = match kind {
        SchemaKind::ContainerJson => crate::config::schema(),
        SchemaKind::Settings => schemars::schema_for!(crate::settings::Settings),
        SchemaKind::Report => output::<ComposeReport>(),
        SchemaKind::CheckReport => output::<CheckReport>(),
        SchemaKind::MigrateReport => output::<MigrateReport>(),
        SchemaKind::RunFailure => output::<RunFailure>(),
        SchemaKind::Mounts => output::<crate::mounts::MountsReport>(),
    };
    let serde_json::Value::Object(mut body) = schema.to_value() else {
        unreachable!("a root schema is an object")
    };
    let mut out = serde_json::Map::new();
    if let Some(meta) = body.remove("$schema") {
        out.insert("$schema".to_owned(), meta);
    }
    out.insert("$id".to_owned(), kind.id().into());
    out.extend(body);
    serde_json::Value::Object(out)
}

/// The schema of a document clawmd prints, as serialised: a field that is always printed (a
/// `null` included) is required.
fn output<T: schemars::JsonSchema>() -> schemars::Schema {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_has_its_id_after_the_meta_schema() {
        for (kind, _) in SchemaKind::ALL {
            let schema = schema(kind);
            let keys: Vec<&String> = schema.as_object().unwrap().keys().take(2).collect();
            assert_eq!(keys, ["$schema", "$id"], "{kind:?}");
            assert_eq!(schema["$id"], kind.id());
        }
        // A report's id names its shape version, so a new version cannot keep an old id.
        let version = format!(":{}", crate::report::REPORT_VERSION);
        for kind in [
            SchemaKind::Report,
            SchemaKind::CheckReport,
            SchemaKind::MigrateReport,
            SchemaKind::RunFailure,
            SchemaKind::Mounts,
        ] {
            assert!(kind.id().ends_with(&version), "{kind:?}: {}", kind.id());
        }
    }
}
