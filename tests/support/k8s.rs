//! Kubernetes in the tests: the route-2 Pod docs/kubernetes.md shows.

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
    let docs = yaml_rust2::YamlLoader::load_from_str(yaml).unwrap();
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
    json(&docs[0])
}
