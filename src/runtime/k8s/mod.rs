//! `clawmd mounts GROUP --format k8s`: the group's mount table ([`full_table`], the one
//! `clawmd mounts` prints) as Kubernetes objects, a v1 `List` of
//!
//! * ConfigMaps carrying every file the table binds read-only, with the bytes the group's plan
//!   composed (its `container.json` as compose read it);
//! * one v1 `Pod` named after the group, whose container `agent` mounts them where the table
//!   binds them: a folder bind is a whole-folder configMap volume (no `subPath`), which the
//!   kubelet keeps current (a new timestamped folder, then `..data` renamed over); a file bind
//!   is a `subPath` mount of one key, which never changes in a running pod (kubernetes#50345)
//!   just as a file bind keeps its inode, so `spawn_digest` and `running_container` mean the
//!   same for a pod as for a container (the Pod carries the digest as an annotation); every
//!   one read-only. The read-write binds are the operator's volumes, named `workspace` (the
//!   group folder) and `claude-home` (`claudeHome`), which the Pod mounts but does not define.
//!
//! The Pod holds only what clawmd decides (no image, no command): it merges into the
//! operator's own Pod the way a strategic-merge patch or a kustomize overlay does (containers
//! by `name`, volumes by `name`, volume mounts by `mountPath`).
//!
//! A ConfigMap holds at most 1 MiB of data ([`CONFIGMAP_LIMIT`]); the files bound as files are
//! spread over as many ConfigMaps as they need, while a folder's files stay in one (its whole
//! folder is one volume, kept current as one); what does not fit is refused
//! ([`GroupError::OverConfigMapLimit`]), never printed as an object the API server would reject.

pub mod names;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::disk::deployment::{Observation, checked_group_dir, observe, read_sources};
use crate::error::{Error, GroupError};
use crate::file_kind::FileKind;
use crate::input::config::{MAX_CONFIG_BYTES, is_own_config};
use crate::input::layout::{Layout, names as file_names};
use crate::plan::Content;
use crate::plan::delivery::guard::GuardSettings;
use crate::plan::target::{Delivery, DeliverySettings};
use crate::runtime::mounts::{full_table, spawn};

/// The most data a ConfigMap holds (the API server's `MaxSecretSize`: the bytes of every
/// value of `data` and `binaryData`).
pub const CONFIGMAP_LIMIT: u64 = 1_048_576;

/// The name of the Pod's container that runs the agent.
pub const AGENT_CONTAINER: &str = "agent";

/// The operator's volume holding the group folder, mounted read-write at the workspace.
pub const WORKSPACE_VOLUME: &str = "workspace";

/// The operator's volume holding the agent's `~/.claude` (`claudeHome`), read-write.
pub const CLAUDE_HOME_VOLUME: &str = "claude-home";

/// The mode of every file clawmd's volumes hold: read-only to everyone (Gemini CLI reads its
/// system settings only when neither group nor others can write them).
pub const FILE_MODE: u32 = 0o444;

/// The label every object carries (`kubectl apply --prune -l app.kubernetes.io/managed-by=clawmd`).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "clawmd");

/// The label naming the group (its DNS label).
pub const GROUP_LABEL: &str = "clawmd.dev/group";

/// The Pod's annotation holding the group's name as clawmd knows it.
pub const GROUP_NAME_ANNOTATION: &str = "clawmd.dev/group-name";

/// The Pod's annotation holding the group's `spawn_digest`: a running pod whose annotation
/// differs must be replaced to see the change.
pub const SPAWN_DIGEST_ANNOTATION: &str = "clawmd.dev/spawn-digest";

/// A v1 `List`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct K8sList {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub items: Vec<K8sObject>,
}

/// One object of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum K8sObject {
    ConfigMap(ConfigMap),
    Pod(Pod),
}

/// `metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectMeta {
    pub name: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A v1 `ConfigMap`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    /// UTF-8 files.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    /// Other files, base64.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub binary_data: BTreeMap<String, String>,
    /// The bytes of its data, as the API server counts them (decoded).
    #[serde(skip)]
    pub size: u64,
}

/// A v1 `Pod` (only what clawmd decides).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodSpec {
    pub containers: Vec<Container>,
    pub volumes: Vec<Volume>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: &'static str,
    pub volume_mounts: Vec<VolumeMount>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    pub read_only: bool,
    /// One key of a configMap volume, mounted as a file (never updated in a running pod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    pub config_map: ConfigMapVolume,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolume {
    pub name: String,
    pub default_mode: u32,
    /// Where each key goes, when a file's path is not its key (a file in a subfolder, a name
    /// no key can be); `None`: every key is a file of that name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<KeyToPath>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyToPath {
    pub key: String,
    pub path: String,
}

/// What one read-only bind carries.
#[derive(Debug)]
enum Carried {
    /// A file: its bytes.
    File(Vec<u8>),
    /// A folder: its files by path relative to it.
    Folder(Vec<(String, Vec<u8>)>),
}

/// The List of `group` of the deployment at `layout`, with the deployment's delivery
/// `settings` and `guards` (the same resolution as `clawmd mounts`). The group must be
/// composed with these settings, exactly as its plan says: the ConfigMaps carry the plan's
/// bytes.
pub fn k8s_list(
    layout: &Layout,
    group: &str,
    settings: &DeliverySettings,
    guards: &GuardSettings,
) -> Result<K8sList, Error> {
    let wrap = |source: GroupError| Error::Group {
        group: group.to_owned(),
        source: Box::new(source),
    };
    let (sources, _) = read_sources(layout)?;
    let path = checked_group_dir(layout, group).map_err(wrap)?;
    let seen = observe(layout, &sources, &path, settings, None).map_err(wrap)?;
    list_of(layout, group, &seen, guards).map_err(wrap)
}

/// [`k8s_list`] of the group observed as `seen`.
pub fn list_of(
    layout: &Layout,
    group: &str,
    seen: &Observation,
    guards: &GuardSettings,
) -> Result<K8sList, GroupError> {
    let plan = &seen.plan;
    if plan.target.delivery == Delivery::Link {
        return Err(GroupError::NotForKubernetes {
            group: group.to_owned(),
            reason: "link delivery's fragments are symbolic links into /app, which a ConfigMap cannot carry".to_owned(),
            fix: "use managed delivery (the default) or copy delivery, whose fragments are files, or compose in the pod (docs/kubernetes.md)",
        });
    }
    // What the ConfigMaps carry is what compose wrote: a group not composed with these
    // settings (or changed since) is refused as `clawmd mounts` refuses it.
    if !seen.all_kept() {
        return Err(GroupError::NotUpToDate {
            group: group.to_owned(),
        });
    }
    let config = match seen.dir.kind(file_names::CONFIG)? {
        Some(FileKind::File) => seen.dir.read_file(file_names::CONFIG, MAX_CONFIG_BYTES)?,
        _ => None,
    }
    .filter(|bytes| is_own_config(Some(bytes)));
    let table = full_table(
        layout,
        group,
        &plan.target,
        config.is_some(),
        &guards.agent_home,
    );
    let config_host = layout.group_dir(group).join(file_names::CONFIG);
    let planned = |host: &Path| -> Result<Option<Carried>, GroupError> {
        let mut folder = Vec::new();
        for entry in &plan.entries {
            let at = entry.path.host_path(layout, group);
            let bytes = match &entry.content {
                Content::File(bytes) => bytes,
                Content::Symlink(_) if at == host || at.starts_with(host) => {
                    return Err(not_for_k8s(group, &at));
                }
                _ => continue,
            };
            if at == host {
                return Ok(Some(Carried::File(bytes.clone())));
            }
            if let Ok(rel) = at.strip_prefix(host) {
                folder.push((rel.to_string_lossy().into_owned(), bytes.clone()));
            }
        }
        Ok(match folder.is_empty() {
            true => None,
            false => Some(Carried::Folder(folder)),
        })
    };

    let pod_name = names::dns_label(group, names::MAX_LABEL);
    let labels: BTreeMap<String, String> = [
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
        (GROUP_LABEL.to_owned(), pod_name.clone()),
    ]
    .into();
    let meta = |name: String| ObjectMeta {
        name,
        labels: labels.clone(),
        annotations: BTreeMap::new(),
    };

    let mut mounts = Vec::new();
    let mut volumes: Vec<Volume> = Vec::new();
    let mut folder_maps = Vec::new();
    // The files bound as files: (key, bytes), one per distinct source (`file_sources`), and
    // the mounts of them: (container path, index in `files`).
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut file_mounts: Vec<(String, usize)> = Vec::new();
    let mut file_sources: Vec<PathBuf> = Vec::new();
    for bind in &table {
        let container = bind.container.to_string_lossy().into_owned();
        if !bind.readonly {
            let name = match bind.container == layout.workspace_mount {
                true => WORKSPACE_VOLUME,
                false => CLAUDE_HOME_VOLUME,
            };
            mounts.push(Some(VolumeMount {
                name: name.to_owned(),
                mount_path: container,
                read_only: false,
                sub_path: None,
            }));
            continue;
        }
        let carried = match planned(&bind.host)? {
            Some(carried) => carried,
            None if bind.host == config_host => Carried::File(
                config
                    .clone()
                    .ok_or_else(|| not_composed(group, &bind.host))?,
            ),
            // Every file the table binds as a file is one of the plan's (checked kept above),
            // or `container.json`: what is left is a folder the plan puts nothing in (copy
            // delivery with no fragment), an empty ConfigMap the kubelet fills when a file
            // comes.
            None => Carried::Folder(Vec::new()),
        };
        match carried {
            Carried::File(bytes) => {
                let index = match file_sources.iter().position(|h| h == &bind.host) {
                    Some(index) => index,
                    None => {
                        file_sources.push(bind.host.clone());
                        let base = bind
                            .container
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let mut key = names::configmap_key(&base);
                        if files.iter().any(|(k, _)| k == &key) {
                            key = names::configmap_key(&format!("{}-{key}", files.len()));
                        }
                        files.push((key, bytes));
                        files.len() - 1
                    }
                };
                file_mounts.push((container, index));
                mounts.push(None); // filled once the files are spread over ConfigMaps
            }
            Carried::Folder(entries) => {
                let label = names::path_label(&container, names::MAX_LABEL - 7);
                let mut volume = format!("clawmd-{label}");
                if volumes.iter().any(|v| v.name == volume) || volume == "clawmd-files" {
                    volume = format!(
                        "clawmd-{}",
                        names::dns_label(&container, names::MAX_LABEL - 7)
                    );
                }
                let map_name = map_name(&pod_name, &volume["clawmd-".len()..]);
                let size: u64 = entries.iter().map(|(_, b)| b.len() as u64).sum();
                if size > CONFIGMAP_LIMIT {
                    return Err(GroupError::OverConfigMapLimit {
                        group: group.to_owned(),
                        container: bind.container.clone(),
                        size,
                        limit: CONFIGMAP_LIMIT,
                    });
                }
                let flat = entries
                    .iter()
                    .all(|(rel, _)| names::is_configmap_key(rel) && !rel.contains('/'));
                let mut map = ConfigMap::new(meta(map_name.clone()));
                let mut items = Vec::new();
                for (rel, bytes) in entries {
                    let key = match flat {
                        true => rel.clone(),
                        false => names::configmap_key(&rel),
                    };
                    items.push(KeyToPath {
                        key: key.clone(),
                        path: rel,
                    });
                    map.insert(key, bytes);
                }
                folder_maps.push(map);
                volumes.push(Volume {
                    name: volume.clone(),
                    config_map: ConfigMapVolume {
                        name: map_name,
                        default_mode: FILE_MODE,
                        items: (!flat).then_some(items),
                    },
                });
                mounts.push(Some(VolumeMount {
                    name: volume,
                    mount_path: container,
                    read_only: true,
                    sub_path: None,
                }));
            }
        }
    }

    // The files bound as files, in as few ConfigMaps as hold them in order, each at most the
    // limit; one file over it is refused.
    let mut file_maps: Vec<ConfigMap> = Vec::new();
    let mut home_of = Vec::with_capacity(files.len());
    for (key, bytes) in files {
        let size = bytes.len() as u64;
        if size > CONFIGMAP_LIMIT {
            let container = file_mounts
                .iter()
                .find(|(_, i)| *i == home_of.len())
                .map(|(c, _)| PathBuf::from(c))
                .unwrap_or_default();
            return Err(GroupError::OverConfigMapLimit {
                group: group.to_owned(),
                container,
                size,
                limit: CONFIGMAP_LIMIT,
            });
        }
        if file_maps
            .last()
            .is_none_or(|map| map.size + size > CONFIGMAP_LIMIT)
        {
            let name = match file_maps.len() {
                0 => map_name(&pod_name, "files"),
                n => map_name(&pod_name, &format!("files-{}", n + 1)),
            };
            file_maps.push(ConfigMap::new(meta(name)));
        }
        let map = file_maps.last_mut().expect("pushed above");
        map.insert(key.clone(), bytes);
        home_of.push((file_maps.len() - 1, key));
    }
    let file_volume = |n: usize| match n {
        0 => "clawmd-files".to_owned(),
        n => format!("clawmd-files-{}", n + 1),
    };
    let mut file_mounts = file_mounts.into_iter();
    let mounts: Vec<VolumeMount> = mounts
        .into_iter()
        .map(|mount| {
            mount.unwrap_or_else(|| {
                let (container, index) = file_mounts.next().expect("one per file bind");
                let (map, key) = &home_of[index];
                VolumeMount {
                    name: file_volume(*map),
                    mount_path: container,
                    read_only: true,
                    sub_path: Some(key.clone()),
                }
            })
        })
        .collect();
    let mut all_volumes: Vec<Volume> = file_maps
        .iter()
        .enumerate()
        .map(|(n, map)| Volume {
            name: file_volume(n),
            config_map: ConfigMapVolume {
                name: map.metadata.name.clone(),
                default_mode: FILE_MODE,
                items: None,
            },
        })
        .collect();
    all_volumes.extend(volumes);

    let digest = spawn(layout, group, seen)?.digest;
    let pod = Pod {
        api_version: "v1",
        kind: "Pod",
        metadata: ObjectMeta {
            annotations: [
                (GROUP_NAME_ANNOTATION.to_owned(), group.to_owned()),
                (SPAWN_DIGEST_ANNOTATION.to_owned(), digest),
            ]
            .into(),
            ..meta(pod_name)
        },
        spec: PodSpec {
            containers: vec![Container {
                name: AGENT_CONTAINER,
                volume_mounts: mounts,
            }],
            volumes: all_volumes,
        },
    };
    let mut items: Vec<K8sObject> = file_maps.into_iter().map(K8sObject::ConfigMap).collect();
    items.extend(folder_maps.into_iter().map(K8sObject::ConfigMap));
    items.push(K8sObject::Pod(pod));
    Ok(K8sList {
        api_version: "v1",
        kind: "List",
        items,
    })
}

impl ConfigMap {
    fn new(metadata: ObjectMeta) -> Self {
        ConfigMap {
            api_version: "v1",
            kind: "ConfigMap",
            metadata,
            data: BTreeMap::new(),
            binary_data: BTreeMap::new(),
            size: 0,
        }
    }

    /// Adds a file: as text when it is UTF-8, else base64 in `binaryData`.
    fn insert(&mut self, key: String, bytes: Vec<u8>) {
        self.size += bytes.len() as u64;
        match String::from_utf8(bytes) {
            Ok(text) => {
                self.data.insert(key, text);
            }
            Err(err) => {
                self.binary_data.insert(key, base64(err.as_bytes()));
            }
        }
    }
}

/// The name of the group's ConfigMap `role`: `<pod>-<role>`, a DNS label (the API's schema
/// holds a ConfigMap's name to 63 bytes), cut with a hash of the whole when longer.
fn map_name(pod: &str, role: &str) -> String {
    names::dns_label(&format!("{pod}-{role}"), names::MAX_LABEL)
}

fn not_composed(group: &str, host: &Path) -> GroupError {
    GroupError::NotComposed {
        group: group.to_owned(),
        path: host.to_owned(),
    }
}

fn not_for_k8s(group: &str, at: &Path) -> GroupError {
    GroupError::NotForKubernetes {
        group: group.to_owned(),
        reason: format!(
            "{} is a symbolic link, which a ConfigMap cannot carry",
            at.display()
        ),
        fix: "use managed (the default) or copy delivery, or compose in the pod (docs/kubernetes.md)",
    }
}

/// Standard base64 with padding (what `binaryData` holds).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize])),
                false => out.push('='),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_mounted_whole_and_files_by_subpath_all_read_only() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::under_root(root.path());
        std::fs::create_dir_all(layout.group_dir("Main_1")).unwrap();
        std::fs::create_dir_all(&layout.container_dir).unwrap();
        std::fs::write(layout.container_dir.join("CLAUDE.md"), "BASE\n").unwrap();
        let settings = DeliverySettings::default();
        let guards = GuardSettings::default();
        // Not composed: refused, as `clawmd mounts` refuses.
        assert!(k8s_list(&layout, "Main_1", &settings, &guards).is_err());
        let options = crate::commands::compose::ComposeOptions::default();
        let selection = crate::disk::deployment::Selection::Named(vec!["Main_1".to_owned()]);
        let report = crate::commands::compose::compose(&layout, &selection, &options).unwrap();
        assert!(report.ok, "{report:?}");
        let list = k8s_list(&layout, "Main_1", &settings, &guards).unwrap();
        let K8sObject::Pod(pod) = list.items.last().unwrap() else {
            panic!("the Pod comes last")
        };
        assert!(
            names::is_dns_label(&pod.metadata.name),
            "{}",
            pod.metadata.name
        );
        let mounts = &pod.spec.containers[0].volume_mounts;
        assert_eq!(mounts[0].name, WORKSPACE_VOLUME);
        assert!(!mounts[0].read_only);
        let managed = mounts
            .iter()
            .find(|m| m.mount_path == "/etc/claude-code")
            .unwrap();
        assert_eq!((managed.read_only, &managed.sub_path), (true, &None));
        let entry = mounts
            .iter()
            .find(|m| m.mount_path == "/workspace/agent/CLAUDE.md")
            .unwrap();
        assert_eq!(
            (entry.read_only, entry.sub_path.as_deref()),
            (true, Some("CLAUDE.md"))
        );
        assert!(mounts[1..].iter().all(|m| m.read_only));
        let maps: Vec<&ConfigMap> = list
            .items
            .iter()
            .filter_map(|item| match item {
                K8sObject::ConfigMap(map) => Some(map),
                K8sObject::Pod(_) => None,
            })
            .collect();
        let managed_map = maps
            .iter()
            .find(|m| m.data.contains_key("managed-settings.json"))
            .unwrap();
        assert!(managed_map.data["CLAUDE.md"].contains("BASE"));
        assert!(maps.iter().all(|m| m.size <= CONFIGMAP_LIMIT));
    }

    #[test]
    fn base64_is_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"\xff\xfe\x00\x80"), "//4AgA==");
    }
}
