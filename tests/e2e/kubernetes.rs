//! Agents on Kubernetes (issue 37), realized on one machine as the kubelet would: the Pod of
//! `clawmd mounts GROUP --format k8s` becomes a bubblewrap sandbox whose configMap volumes are
//! folders in the kubelet's atomic-writer layout (a timestamped folder holding the files,
//! `..data` a link to it, each top-level name a link through `..data`; an update writes a new
//! timestamped folder and renames a new `..data` link over the old), mounted whole where the
//! Pod mounts them whole and by the resolved file where it mounts a `subPath` (what the
//! kubelet binds); the `workspace` volume is the group folder (a hostPath), and the home an
//! emptyDir. The real Claude Code runs inside: the guardrails load as managed policy, the
//! agent can neither change nor plant files in them, and a recompose whose ConfigMap is
//! swapped in the kubelet's way reaches the running pod's next session (while a `subPath`
//! file does not, as compose's `running_container` says); Codex, Gemini CLI and opencode get
//! their documents and guard files the same way.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::Deployment;
use crate::support::api::ApiServer;
use crate::support::backends::{self, Backend, run_backend};
use crate::support::running::RunningSandbox;
use crate::support::sandbox::{Bind, Consumer, Sandbox, memory_block, tools};

const STEP_LIMIT: Duration = Duration::from_secs(180);

/// The List for `group` (the real binary).
fn list(dep: &Deployment, group: &str, env: &[(&str, &str)]) -> Value {
    let root = dep.root().to_str().unwrap();
    crate::support::clawmd(
        dep.root(),
        &["mounts", group, "--format", "k8s", "--root", root],
        env,
    )
    .success()
    .json()
}

fn compose(dep: &Deployment, group: &str, env: &[(&str, &str)]) -> Value {
    let root = dep.root().to_str().unwrap();
    let run = crate::support::clawmd(
        dep.root(),
        &["compose", group, "--format", "json", "--root", root],
        env,
    );
    run.success().json()["groups"][0].clone()
}

/// One node's kubelet for one Pod: its configMap volumes on disk.
struct Kubelet {
    dir: tempfile::TempDir,
    /// How many payloads were written (the timestamped folders' names).
    writes: usize,
}

impl Kubelet {
    fn new() -> Self {
        Kubelet {
            dir: tempfile::tempdir().unwrap(),
            writes: 0,
        }
    }

    fn volume_dir(&self, volume: &str) -> PathBuf {
        self.dir
            .path()
            .join("volumes/kubernetes.io~configmap")
            .join(volume)
    }

    /// Writes (or updates) every configMap volume of the Pod in `list` as the kubelet's
    /// AtomicWriter does.
    fn sync(&mut self, list: &Value) {
        let maps: BTreeMap<&str, &Value> = items(list)
            .filter(|i| i["kind"] == "ConfigMap")
            .map(|i| (i["metadata"]["name"].as_str().unwrap(), i))
            .collect();
        for volume in pod(list)["spec"]["volumes"].as_array().unwrap() {
            let source = &volume["configMap"];
            let map = maps[source["name"].as_str().unwrap()];
            let mode = source["defaultMode"].as_u64().unwrap() as u32;
            // The payload: path -> bytes (items, or every key as itself).
            let mut payload: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            let value = |key: &str| map["data"][key].as_str().unwrap().as_bytes().to_vec();
            match source["items"].as_array() {
                Some(items) => {
                    for item in items {
                        payload.insert(
                            item["path"].as_str().unwrap().to_owned(),
                            value(item["key"].as_str().unwrap()),
                        );
                    }
                }
                None => {
                    for key in map["data"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, _)| k)
                    {
                        payload.insert(key.clone(), value(key));
                    }
                }
            }
            self.write(
                &self.volume_dir(volume["name"].as_str().unwrap()),
                &payload,
                mode,
            );
        }
    }

    /// AtomicWriter.Write: a new `..<timestamp>` folder, `..data_tmp` pointing at it renamed
    /// over `..data`, a link per top-level name through `..data`, the old folder removed.
    fn write(&mut self, dir: &Path, payload: &BTreeMap<String, Vec<u8>>, mode: u32) {
        self.writes += 1;
        std::fs::create_dir_all(dir).unwrap();
        let stamp = format!(
            "..2026_12_01_18_00_{:02}.{}",
            self.writes,
            1000 + self.writes
        );
        let ts = dir.join(&stamp);
        std::fs::create_dir(&ts).unwrap();
        for (path, bytes) in payload {
            let file = ts.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, bytes).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let old = std::fs::read_link(dir.join("..data")).ok();
        let tmp = dir.join("..data_tmp");
        symlink(&stamp, &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("..data")).unwrap();
        let top: std::collections::BTreeSet<String> = payload
            .keys()
            .map(|p| p.split('/').next().unwrap().to_owned())
            .collect();
        for name in &top {
            let link = dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new("..data").join(name), &link).unwrap();
            }
        }
        // Links to names no longer in the payload go.
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if !name.starts_with("..") && !top.contains(&name) {
                std::fs::remove_file(dir.join(&name)).unwrap();
            }
        }
        if let Some(old) = old {
            std::fs::remove_dir_all(dir.join(old)).unwrap();
        }
    }

    /// The container's mounts of the Pod: `workspace` at the group folder (a hostPath), a
    /// whole configMap volume as its folder, a `subPath` as the file it resolves to now (the
    /// kubelet binds the resolved path).
    fn binds(&self, list: &Value, workspace: &Path) -> Vec<Bind> {
        let mounts = pod(list)["spec"]["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap();
        mounts
            .iter()
            .map(|mount| {
                let name = mount["name"].as_str().unwrap();
                let host = match (name, mount["subPath"].as_str()) {
                    ("workspace", _) => workspace.to_owned(),
                    (_, None) => self.volume_dir(name),
                    (_, Some(key)) => {
                        std::fs::canonicalize(self.volume_dir(name).join(key)).unwrap()
                    }
                };
                Bind {
                    host,
                    container: PathBuf::from(mount["mountPath"].as_str().unwrap()),
                    readonly: mount["readOnly"].as_bool().unwrap(),
                }
            })
            .collect()
    }
}

fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list["items"].as_array().unwrap().iter()
}

fn pod(list: &Value) -> &Value {
    items(list).find(|i| i["kind"] == "Pod").unwrap()
}

/// The Pod's container, its home the emptyDir.
fn sandbox(binds: Vec<Bind>, scratch: &Path) -> Sandbox {
    Sandbox::in_scratch(binds, scratch, "main")
}

#[test]
fn the_guardrails_load_as_managed_policy_and_the_agent_cannot_touch_them() {
    let dep = Deployment::example();
    compose(&dep, "main", &[]);
    let list = list(&dep, "main", &[]);
    let mut kubelet = Kubelet::new();
    kubelet.sync(&list);
    // The layout is the kubelet's: links through `..data`.
    let managed = kubelet.volume_dir("clawmd-etc-claude-code");
    assert_eq!(
        std::fs::read_link(managed.join("CLAUDE.md")).unwrap(),
        Path::new("..data/CLAUDE.md")
    );
    let scratch = tempfile::tempdir().unwrap();
    let sandbox = sandbox(
        kubelet.binds(&list, &dep.path("groups/main")),
        scratch.path(),
    );

    for consumer in [Consumer::Cli, Consumer::sdk()] {
        let block = memory_block(&sandbox, tools(), consumer, STEP_LIMIT).unwrap();
        assert!(
            block.contains(
                "Contents of /etc/claude-code/CLAUDE.md (organization-managed policy instructions)"
            ),
            "{consumer}: {block}"
        );
        let base = dep.read("container/CLAUDE.md");
        let first = base.lines().next().unwrap();
        assert!(block.contains(first), "{consumer}: {block}");
        assert!(block.contains("Read-only access to the team's notes database."));
        assert!(
            block.contains("The team prefers answers in British English."),
            "{block}"
        );
        eprintln!("{consumer}: the guardrails loaded as managed policy from the configMap volume");
    }

    // The agent: no write, no rename, no removal, no new file in the managed folder, its
    // `..data` or its timestamped folder, nor over the subPath files; the workspace is its.
    let script = r#"
try() { if sh -c "$1" 2>/dev/null; then echo "BREACH: $1"; fi; }
for f in /etc/claude-code/CLAUDE.md /etc/claude-code/managed-settings.json /workspace/agent/CLAUDE.md /workspace/agent/container.json; do
  [ -e "$f" ] || echo "MISSING $f"
  try "echo x >> $f"
  try ": > $f"
  try "rm -f $f && [ ! -e $f ]"
  try "mv $f $f.moved"
done
try "echo x > /etc/claude-code/planted.md"
try "mkdir -p /etc/claude-code/.claude/rules && echo x > /etc/claude-code/.claude/rules/p.md"
try "ln -sfn /tmp /etc/claude-code/..data"
try "rm -f /etc/claude-code/..data"
try "echo x > /etc/claude-code/..data/CLAUDE.md"
try "for d in /etc/claude-code/..2*; do echo x > \$d/planted.md; done"
try "rm -rf /etc/claude-code && [ ! -e /etc/claude-code ]"
echo ok > /workspace/agent/e2e-canary && echo CANARY-WRITTEN
rm -f /workspace/agent/e2e-canary
"#;
    let api = ApiServer::start();
    let output =
        crate::support::output_within(&mut sandbox.shell(tools(), &api, script), STEP_LIMIT)
            .unwrap();
    api.stop();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.contains("CANARY-WRITTEN"), "the script ran: {out}");
    assert!(!out.contains("BREACH") && !out.contains("MISSING"), "{out}");
    let block = memory_block(&sandbox, tools(), Consumer::Cli, STEP_LIMIT).unwrap();
    assert!(!block.contains("planted"), "{block}");
}

/// A recompose reaches a running pod once the kubelet swaps the ConfigMap in: at the next
/// session in managed delivery (a whole-folder mount; compose says `next-session` and the
/// Pod's spawn digest stays), never in inline delivery (the entry point is a `subPath`
/// file; compose says `after-restart` and the Pod's spawn digest moves: a new pod).
#[test]
fn a_recompose_swapped_in_by_the_kubelet_reaches_the_running_pods_next_session() {
    for (delivery, live) in [("managed", true), ("inline", false)] {
        let dep = Deployment::example();
        let env = [("CLAWMD_DELIVERY", delivery)];
        compose(&dep, "main", &env);
        let before = list(&dep, "main", &env);
        let mut kubelet = Kubelet::new();
        kubelet.sync(&before);
        let scratch = tempfile::tempdir().unwrap();
        let binds = kubelet.binds(&before, &dep.path("groups/main"));
        let mut running = RunningSandbox::start(sandbox(binds, scratch.path()));
        let first = running.session();
        assert!(first.contains("Shared base for every agent"), "{first}");
        assert!(!first.contains("RECOMPOSED-7f3"));

        let base = dep.read("container/CLAUDE.md");
        dep.write(
            "container/CLAUDE.md",
            format!("{base}\nRECOMPOSED-7f3\n").as_bytes(),
        );
        let report = compose(&dep, "main", &env);
        let after = list(&dep, "main", &env);
        let digest =
            |l: &Value| pod(l)["metadata"]["annotations"]["clawmd.dev/spawn-digest"].clone();
        kubelet.sync(&after);
        let second = running.session();
        match live {
            true => {
                assert_eq!(report["running_container"], "next-session", "{report}");
                assert_eq!(digest(&before), digest(&after));
                assert_eq!(pod(&before)["spec"], pod(&after)["spec"], "the same Pod");
                assert!(second.contains("RECOMPOSED-7f3"), "{delivery}: {second}");
            }
            false => {
                assert_eq!(report["running_container"], "after-restart", "{report}");
                assert_ne!(digest(&before), digest(&after));
                assert!(!second.contains("RECOMPOSED-7f3"), "{delivery}: {second}");
                assert_eq!(
                    first, second,
                    "the subPath file is the one the pod started with"
                );
            }
        }
        eprintln!(
            "{delivery}: after the kubelet's swap the running pod's next session saw the recompose: {live}"
        );
        // A new pod (the kubelet binds the new subPath file) sees it in every mode.
        let fresh = sandbox(
            kubelet.binds(&after, &dep.path("groups/main")),
            scratch.path(),
        );
        let block = memory_block(&fresh, tools(), Consumer::Cli, STEP_LIMIT).unwrap();
        assert!(block.contains("RECOMPOSED-7f3"), "{delivery}: {block}");
    }
}

const BASE: &str = "K8S-BASE-MARK-9c2";
const MCP: &str = "K8S-MCP-MARK-9c2";
const AGENT: &str = "K8S-AGENT-MARK-9c2";
/// A `BeforeModel` hook that swaps the loaded context for the agent's mark (measured to drop
/// the document without the guard: tests/e2e/backends.rs).
const GEMINI_HOOK: &str = r#"let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const i=JSON.parse(s);const m=i.llm_request.messages.map(x=>({...x,content:String(x.content).replace(/<loaded_context>[\s\S]*<\/loaded_context>/,'K8S-AGENT-MARK-9c2')}));process.stdout.write(JSON.stringify({hookSpecificOutput:{hookEventName:'BeforeModel',llm_request:{messages:m}}}))})"#;
const GEMINI_AUTH: &str = r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#;

/// Codex, Gemini CLI and opencode in pods: the document reaches the model through the
/// `subPath` entry point, and the guard (Codex's `AGENTS.override.md` and managed config,
/// Gemini's system settings, opencode's config folders, all from ConfigMaps) holds against
/// the agent's own file planted in the workspace.
#[test]
fn the_other_backends_get_their_documents_and_guards_from_configmaps() {
    let mut dep = Deployment::new()
        .file("container/CLAUDE.md", &format!("# Shared base\n{BASE}\n"))
        .file("runner/gemini-system.json", GEMINI_AUTH)
        .file(
            "clawmd.json",
            r#"{"geminiSystemSettings": "runner/gemini-system.json"}"#,
        );
    for backend in Backend::ALL {
        let config = format!(
            r#"{{"provider": "{}", "mcpServers": {{"notes": {{"instructions": "{MCP}: use notes"}}}}}}"#,
            backend.provider()
        );
        dep = dep.group(backend.provider(), Some(&config));
    }
    let root = dep.root().to_str().unwrap();
    crate::support::clawmd(dep.root(), &["compose", "--all", "--root", root], &[]).success();
    for backend in Backend::ALL {
        let group = backend.provider();
        let list = list(&dep, group, &[]);
        let mut kubelet = Kubelet::new();
        kubelet.sync(&list);
        let scratch = tempfile::tempdir().unwrap();
        let workspace = scratch.path().join("workspace");
        crate::support::tree::copy_tree(&dep.path(&format!("groups/{group}")), &workspace);
        // What the agent planted to take the document away (each measured to, unguarded).
        let plant = |rel: &str, text: &str| {
            let path = workspace.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        match backend {
            Backend::Codex => plant("AGENTS.override.md", AGENT),
            Backend::Gemini => {
                plant("hook.js", GEMINI_HOOK);
                plant(
                    ".gemini/settings.json",
                    r#"{"hooksConfig":{"enabled":true},"hooks":{"BeforeModel":[{"matcher":"*","hooks":[{"type":"command","command":"node /workspace/agent/hook.js"}]}]}}"#,
                );
            }
            Backend::Opencode => plant(
                ".opencode/plugin/p.js",
                r#"export const P = async () => ({ "experimental.chat.system.transform": async (i, o) => { o.system.length = 0; o.system.push("K8S-AGENT-MARK-9c2"); } });"#,
            ),
        }
        // The home is an emptyDir, mounted before the binds under it.
        let home = scratch.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut binds = vec![backends::Bind::rw(&home, backends::HOME)];
        for bind in kubelet.binds(&list, &workspace) {
            binds.push(backends::Bind {
                host: bind.host,
                container: bind.container,
                readonly: bind.readonly,
            });
        }
        let run = run_backend(backend, &binds, &[]);
        assert!(run.output.status.success(), "{backend}: {}", run.describe());
        for marker in [BASE, MCP] {
            assert!(
                run.reached(marker),
                "{backend}: {marker} missing\n{}",
                run.describe()
            );
        }
        assert!(
            !run.sent().contains(AGENT),
            "{backend}: the agent's file won\n{}",
            run.describe()
        );
        eprintln!(
            "{backend}: the document reached the model from the ConfigMaps; the planted file did nothing"
        );
    }
}

/// Route 2 of docs/kubernetes.md, run: the init container of the doc's Pod (this build's
/// clawmd, the deployment's `container/` where the composer image has it) composes over the
/// Pod's volumes (the workspace a host folder standing for the PVC, the two emptyDirs fresh
/// folders); then the agent container, built from the doc's mounts (a `subPath` as the path
/// it names in its volume), runs the real Claude Code: the guardrails load as managed policy
/// and the agent's own memory from its volume.
#[test]
fn route_two_the_composer_in_the_pod_composes_before_the_agent_starts() {
    let dep = Deployment::example();
    let pod = crate::support::k8s::composer_pod();
    let scratch = tempfile::tempdir().unwrap();
    let volume = |name: &str| -> PathBuf {
        let dir = scratch.path().join("volumes").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    // The PVC: the group folder as the operator provisioned it.
    crate::support::tree::copy_tree(&dep.path("groups/main"), &volume("workspace"));
    let init = &pod["spec"]["initContainers"][0];
    let mut binds = vec![
        Bind {
            host: PathBuf::from(env!("CARGO_BIN_EXE_clawmd")),
            container: PathBuf::from(init["command"][0].as_str().unwrap()),
            readonly: true,
        },
        Bind {
            host: dep.path("container"),
            container: PathBuf::from("/deploy/container"),
            readonly: true,
        },
    ];
    for mount in init["volumeMounts"].as_array().unwrap() {
        binds.push(Bind {
            host: volume(mount["name"].as_str().unwrap()),
            container: PathBuf::from(mount["mountPath"].as_str().unwrap()),
            readonly: false,
        });
    }
    // bwrap needs the working directory it is told (the agent's); the init has no use for it.
    binds.push(Bind {
        host: volume("init-cwd"),
        container: PathBuf::from("/workspace/agent"),
        readonly: false,
    });
    let init_box = sandbox(binds, &scratch.path().join("init"));
    let command: Vec<&str> = init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let api = ApiServer::start();
    let output = crate::support::output_within(
        &mut init_box.shell(tools(), &api, &command.join(" ")),
        STEP_LIMIT,
    )
    .unwrap();
    api.stop();
    assert!(
        output.status.success(),
        "the init container failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        volume("clawmd-state")
            .join("binds/main/managed/CLAUDE.md")
            .is_file()
    );

    // The agent container, from the doc's mounts.
    let agent = &pod["spec"]["containers"][0];
    let binds: Vec<Bind> = agent["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mount| {
            let mut host = volume(mount["name"].as_str().unwrap());
            if let Some(sub) = mount["subPath"].as_str() {
                host = host.join(sub);
            }
            Bind {
                host,
                container: PathBuf::from(mount["mountPath"].as_str().unwrap()),
                readonly: mount["readOnly"].as_bool().unwrap_or(false),
            }
        })
        .collect();
    let agent_box = sandbox(binds, &scratch.path().join("agent"));
    let block = memory_block(&agent_box, tools(), Consumer::Cli, STEP_LIMIT).unwrap();
    assert!(
        block.contains(
            "Contents of /etc/claude-code/CLAUDE.md (organization-managed policy instructions)"
        ),
        "{block}"
    );
    let base = dep.read("container/CLAUDE.md");
    assert!(block.contains(base.lines().next().unwrap()), "{block}");
    assert!(
        block.contains("The team prefers answers in British English."),
        "{block}"
    );
    eprintln!(
        "route 2: the init container composed; the agent loaded the guardrails as managed policy"
    );
}

/// The Pod of the List is an overlay: kustomize (built into kubectl, run offline) merges it as
/// a strategic-merge patch into the operator's own Pod — the operator's image, command,
/// security context, home volume and `workspace` PVC stay, clawmd's mounts and configMap
/// volumes join them — and the result passes the strict Pod schema.
#[test]
fn the_pod_merges_into_the_operators_pod_as_a_kustomize_patch() {
    let kubectl = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("kubectl"))
                .find(|bin| bin.is_file())
        })
        .expect("kubectl (with its built-in kustomize, 1.14 or later) on PATH: install it to run this test");
    let dep = Deployment::example();
    compose(&dep, "main", &[]);
    let list = list(&dep, "main", &[]);
    let dir = tempfile::tempdir().unwrap();
    let maps: Vec<&Value> = items(&list).filter(|i| i["kind"] == "ConfigMap").collect();
    let write = |name: &str, value: &Value| {
        std::fs::write(dir.path().join(name), serde_json::to_vec(value).unwrap()).unwrap()
    };
    write(
        "configmaps-main.json",
        &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": maps}),
    );
    write("pod-main.json", pod(&list));
    std::fs::write(
        dir.path().join("agent-main.yaml"),
        r#"apiVersion: v1
kind: Pod
metadata:
  name: main
spec:
  securityContext:
    runAsUser: 1000
  containers:
    - name: agent
      image: registry.example/agent:latest
      command: ["node", "/app/agent-runner.js"]
      volumeMounts:
        - name: home
          mountPath: /home/node
  volumes:
    - name: workspace
      persistentVolumeClaim:
        claimName: main
    - name: home
      emptyDir: {}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources:\n  - agent-main.yaml\n  - configmaps-main.json\npatches:\n  - path: pod-main.json\n",
    )
    .unwrap();
    let output = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merged = crate::support::k8s::yaml_documents(&String::from_utf8(output.stdout).unwrap());
    assert_eq!(merged.len(), maps.len() + 1, "the ConfigMaps and one Pod");
    let pod_out = merged.iter().find(|o| o["kind"] == "Pod").unwrap();
    let errors: Vec<String> = crate::support::k8s::schema("Pod")
        .iter_errors(pod_out)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert_eq!(errors, Vec::<String>::new());
    let agent = &pod_out["spec"]["containers"][0];
    assert_eq!(agent["image"], "registry.example/agent:latest");
    assert_eq!(agent["command"][0], "node");
    assert_eq!(pod_out["spec"]["securityContext"]["runAsUser"], 1000);
    let mounts: Vec<&str> = agent["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    let ours = pod(&list)["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap();
    for mount in ours {
        let path = mount["mountPath"].as_str().unwrap();
        let merged_mount = agent["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("{path} lost in the merge: {mounts:?}"));
        assert_eq!(merged_mount, mount);
    }
    assert!(mounts.contains(&"/home/node"));
    let volumes: Vec<&str> = pod_out["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for name in [
        "workspace",
        "home",
        "clawmd-files",
        "clawmd-etc-claude-code",
    ] {
        assert!(volumes.contains(&name), "{name}: {volumes:?}");
    }
    let workspace = pod_out["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "workspace")
        .unwrap();
    assert_eq!(workspace["persistentVolumeClaim"]["claimName"], "main");
    eprintln!("kustomize merged clawmd's Pod into the operator's: {mounts:?}");
}
