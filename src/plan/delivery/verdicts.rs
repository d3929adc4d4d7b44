//! What reaches each group's agent, worked out once for as long as nothing it depends on
//! changes: the one cache of compose's and check's verdicts.
//!
//! [`verify_with`] is a pure function of the group's plan (every composed file, the sections,
//! what was dropped, the warnings and the group's `CLAUDE.local.md`), the delivery settings,
//! the layout, the shared sources mounted in link delivery, and what the agent's own settings
//! files do to its memory ([`AgentSettings`], read afresh by every run). A [`Key`] is a
//! SHA-256 of all of them and of the binary that judges (a plan made from a look at its group
//! counts by what it was made from, with the shared sources' digest: the plan is a pure
//! function of those); a verdict is kept under its key in
//! memory for the run (groups with equal plans share it) and in a record per group in the
//! state folder (`<state>/verdicts/<group>`, [`VerdictRecord`], through the one store of
//! records, [`state::Records`]; outside every group folder: no agent reads or writes it), so a
//! run that finds a group as it was, with the same inputs, reads its verdict back instead of
//! running the loader again. A record whose key differs, or that is not whole (it carries a
//! SHA-256 of itself), is not used: the verdict is worked out again.
//!
//! A record also keeps the last [`RecordedLook`] that found its group exactly as planned: every read
//! that look made through the group's folders ([`crate::disk::reads`]) and what it found, as the
//! caller's own value `F` (compose's report of the unchanged group: this module never imports
//! `report`). A run whose [`Verdicts::look_key`] is the look's (the same binary, layout,
//! settings, shared sources and agent settings) and whose reads all find again what they found
//! then ([`crate::disk::deployment::reads_found`]) reports the group as recorded, without planning,
//! diffing or loading it: a no-op costs what reading the group's own files costs. The
//! verdicts hand the look back ([`Verdicts::recorded`]); the caller tells whether it stands.
//!
//! One [`Verdicts`] serves a whole run: a run that knows the shared sources only by their
//! record asks for the look key of their recorded digest ([`Verdicts::look_key_of_digest`]);
//! once it reads them, the keys are made from their digest ([`Sources::digest`]).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::DeliverySettings;
use super::verify::{AgentSettings, Delivered, verify_with};
use crate::disk::fsops::{FsError, SafeDir};
use crate::disk::reads::Read;
use crate::disk::state;
use crate::input::layout::Layout;
use crate::input::sources::Sources;
use crate::key_hash::KeyHasher;
use crate::plan::delivery::GroupPlan;
use crate::plan::{Content, Warning};

/// The folder of the records in the state folder.
pub const VERDICTS: &str = "verdicts";

/// The most verdicts one run keeps in memory (each is a few hundred bytes).
const MAX_KEPT: usize = 4096;

/// A group's record, `<state>/verdicts/<group>`, whose look keeps what the caller found as an
/// `F` (compose's report of the group).
pub struct VerdictRecord<F>(PhantomData<fn() -> F>);

impl<F: Serialize + DeserializeOwned> state::Record for VerdictRecord<F> {
    const FOLDER: &'static str = VERDICTS;
    /// A verdict is a few KiB at most.
    const MAX_BYTES: u64 = 1 << 20;
    type Body = VerdictBody<F>;
}

/// Names a verdict: a SHA-256 of everything [`verify_with`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key([u8; 32]);

/// The verdicts of one run: the same layout, settings and sources for every group; what a
/// look found is kept as an `F`.
pub struct Verdicts<F> {
    /// The key after what is the same for every group (format, binary, layout, settings).
    run: KeyHasher,
    /// `run` and where the deployment is: the start of every [`Verdicts::look_key`].
    here: KeyHasher,
    /// The digest of the sources mounted in link delivery, made when first needed.
    app: OnceLock<[u8; 32]>,
    /// The digest of the sources these verdicts are asked of ([`Sources::digest`]): given by
    /// a caller that knows it ([`Verdicts::know_sources_digest`]), else made when first
    /// needed (these verdicts are asked of one [`Sources`] at a time).
    sources: Mutex<Option<[u8; 32]>>,
    kept: Mutex<HashMap<Key, Delivered>>,
    /// The records, `<state>/verdicts/<group>`.
    folder: Arc<state::Records<VerdictRecord<F>>>,
    /// `<state>/binds`, opened when first needed (`Some(None)`: it does not exist).
    binds: Mutex<Option<Option<SafeDir>>>,
    /// Whether the state folder and its journal folder are real folders, asked once.
    journals: OnceLock<bool>,
    /// Whether records are read and written (not without a known binary).
    records: bool,
}

/// A verdict worked out in this run that its group's record does not hold yet.
#[derive(Debug)]
pub struct Unrecorded<F> {
    group: String,
    key: Key,
    delivered: Delivered,
    look_key: String,
    /// The container-side items the plan was made from ([`GroupPlan::uses`]).
    uses: Option<Vec<String>>,
    /// What the agent's settings did, with the view and reads that found it.
    agent: Option<RecordedAgent>,
    look: Option<RecordedLook<F>>,
}

impl<F> Unrecorded<F> {
    /// The group whose record this is.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// With the look that found the group as planned: its `reads` and what it `found` (the
    /// caller's report of the group).
    pub fn with_look(mut self, reads: Vec<Read>, found: F) -> Self {
        self.look = Some(RecordedLook {
            key: self.look_key.clone(),
            reads,
            uses: self.uses.clone(),
            agent: self.agent.clone(),
            found,
        });
        self
    }

    /// The same, knowing the view and reads through which the agent's settings, `agent`, were
    /// found (kept with the look it is given).
    pub fn with_agent_view(
        mut self,
        agent: &AgentSettings,
        mounts: Vec<crate::runtime::mounted::Mount>,
        reads: Vec<Read>,
    ) -> Self {
        self.agent = Some(RecordedAgent {
            mounts,
            reads,
            evaluations: String::from_utf8_lossy(&evaluations(agent)).into_owned(),
        });
        self
    }
}

/// What a record keeps of the last look that found its group exactly as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedLook<F> {
    /// [`Verdicts::look_key`] of that run.
    key: String,
    /// Every read it made through the group's folders, in order.
    reads: Vec<Read>,
    /// The container-side items its plan was made from (`None`: all, or a record made
    /// before they were kept).
    #[serde(default)]
    uses: Option<Vec<String>>,
    /// What the agent's settings files did (their part of `key`), with the container view
    /// and every read of it that found it, when they were read through one (`None`: not read,
    /// or a record made before they were kept).
    #[serde(default)]
    agent: Option<RecordedAgent>,
    /// What it found (the caller's report of the group).
    found: F,
}

/// What the agent's settings files did to its memory as a look found it: a later run that
/// makes every read of `reads` again through a view of `mounts` and finds the same has the
/// same settings, and so the look key of `evaluations` ([`Verdicts::look_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedAgent {
    /// The container view's mount table.
    pub mounts: Vec<crate::runtime::mounted::Mount>,
    /// Every read of the view that the settings' evaluation made.
    pub reads: Vec<Read>,
    /// The evaluation, as its part of the look key.
    pub evaluations: String,
}

impl<F> RecordedLook<F> {
    /// [`Verdicts::look_key`] of the run that made the look: it stands only for a run with
    /// the same key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Every read the look made through the group's folders, in order.
    pub fn reads(&self) -> &[Read] {
        &self.reads
    }

    /// The container-side items its plan was made from (`None`: all).
    pub fn uses(&self) -> Option<&[String]> {
        self.uses.as_deref()
    }

    /// What the agent's settings did, as the look found them, when it kept that.
    pub fn agent(&self) -> Option<&RecordedAgent> {
        self.agent.as_ref()
    }

    /// What the look found.
    pub fn into_found(self) -> F {
        self.found
    }
}

/// What a group's record holds for a run that asks it before looking at the group.
#[derive(Debug)]
pub enum RecordAnswer<F> {
    /// The record's verdict and the last look that found the group as planned: the group is
    /// still as that look found it when the look's key is the run's and every read of it finds
    /// again what it found (the caller's to tell).
    Look {
        /// The recorded verdict.
        delivered: Box<Delivered>,
        /// The look.
        look: RecordedLook<F>,
    },
    /// No record (a group never composed, or a record torn).
    Nothing,
    /// A record without a look, or records not kept.
    Other,
}

/// What a group's record holds besides its key and seal: the verdict, and the last look that
/// found the group as planned.
#[derive(Debug, Serialize, Deserialize)]
pub struct VerdictBody<F> {
    delivered: Delivered,
    look: Option<RecordedLook<F>>,
}

impl<F: Serialize + DeserializeOwned> Verdicts<F> {
    /// The verdicts of a run with `layout` and `settings`.
    pub fn new(layout: &Layout, settings: &DeliverySettings) -> Verdicts<F> {
        let binary = state::binary_identity();
        let mut run = run_start(layout, settings, binary.as_deref());
        run.hash(&layout.given_configs);
        // A look's report names host paths: it stands only where it was made.
        let mut here = run.clone();
        here.hash(&(&layout.groups_dir, &layout.container_dir, &layout.state_dir));
        Verdicts {
            run,
            here,
            app: OnceLock::new(),
            sources: Mutex::new(None),
            kept: Mutex::new(HashMap::new()),
            folder: Arc::new(state::Records::new()),
            binds: Mutex::new(None),
            journals: OnceLock::new(),
            records: binary.is_some(),
        }
    }

    /// The key of the verdict of a group composed as `plan` whose agent's settings files do
    /// `agent`: the plan by what it was made from ([`GroupPlan::made_from`]) with the run's
    /// sources, or, for a plan not made from a look, by everything in it.
    pub fn key(
        &self,
        layout: &Layout,
        plan: &GroupPlan,
        sources: &Sources,
        agent: &AgentSettings,
    ) -> Key {
        let mut key = self.run.clone();
        match plan.made_from {
            // The plan is a pure function of what it was made from and of the run: its name
            // with the sources' digest stands for everything in it.
            Some(made_from) => {
                key.field(b"made from")
                    .field(&made_from)
                    .field(&self.sources_digest(sources));
            }
            None => {
                key.field(b"plan");
                plan_into(&mut key, plan);
            }
        }
        key.field(&evaluations(agent));
        if plan.target.mount_needs(false).app {
            let app = self.app.get_or_init(|| {
                let mut app = KeyHasher::new();
                for (path, bytes) in sources.container_files(layout) {
                    app.field(path.as_os_str().as_encoded_bytes()).field(bytes);
                }
                app.finish()
            });
            key.field(app);
        }
        Key(key.finish())
    }

    /// What a group's plan and verdict depend on besides what is read in its folders: the
    /// run's binary, layout (where it is, too: a report names host paths) and settings, the
    /// shared sources and what the agent's settings files do ([`RecordedLook`]).
    pub fn look_key(&self, sources: &Sources, agent: &AgentSettings) -> String {
        crate::safe_name::hex(&self.here_key(sources, &evaluations(agent)))
    }

    /// [`Verdicts::look_key`] for shared sources whose digest is `digest` (their record says
    /// so, [`crate::input::sources::record`]) though they were not read.
    pub fn look_key_of_digest(&self, digest: &[u8; 32], agent: &AgentSettings) -> String {
        crate::safe_name::hex(&self.here_key_with(digest, &evaluations(agent)))
    }

    /// [`Verdicts::look_key`] for agent settings known by their `evaluations`
    /// ([`RecordedAgent::evaluations`]), the shared sources by their `digest` (`None`: of
    /// `sources`).
    pub fn look_key_of_evaluations(
        &self,
        sources: Option<&Sources>,
        digest: Option<&[u8; 32]>,
        evaluations: &str,
    ) -> String {
        let digest = match (digest, sources) {
            (Some(digest), _) => *digest,
            (None, Some(sources)) => self.sources_digest(sources),
            (None, None) => return String::new(),
        };
        crate::safe_name::hex(&self.here_key_with(&digest, evaluations.as_bytes()))
    }

    /// A SHA-256 of what a record made here depends on besides what it read: the binary,
    /// the layout and where it is, the settings, the shared sources, and `more`.
    pub fn here_key(&self, sources: &Sources, more: &[u8]) -> [u8; 32] {
        self.here_key_with(&self.sources_digest(sources), more)
    }

    /// The digest of `sources`, the sources these verdicts are asked of.
    fn sources_digest(&self, sources: &Sources) -> [u8; 32] {
        let mut known = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        *known.get_or_insert_with(|| sources.digest())
    }

    /// Says that the sources these verdicts are asked of from now on have `digest` (a kept
    /// reading, whose digest its record holds), or, `None`, that they are to be hashed when
    /// first needed (sources read anew).
    pub fn know_sources_digest(&self, digest: Option<[u8; 32]>) {
        *self.sources.lock().unwrap_or_else(PoisonError::into_inner) = digest;
    }

    fn here_key_with(&self, sources: &[u8; 32], more: &[u8]) -> [u8; 32] {
        let mut key = self.here.clone();
        key.field(sources).field(more);
        key.finish()
    }

    /// Whether records are read and written (not without a known binary).
    pub fn keeps_records(&self) -> bool {
        self.records
    }

    /// Whether runs may have left temps for `group` ([`state::may_have_leftovers`], the
    /// state folder's part asked once per run, and only once a journal has records: it is
    /// empty or missing almost always, and then the folders need no look).
    pub fn journal_pending(&self, layout: &Layout, group: &str) -> bool {
        state::journal_has_records(layout, group)
            && *self
                .journals
                .get_or_init(|| state::journals_are_folders(layout))
    }

    /// The bind folder of `group` ([`state::bind_dir`]), opened from `<state>/binds`, which
    /// is opened once per run.
    pub fn bind_dir(&self, layout: &Layout, group: &str) -> Result<Option<SafeDir>, FsError> {
        let mut binds = self.binds.lock().unwrap_or_else(|p| p.into_inner());
        if binds.is_none() {
            *binds = Some(state::binds_dir(layout)?);
        }
        match binds.as_ref().and_then(Option::as_ref) {
            Some(binds) => binds.open_child(group, false),
            None => Ok(None),
        }
    }

    /// What `group`'s record holds for a run that asks it before looking at the group: its
    /// verdict and last look, when it has one.
    pub fn recorded(&self, layout: &Layout, group: &str) -> RecordAnswer<F> {
        if !self.records {
            return RecordAnswer::Other;
        }
        let Some(body) = self.read_body(layout, group) else {
            return RecordAnswer::Nothing;
        };
        match body.look {
            Some(look) => RecordAnswer::Look {
                delivered: Box::new(body.delivered),
                look,
            },
            None => RecordAnswer::Other,
        }
    }

    /// The verdict of `group` composed as `plan` ([`verify_with`]): kept in this run, else
    /// read from the group's record, else worked out; with what the record should hold when
    /// it does not hold it yet ([`Verdicts::record`]).
    #[allow(clippy::too_many_arguments)]
    pub fn delivered(
        &self,
        layout: &Layout,
        group: &str,
        plan: &GroupPlan,
        sources: &Sources,
        settings: &DeliverySettings,
        agent: &AgentSettings,
    ) -> (Delivered, Option<Unrecorded<F>>) {
        let key = self.key(layout, plan, sources, agent);
        let delivered = match self.read(layout, group, key) {
            Some(record) => {
                self.keep(key, &record);
                record
            }
            None => {
                let kept = self.lock_kept().get(&key).cloned();
                kept.unwrap_or_else(|| {
                    let delivered = verify_with(layout, plan, sources, settings, agent);
                    self.keep(key, &delivered);
                    delivered
                })
            }
        };
        // The record is written again with the look the caller adds (a run that reads the
        // verdict back has not found the group by its look).
        let unrecorded = self.records.then(|| Unrecorded {
            group: group.to_owned(),
            key,
            delivered: delivered.clone(),
            look_key: self.look_key(sources, agent),
            uses: plan.uses.clone(),
            agent: None,
            look: None,
        });
        (delivered, unrecorded)
    }

    /// Writes the record of a verdict, in place ([`state::Records`]), under the group's lock,
    /// which the caller holds. A record is only a saving: one that cannot be written is left
    /// for a later run.
    pub fn record(&self, layout: &Layout, unrecorded: Unrecorded<F>) {
        self.records().record(layout, unrecorded);
    }

    /// The records these verdicts are written to, for a caller that writes one once the run
    /// has answered ([`VerdictRecords::record`]).
    pub fn records(&self) -> VerdictRecords<F> {
        VerdictRecords(Arc::clone(&self.folder))
    }

    /// The verdict `group`'s record holds under `key`, if it is whole and has that key.
    fn read(&self, layout: &Layout, group: &str, key: Key) -> Option<Delivered> {
        if !self.records {
            return None;
        }
        let body = self.folder.read_keyed(layout, group, &key.0)?;
        Some(body.delivered)
    }

    /// `group`'s record, if it is whole: its body.
    fn read_body(&self, layout: &Layout, group: &str) -> Option<VerdictBody<F>> {
        if !self.records {
            return None;
        }
        Some(self.folder.read(layout, group)?.1)
    }

    fn keep(&self, key: Key, delivered: &Delivered) {
        let mut kept = self.lock_kept();
        if kept.len() < MAX_KEPT {
            kept.entry(key).or_insert_with(|| delivered.clone());
        }
    }

    fn lock_kept(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Delivered>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the agent's settings files do, as a key takes it.
fn evaluations(agent: &AgentSettings) -> Vec<u8> {
    serde_json::to_vec(&(&agent.cli, &agent.sdk)).unwrap_or_default()
}

/// The start of a run's key: the format, the binary, the layout (relocated, the handed configs
/// aside) and the settings; kept while they hold (every spawn of `clawmd serve`: hashing the
/// recipe and the layout was 4% of a spawn's CPU).
fn run_start(layout: &Layout, settings: &DeliverySettings, binary: Option<&[u8]>) -> KeyHasher {
    type Kept = (Layout, DeliverySettings, KeyHasher);
    static LAST: Mutex<Option<Kept>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((kept, kept_settings, start)) = &*last
        && kept.same_but_handed(layout)
        && kept_settings == settings
    {
        return start.clone();
    }
    let shared = layout.without_handed();
    let mut start = KeyHasher::new();
    start
        .field(b"clawmd verdict 4")
        .field(env!("CARGO_PKG_VERSION").as_bytes())
        .field(binary.unwrap_or_default())
        .hash(&(relocated(&shared), settings));
    *last = Some((shared, *settings, start.clone()));
    start
}

/// `layout` with its host folders made relative to the folder that holds the groups, the
/// shared sources and the state (`<root>/groups`, …): [`verify_with`] sees the host only
/// through where each composed file lies in the mount table, which moving the whole
/// deployment keeps, so a verdict does not depend on where the deployment is.
fn relocated(layout: &Layout) -> Layout {
    let mut base = layout.groups_dir.clone();
    while !(layout.container_dir.starts_with(&base) && layout.state_dir.starts_with(&base)) {
        if !base.pop() {
            return layout.clone();
        }
    }
    let from_base = |path: &std::path::Path| match path.strip_prefix(&base) {
        Ok(rest) => std::path::Path::new("<root>").join(rest),
        Err(_) => path.to_owned(),
    };
    Layout {
        groups_dir: from_base(&layout.groups_dir),
        container_dir: from_base(&layout.container_dir),
        state_dir: from_base(&layout.state_dir),
        host_managed_dir: layout.host_managed_dir.as_deref().map(from_base),
        claude_home: layout.claude_home.as_deref().map(from_base),
        ..layout.clone()
    }
}

/// Everything in `plan` that [`verify_with`] reads, each a field of `key`: the target, every
/// entry (path and content), the sections, what was dropped, the warnings and the local
/// memory.
fn plan_into(key: &mut KeyHasher, plan: &GroupPlan) {
    key.field(format!("{:?}", plan.target).as_bytes());
    key.count(plan.entries.len());
    for entry in &plan.entries {
        key.field(entry.path.to_string().as_bytes());
        match &entry.content {
            Content::File(bytes) => key.field(b"file").field(bytes),
            Content::Symlink(target) => {
                (key.field(b"link")).field(target.as_os_str().as_encoded_bytes())
            }
            Content::Seed => key.field(b"seed"),
            Content::Placeholder(bytes) => key.field(b"placeholder").field(bytes),
        };
    }
    key.count(plan.sections.len());
    for section in &plan.sections {
        key.field(section.id.as_str().as_bytes())
            .field(section.origin.as_bytes())
            .field(&section.text)
            .field(
                format!(
                    "{:?} {} {:?} {:?}",
                    section.rank, section.file, section.link, section.scope
                )
                .as_bytes(),
            );
    }
    key.count(plan.dropped.len());
    for dropped in &plan.dropped {
        key.field(dropped.section.as_bytes())
            .field(&dropped.bytes.to_le_bytes());
    }
    // Of the warnings, the verdict reads only the dangling instructions (each named in its
    // reasons); the others may name host paths, which would tie the key to where the
    // deployment lies.
    let dangling: Vec<&Warning> = (plan.warnings.iter())
        .filter(|warning| matches!(warning, Warning::DanglingInstructions { .. }))
        .collect();
    key.count(dangling.len());
    for warning in dangling {
        key.field(format!("{warning:?} {warning}").as_bytes());
    }
    // No local memory reads as an empty one (the snapshot seeds it empty; a flat document
    // misses nothing of it): the first compose, which seeds it, and the no-op after it, which
    // reads it empty, share a key.
    match (&plan.local_memory, plan.local_memory_too_large) {
        (None, Some(len)) => key
            .field(b"local memory too large")
            .field(&len.to_le_bytes()),
        (local, _) => (key.field(b"local memory")).field(local.as_deref().unwrap_or_default()),
    };
}

/// Where a run's verdict records go ([`Verdicts::records`]): held past the run by a caller
/// that writes a record after answering.
pub struct VerdictRecords<F>(Arc<state::Records<VerdictRecord<F>>>);

impl<F: Serialize + DeserializeOwned> VerdictRecords<F> {
    /// Writes the record of a verdict, in place ([`state::Records`]), under the group's lock,
    /// which the caller holds. A record is only a saving: one that cannot be written is left
    /// for a later run.
    pub fn record(&self, layout: &Layout, unrecorded: Unrecorded<F>) {
        let Unrecorded {
            group,
            key,
            delivered,
            look,
            ..
        } = unrecorded;
        let written = self
            .0
            .write(layout, &group, &key.0, &VerdictBody { delivered, look });
        if let Err(err) = written {
            tracing::debug!(
                group,
                "verdict record not written: {}",
                crate::error::chain_text(&err)
            );
        }
    }
}
