//! JSON Schemas of what clawmd reads and writes (`clawmd schema …`), derived with schemars
//! from the very types that parse `container.json` and `clawmd.json` and that serialise the
//! reports, so a schema cannot drift from the code.
//!
//! Each schema has a stable `$id` ([`SchemaKind::id`], a `urn:`: there is no website to fetch
//! it from; `clawmd schema KIND` prints the document), and every JSON report names its schema
//! by that `$id` in its first key, `$schema`, so a reader can tell a compose report from the
//! envelope of a run that could not start ([`crate::report::RunFailure`]) by one field.

pub use crate::report::SchemaKind;
use crate::report::{CheckReport, ComposeReport, MigrateReport, RunFailure, WatchLine};

/// The JSON Schema (draft 2020-12) of `kind`, with `$schema` and `$id` first.
pub fn schema(kind: SchemaKind) -> serde_json::Value {
    let schema = match kind {
        SchemaKind::ContainerJson => crate::input::config::schema(),
        SchemaKind::Settings => schemars::schema_for!(crate::input::settings::Settings),
        SchemaKind::Report => output::<ComposeReport>(),
        SchemaKind::CheckReport => output::<CheckReport>(),
        SchemaKind::MigrateReport => output::<MigrateReport>(),
        SchemaKind::RunFailure => output::<RunFailure>(),
        SchemaKind::Mounts => output::<crate::runtime::mounts::MountsReport>(),
        SchemaKind::WatchEvent => output::<WatchLine>(),
        SchemaKind::ServeRequest => schemars::schema_for!(crate::report::ServeRequest),
        SchemaKind::ServeAnswer => output::<crate::report::ServeAnswer>(),
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
            SchemaKind::WatchEvent,
            SchemaKind::ServeRequest,
            SchemaKind::ServeAnswer,
        ] {
            assert!(kind.id().ends_with(&version), "{kind:?}: {}", kind.id());
        }
    }
}
