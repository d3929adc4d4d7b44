//! `clawmd mounts GROUP --format k8s` (issue 37), run as the real binary: the List passes the
//! Kubernetes API's strict schemas (tests/fixtures/k8s-schema, no unknown field anywhere) and
//! the API server's own rules the schemas do not carry (names, keys, the 1 MiB cap, every
//! reference resolved), and it is the mount table of `clawmd mounts --format json`: every
//! read-only bind is a read-only mount at the same path carrying the same bytes — a folder
//! as a whole configMap volume, a file as one key by `subPath`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::support::k8s::{composer_pod, schema};
use crate::support::{Deployment, clawmd};

const LIMIT: usize = 1_048_576;

/// Everything wrong with `list` as the API server would see it (empty: it would take it).
fn problems(list: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let top: BTreeSet<&str> = list
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // metav1.List: apiVersion, kind, metadata, items.
    if !top.is_subset(&BTreeSet::from(["apiVersion", "kind", "metadata", "items"])) {
        out.push(format!("List has unknown fields: {top:?}"));
    }
    if list["apiVersion"] != "v1" || list["kind"] != "List" {
        out.push("not a v1 List".to_owned());
    }
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let mut maps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for item in &items {
        let kind = item["kind"].as_str().unwrap_or_default();
        for error in schema(kind).iter_errors(item) {
            out.push(format!(
                "{kind} {}: {error} at {}",
                item["metadata"]["name"],
                error.instance_path()
            ));
        }
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        if kind == "ConfigMap" {
            if !is_subdomain(name) {
                out.push(format!("ConfigMap name {name:?} is not a DNS subdomain"));
            }
            let mut size = 0;
            let mut keys = BTreeSet::new();
            for (field, decode) in [("data", false), ("binaryData", true)] {
                for (key, value) in item[field].as_object().into_iter().flatten() {
                    if !is_key(key) || !keys.insert(key.clone()) {
                        out.push(format!("{name}: bad or repeated key {key:?}"));
                    }
                    let text = value.as_str().unwrap();
                    size += match decode {
                        true => text.len() / 4 * 3 - text.matches('=').count(),
                        false => text.len(),
                    };
                }
            }
            if size > LIMIT {
                out.push(format!("{name}: {size} bytes of data, over {LIMIT}"));
            }
            maps.insert(name.to_owned(), keys);
        }
    }
    for pod in items.iter().filter(|item| item["kind"] == "Pod") {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        if !is_label(name) {
            out.push(format!("Pod name {name:?} is not a DNS label"));
        }
        let mut volumes = BTreeMap::new();
        for volume in pod["spec"]["volumes"].as_array().into_iter().flatten() {
            let vname = volume["name"].as_str().unwrap().to_owned();
            if !is_label(&vname) || volumes.contains_key(&vname) {
                out.push(format!("volume name {vname:?} bad or repeated"));
            }
            let map = volume["configMap"]["name"].as_str().unwrap();
            let Some(keys) = maps.get(map) else {
                out.push(format!(
                    "volume {vname} names ConfigMap {map}, not in the List"
                ));
                continue;
            };
            for item in volume["configMap"]["items"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let path = item["path"].as_str().unwrap();
                if !keys.contains(item["key"].as_str().unwrap())
                    || path.starts_with('/')
                    || path.split('/').any(|part| part == "..")
                {
                    out.push(format!("volume {vname}: bad item {item}"));
                }
            }
            volumes.insert(vname, keys.clone());
        }
        let mut paths = BTreeSet::new();
        for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
            for mount in container["volumeMounts"].as_array().into_iter().flatten() {
                let path = mount["mountPath"].as_str().unwrap();
                if !path.starts_with('/') || !paths.insert(path.to_owned()) {
                    out.push(format!("mountPath {path} relative or repeated"));
                }
                let vname = mount["name"].as_str().unwrap();
                match volumes.get(vname) {
                    Some(keys) => {
                        if let Some(sub) = mount["subPath"].as_str()
                            && !keys.contains(sub)
                        {
                            out.push(format!("{path}: subPath {sub} is no key of {vname}"));
                        }
                    }
                    // The operator's own volumes.
                    None if ["workspace", "claude-home"].contains(&vname) => {}
                    None => out.push(format!("{path}: volume {vname} is not defined")),
                }
            }
        }
    }
    out
}

fn is_label(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_label)
}

fn is_key(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && text != "."
        && !text.starts_with("..")
}

fn k8s(dep: &Deployment, group: &str, env: &[(&str, &str)]) -> Value {
    let root = dep.root().to_str().unwrap();
    clawmd(
        dep.root(),
        &["mounts", group, "--format", "k8s", "--root", root],
        env,
    )
    .success()
    .json()
}

fn table(dep: &Deployment, group: &str, env: &[(&str, &str)]) -> Vec<Value> {
    let root = dep.root().to_str().unwrap();
    let run = clawmd(
        dep.root(),
        &["mounts", group, "--format", "json", "--root", root],
        env,
    );
    run.success().json().as_array().unwrap().clone()
}

/// The bytes a ConfigMap of `list` holds under `key`.
fn value_of(list: &Value, map: &str, key: &str) -> Vec<u8> {
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["kind"] == "ConfigMap" && item["metadata"]["name"] == map)
        .unwrap_or_else(|| panic!("no ConfigMap {map}"));
    if let Some(text) = item["data"][key].as_str() {
        return text.as_bytes().to_vec();
    }
    let text = item["binaryData"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{map} has no key {key}"));
    base64_decode(text)
}

/// Standard base64 with padding, decoded.
fn base64_decode(text: &str) -> Vec<u8> {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    for chunk in text.as_bytes().chunks(4) {
        let digits: Vec<u32> = chunk
            .iter()
            .take_while(|b| **b != b'=')
            .map(|b| ABC.iter().position(|a| a == b).expect("base64") as u32)
            .collect();
        let n = digits
            .iter()
            .enumerate()
            .fold(0, |n, (i, d)| n | d << (18 - 6 * i));
        for i in 0..digits.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

fn pod(list: &Value) -> &Value {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "Pod")
        .unwrap()
}

/// Checks that `list` is `table`: each read-only bind a read-only mount at its path with its
/// bytes (a folder: every file under it, by its path there), each read-write bind the
/// operator's volume; and returns how many files it compared.
fn matches_table(list: &Value, table: &[Value]) -> usize {
    let pod = pod(list);
    let mounts = pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap();
    assert_eq!(pod["spec"]["containers"][0]["name"], "agent");
    assert_eq!(mounts.len(), table.len(), "{mounts:#?}\n{table:#?}");
    let volumes = pod["spec"]["volumes"].as_array().unwrap();
    let mut compared = 0;
    for (bind, mount) in table.iter().zip(mounts) {
        assert_eq!(bind["container"], mount["mountPath"]);
        assert_eq!(bind["readonly"], mount["readOnly"], "{mount}");
        let host = Path::new(bind["host"].as_str().unwrap());
        if bind["readonly"] == false {
            assert!(["workspace", "claude-home"].contains(&mount["name"].as_str().unwrap()));
            assert!(mount.get("subPath").is_none());
            continue;
        }
        let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
        let map = volume["configMap"]["name"].as_str().unwrap();
        assert_eq!(volume["configMap"]["defaultMode"], 0o444);
        if !host.exists() {
            // A folder compose made nothing in (and did not create): an empty ConfigMap.
            assert!(mount.get("subPath").is_none(), "{mount}");
        } else if host.is_dir() {
            // A folder: the whole volume, no subPath, every file of it carried.
            assert!(mount.get("subPath").is_none(), "{mount}");
            for entry in walkdir::WalkDir::new(host).min_depth(1) {
                let entry = entry.unwrap();
                if !entry.file_type().is_file() {
                    continue;
                }
                let rel = entry.path().strip_prefix(host).unwrap().to_str().unwrap();
                let key = match volume["configMap"]["items"].as_array() {
                    Some(items) => items
                        .iter()
                        .find(|i| i["path"] == rel)
                        .unwrap_or_else(|| panic!("{rel} not projected"))["key"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    None => rel.to_owned(),
                };
                assert_eq!(
                    value_of(list, map, &key),
                    std::fs::read(entry.path()).unwrap()
                );
                compared += 1;
            }
        } else {
            let key = mount["subPath"]
                .as_str()
                .expect("a file bind is a subPath mount");
            assert_eq!(
                value_of(list, map, key),
                std::fs::read(host).unwrap(),
                "{key}"
            );
            compared += 1;
        }
    }
    compared
}

#[test]
fn the_list_is_the_mount_table_and_the_api_would_take_it_for_every_mode_and_backend() {
    let dep = Deployment::example();
    let mut compared = 0;
    for (delivery, provider) in [
        ("managed", "claude"),
        ("inline", "claude"),
        ("copy", "claude"),
        ("managed", "codex"),
        ("managed", "gemini"),
        ("managed", "opencode"),
    ] {
        let env = [("CLAWMD_DELIVERY", delivery), ("CLAWMD_PROVIDER", provider)];
        clawmd(dep.root(), &["compose", "--all"], &env).success();
        for group in ["main", "ops", "research"] {
            let list = k8s(&dep, group, &env);
            assert_eq!(
                problems(&list),
                Vec::<String>::new(),
                "{delivery} {provider} {group}"
            );
            compared += matches_table(&list, &table(&dep, group, &env));
            let pod = pod(&list);
            assert_eq!(pod["metadata"]["name"], group);
            let mounts = pod["spec"]["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap();
            let at = |path: &str| mounts.iter().find(|m| m["mountPath"] == path);
            if provider == "claude" && delivery == "managed" {
                // The managed policy: a whole-folder mount the kubelet keeps current.
                let managed = at("/etc/claude-code").expect("the managed folder");
                assert!(managed.get("subPath").is_none());
            }
            if delivery == "copy" {
                assert!(
                    at("/workspace/agent/.claude-fragments")
                        .unwrap()
                        .get("subPath")
                        .is_none()
                );
            }
            if provider == "opencode" {
                // A guard folder with a subfolder: projected through items.
                let config = at("/home/node/.config").unwrap();
                let volume = pod["spec"]["volumes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == config["name"])
                    .unwrap();
                assert_eq!(
                    volume["configMap"]["items"][0]["path"],
                    "opencode/.gitignore"
                );
            }
            // The Pod carries compose's spawn_digest.
            let report = clawmd(dep.root(), &["compose", group, "--format", "json"], &env)
                .success()
                .json();
            assert_eq!(
                pod["metadata"]["annotations"]["clawmd.dev/spawn-digest"],
                report["groups"][0]["spawn_digest"]
            );
        }
    }
    assert!(compared > 50, "{compared}");
}

#[test]
fn the_checks_catch_what_the_api_server_rejects() {
    // The validator is not vacuous: an unknown field, a bad name, an over-full ConfigMap and a
    // dangling reference are each found.
    let dep = Deployment::example();
    clawmd(dep.root(), &["compose", "main"], &[]).success();
    let list = k8s(&dep, "main", &[]);
    assert!(problems(&list).is_empty());
    let spoil = |f: &dyn Fn(&mut Value)| {
        let mut copy = list.clone();
        f(&mut copy);
        problems(&copy)
    };
    let pod_at = |list: &mut Value| -> usize {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .position(|i| i["kind"] == "Pod")
            .unwrap()
    };
    assert!(
        !spoil(&|l| {
            let p = pod_at(l);
            l["items"][p]["spec"]["containers"][0]["volumeMount"] = Value::Array(vec![]);
        })
        .is_empty()
    );
    assert!(
        !spoil(&|l| {
            let p = pod_at(l);
            l["items"][p]["spec"]["volumes"][0]["configMap"]["subPath"] = "x".into();
        })
        .is_empty()
    );
    assert!(
        !spoil(&|l| {
            let p = pod_at(l);
            l["items"][p]["metadata"]["name"] = "Main".into();
        })
        .is_empty()
    );
    assert!(!spoil(&|l| l["items"][0]["data"]["big"] = "x".repeat(LIMIT).into()).is_empty());
    assert!(!spoil(&|l| l["items"][0]["data"]["a/b"] = "x".into()).is_empty());
    assert!(
        !spoil(&|l| {
            l["items"].as_array_mut().unwrap().remove(0);
        })
        .is_empty()
    );
}

#[test]
fn names_are_dns_labels_stable_and_distinct_for_any_group_name() {
    let dep = Deployment::example();
    let long = "G".repeat(100);
    let names = [
        "Team_A.v2",
        "team-a-v2",
        "x",
        "9lives",
        long.as_str(),
        "a.b_c-D",
    ];
    let mut seen = BTreeSet::new();
    for name in names {
        let dep = dep.group_with(name);
        clawmd(dep.root(), &["compose", name], &[]).success();
        let list = k8s(dep, name, &[]);
        assert_eq!(problems(&list), Vec::<String>::new(), "{name}");
        let pod_name = pod(&list)["metadata"]["name"].as_str().unwrap().to_owned();
        assert!(is_label(&pod_name), "{name}: {pod_name}");
        assert_eq!(
            pod(&list)["metadata"]["annotations"]["clawmd.dev/group-name"],
            name
        );
        assert_eq!(k8s(dep, name, &[]), list, "stable");
        assert!(seen.insert(pod_name), "{name}: two groups, one Pod name");
    }
    assert!(seen.contains("team-a-v2") && seen.contains("x") && seen.contains("9lives"));
}

trait GroupWith {
    fn group_with(&self, name: &str) -> &Self;
}

impl GroupWith for Deployment {
    fn group_with(&self, name: &str) -> &Self {
        std::fs::create_dir_all(self.path(&format!("groups/{name}"))).unwrap();
        self.write(
            &format!("groups/{name}/container.json"),
            br#"{"skills": "all"}"#,
        );
        self
    }
}

#[test]
fn a_document_over_the_configmap_cap_is_refused_naming_group_size_and_limit() {
    let dep = Deployment::example();
    // A shared base of 1.2 MB: the managed document (budget 4 MiB) is over the 1 MiB cap.
    let base = "Guardrail line.\n".repeat(75_000);
    dep.write("container/CLAUDE.md", base.as_bytes());
    clawmd(dep.root(), &["compose", "main"], &[]).success();
    let root = dep.root().to_str().unwrap();
    let run = clawmd(
        dep.root(),
        &["mounts", "main", "--format", "k8s", "--root", root],
        &[],
    );
    assert_eq!(run.code(), 1, "{}", run.show());
    assert_eq!(run.stdout(), "", "no object printed");
    let err = run.stderr();
    assert!(err.contains("group main"), "{err}");
    assert!(err.contains("/etc/claude-code holds 12"), "{err}");
    assert!(err.contains("1048576 bytes"), "{err}");
    // The same in inline delivery: the entry point is a file bind.
    let env = [("CLAWMD_DELIVERY", "inline")];
    clawmd(dep.root(), &["compose", "main"], &env).success();
    let run = clawmd(
        dep.root(),
        &["mounts", "main", "--format", "k8s", "--root", root],
        &env,
    );
    assert_eq!(run.code(), 1, "{}", run.show());
    assert!(
        run.stderr().contains("/workspace/agent/CLAUDE.md holds 12"),
        "{}",
        run.stderr()
    );
}

#[test]
fn files_bound_as_files_are_spread_over_configmaps_each_under_the_cap() {
    // An inline document of ~700 kB and a container.json of ~600 kB: two ConfigMaps of
    // files, each under the cap, and each file still mounted whole by its key.
    let dep = Deployment::example();
    dep.write(
        "container/CLAUDE.md",
        "Base line.\n".repeat(64_000).as_bytes(),
    );
    let pad = "p".repeat(600_000);
    let config = format!(r#"{{"skills": "all", "imageTag": "{pad}"}}"#);
    dep.write("groups/ops/container.json", config.as_bytes());
    let env = [("CLAWMD_DELIVERY", "inline")];
    clawmd(dep.root(), &["compose", "ops"], &env).success();
    let list = k8s(&dep, "ops", &env);
    assert_eq!(problems(&list), Vec::<String>::new());
    let maps: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "ConfigMap")
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(maps, ["ops-files", "ops-files-2"]);
    assert!(matches_table(&list, &table(&dep, "ops", &env)) >= 2);
}

#[test]
fn link_delivery_and_a_group_not_composed_are_refused() {
    let dep = Deployment::example();
    let root = dep.root().to_str().unwrap();
    let args = ["mounts", "main", "--format", "k8s", "--root", root];
    let run = clawmd(dep.root(), &args, &[]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("clawmd compose main"),
        "{}",
        run.stderr()
    );
    let env = [("CLAWMD_DELIVERY", "link")];
    clawmd(dep.root(), &["compose", "main"], &env).success();
    let run = clawmd(dep.root(), &args, &env);
    assert_eq!(run.code(), 1);
    assert!(run.stderr().contains("symbolic links"), "{}", run.stderr());
    assert_eq!(run.stdout(), "");
    // Composed with other settings than asked: refused, not a List of stale bytes.
    let run = clawmd(dep.root(), &args, &[("CLAWMD_DELIVERY", "copy")]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("not what `clawmd compose main` would write")
    );
}

/// Route 2's manifest passes the strict Pod schema, and its agent container's mounts are the
/// mount table of `clawmd mounts main --root /deploy` with each host path written as a volume
/// (the rule the doc gives), in the table's order, with the same modes.
#[test]
fn the_composer_pod_of_the_docs_is_valid_and_is_the_mount_table() {
    let pod = composer_pod();
    let errors: Vec<String> = schema("Pod")
        .iter_errors(&pod)
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errors, Vec::<String>::new());
    let dep = Deployment::example();
    clawmd(dep.root(), &["compose", "main"], &[]).success();
    let root = dep.root().canonicalize().unwrap();
    let state = root.join("groups/.clawmd");
    let group = root.join("groups/main");
    let mounts = pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap();
    let table = table(&dep, "main", &[]);
    assert_eq!(mounts.len(), table.len());
    for (bind, mount) in table.iter().zip(mounts) {
        let host = Path::new(bind["host"].as_str().unwrap());
        let (volume, sub) = match (host.strip_prefix(&state), host.strip_prefix(&group)) {
            (Ok(rel), _) => ("clawmd-state", rel.to_str().unwrap().to_owned()),
            (_, Ok(rel)) => ("workspace", rel.to_str().unwrap().to_owned()),
            _ => panic!("{host:?} is in no volume of the pod"),
        };
        assert_eq!(mount["mountPath"], bind["container"]);
        assert_eq!(mount["name"], volume, "{mount}");
        assert_eq!(mount["subPath"].as_str().unwrap_or(""), sub, "{mount}");
        assert_eq!(
            mount["readOnly"].as_bool().unwrap_or(false),
            bind["readonly"],
            "{mount}"
        );
    }
    // The init container sees the deployment as the table's host side names it.
    let init = &pod["spec"]["initContainers"][0];
    let init_mounts: Vec<(&str, &str)> = init["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["mountPath"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(init_mounts.contains(&("workspace", "/deploy/groups/main")));
    assert!(init_mounts.contains(&("clawmd-state", "/deploy/groups/.clawmd")));
    assert_eq!(init["command"][2], "/deploy");
}

/// Copy delivery with nothing to copy: the empty `.claude-fragments` is an empty ConfigMap
/// mounted whole (the kubelet fills it when a fragment comes).
#[test]
fn an_empty_folder_is_an_empty_configmap() {
    let dep = Deployment::new().group("bare", Some("{}"));
    let env = [("CLAWMD_DELIVERY", "copy")];
    clawmd(dep.root(), &["compose", "bare"], &env).success();
    let list = k8s(&dep, "bare", &env);
    assert_eq!(problems(&list), Vec::<String>::new());
    matches_table(&list, &table(&dep, "bare", &env));
    let fragments = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "bare-workspace-agent-claude-fragments")
        .expect("the fragments' ConfigMap");
    assert!(fragments.get("data").is_none(), "{fragments}");
}

/// A fragment whose file name is no ConfigMap key (an MCP server named with a space) is
/// projected under its own name through `items`; a file of the host's own managed policy
/// (`hostManagedDir`) that is not UTF-8 travels in `binaryData`, byte for byte.
#[test]
fn odd_names_and_binary_files_are_carried_as_they_are() {
    let dep = Deployment::example();
    dep.write("host-managed/blob.bin", b"\xff\xfe\x00binary\x80");
    dep.write("clawmd.json", br#"{"hostManagedDir": "host-managed"}"#);
    dep.write(
        "groups/ops/container.json",
        br#"{"mcpServers": {"a b": {"instructions": "ODD SERVER"}}}"#,
    );
    clawmd(dep.root(), &["compose", "main"], &[]).success();
    let list = k8s(&dep, "main", &[]);
    assert_eq!(problems(&list), Vec::<String>::new());
    assert!(matches_table(&list, &table(&dep, "main", &[])) >= 3);
    let map = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "main-etc-claude-code")
        .unwrap();
    assert_eq!(map["binaryData"]["blob.bin"], "//4AYmluYXJ5gA==");

    let env = [("CLAWMD_DELIVERY", "copy")];
    clawmd(dep.root(), &["compose", "ops"], &env).success();
    let list = k8s(&dep, "ops", &env);
    assert_eq!(problems(&list), Vec::<String>::new());
    let volume = pod(&list)["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "clawmd-workspace-agent-claude-fragments")
        .unwrap();
    let items = volume["configMap"]["items"].as_array().expect("items");
    let odd = items
        .iter()
        .find(|i| i["path"] == "mcp-a%20b.md")
        .unwrap_or_else(|| panic!("{items:?}"));
    assert_ne!(odd["key"], "mcp-a%20b.md");
    // Byte for byte, through the items (matches_table reads each file by its path).
    assert!(matches_table(&list, &table(&dep, "ops", &env)) >= 3);
}
