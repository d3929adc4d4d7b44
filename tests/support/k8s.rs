//! Kubernetes in the tests: the strict API schemas (tests/fixtures/k8s-schema), YAML as JSON,
//! and the route-2 Pod docs/kubernetes.md shows.

use std::path::Path;

use serde_json::Value;

/// The route-2 Pod of docs/kubernetes.md (the YAML block after the `clawmd:composer-pod`
/// marker), as JSON.
pub fn composer_pod() -> Value {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/kubernetes.md"))
            .unwrap();
    let after = doc
        .split("<!-- clawmd:composer-pod")
        .nth(1)
        .expect("the marker");
    let yaml = after
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a yaml block after the marker");
    yaml_documents(yaml).remove(0)
}

/// Every document of a YAML stream, as JSON.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    fn json(yaml: &yaml_rust2::Yaml) -> Value {
        use yaml_rust2::Yaml;
        match yaml {
            Yaml::String(s) => Value::String(s.clone()),
            Yaml::Integer(i) => Value::from(*i),
            Yaml::Boolean(b) => Value::Bool(*b),
            Yaml::Array(items) => Value::Array(items.iter().map(json).collect()),
            Yaml::Hash(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.as_str().unwrap().to_owned(), json(v)))
                    .collect(),
            ),
            Yaml::Null => Value::Null,
            other => panic!("unexpected YAML {other:?}"),
        }
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(text).unwrap();
    docs.iter().map(json).collect()
}

/// The strict schema of the API's `kind` (`Pod`, `ConfigMap`): tests/fixtures/k8s-schema.
pub fn schema(kind: &str) -> &'static jsonschema::Validator {
    use std::sync::OnceLock;
    static POD: OnceLock<jsonschema::Validator> = OnceLock::new();
    static MAP: OnceLock<jsonschema::Validator> = OnceLock::new();
    let (cell, file) = match kind {
        "Pod" => (&POD, "pod-v1.json"),
        "ConfigMap" => (&MAP, "configmap-v1.json"),
        other => panic!("no schema here for a {other}"),
    };
    cell.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/k8s-schema")
            .join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
    })
}
