//! `compose`: bring one group, or all, to the state its `container.json` describes.
//!
//! For each group: take the group's lock, [`observe`](crate::disk::deployment::observe) it (read its
//! config, compute the [`plan`](crate::plan) and [`diff`](crate::disk::reconcile::diff) it against
//! the disk) and apply the difference. Groups are independent: a failing group is reported and
//! left as it was, the others are composed.
//!
//! A run reads top to bottom in [`compose_with_progress`]: its context, `Run` (the layout, the
//! options, the one cache of verdicts, where progress goes, and what the run knows of the
//! shared sources), has a method for each stage, and each stage names what it comes to for a
//! group:
//!
//! 1. with the shared sources' record, each group its own record answers (`RecordSays`),
//!    without reading the sources (`Run::answer_from_records`);
//! 2. the sources read, a first look at each other group without its lock (`FirstLook`: its
//!    record asked again, else the group observed; `Run::first_looks`);
//! 3. the groups that need it composed under their locks, one alone or in batches
//!    (`Run::compose_pending`), each group's verdict recorded as it is composed;
//! 4. the sources recorded for the runs to come (`Run::record_sources`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod later;
pub use later::Later;

use serde::{Deserialize, Serialize};

use crate::disk::deployment::{
    Observation, Selection, checked_group_dir, observe, observe_opened, open_group,
    read_sources_logged, reads_found, settled, source_warnings,
};
use crate::disk::fsops::{self, FsError, LockWait, SafeDir, TempJournal};
use crate::disk::reads::{Read, Root, Seen};
use crate::disk::reconcile::{Dirs, Staged, Step, apply, stage};
use crate::disk::state;
use crate::disk::written;
use crate::error::{Error, GroupError};
use crate::input::layout::{GroupConfigSource, Layout};
use crate::input::sources::host_reads::HostLog;
use crate::input::sources::record::Proof;
use crate::input::sources::vouch::Vouchers;
use crate::input::sources::{SourceNote, Sources};
use crate::plan::delivery::DeliverySettings;
use crate::plan::delivery::GroupPlan;
use crate::plan::delivery::guard;
use crate::plan::delivery::verdicts::{
    RecordAnswer, RecordedLook, Unrecorded, VerdictRecord, Verdicts,
};
use crate::plan::delivery::verify::{AgentSettings, Delivered, verify};
use crate::plan::target::{Delivery, Provider, Target};
use crate::progress::Progress;
use crate::report::{Code, ComposeReport, GroupReport, SeenWhen, Status, WarningReport};
use crate::runtime::view::{AgentFound, AgentSettingsKept, ViewOptions};

/// How to compose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposeOptions {
    /// Delivery mode, default provider, budgets (from `clawmd.json`, flags and `CLAWMD_*`).
    pub settings: DeliverySettings,
    /// Compute and report the changes without making them.
    pub dry_run: bool,
    /// How long to wait for another run holding a group's lock.
    pub lock_timeout: Duration,
}

impl Default for ComposeOptions {
    fn default() -> Self {
        ComposeOptions {
            settings: DeliverySettings::default(),
            dry_run: false,
            lock_timeout: Duration::from_secs(60),
        }
    }
}

/// Composes the selected groups. Fails as a whole only when the groups folder or the shared
/// content cannot be read; a group's own failure is in its report.
pub fn compose(
    layout: &Layout,
    selection: &Selection,
    options: &ComposeOptions,
) -> Result<ComposeReport, Error> {
    compose_with_progress(layout, selection, options, &())
}

/// [`compose`], telling `progress` how far it is and when it waits for a lock. The stages of
/// the run are in the module docs.
pub fn compose_with_progress(
    layout: &Layout,
    selection: &Selection,
    options: &ComposeOptions,
    progress: &dyn Progress,
) -> Result<ComposeReport, Error> {
    compose_keeping(
        layout,
        selection,
        options,
        progress,
        &mut KeptAcrossRuns::default(),
    )
}

/// The shared sources as a run read them, kept by a caller that composes again and again in
/// one process (`clawmd serve`, `clawmd watch`) for the runs after it: a later run uses them
/// instead of reading `container/` again only when the sources' record, every part of it
/// replayed, says they are still what was read (the record's digest and notes are theirs).
/// Nothing is used that the record cannot vouch for, so a kept reading is never older than the
/// disk. A reading is kept with the layout it was made for (the groups' handed configs aside,
/// as in the record's key): what is prepared from the sources depends on it.
///
/// The agents' settings are kept likewise ([`AgentSettingsKept`]): what each group's settings
/// files did to its agent's memory, used again while every read that found it finds the same.
#[derive(Debug, Default)]
pub struct KeptAcrossRuns {
    reading: Option<KeptReading>,
    /// What the holder knows has not changed since it last replayed a part of the record
    /// (only [`KeptAcrossRuns::watching`] watches).
    vouchers: Arc<Vouchers>,
    agents: Arc<AgentSettingsKept>,
    /// The bookkeeping the last run left until after its answer ([`Later`]; only
    /// [`KeptAcrossRuns::answering`] leaves any).
    later: Arc<Later>,
}

#[derive(Debug)]
struct KeptReading {
    layout: Layout,
    digest: [u8; 32],
    sources: Sources,
    notes: Vec<SourceNote>,
}

impl KeptAcrossRuns {
    /// What the holder knows has not changed since it last looked ([`Vouchers`]): nothing,
    /// unless it watches ([`KeptAcrossRuns::watching`]).
    pub fn vouchers(&self) -> &Vouchers {
        &self.vouchers
    }

    /// Nothing kept yet, for a holder that answers many runs (`clawmd serve`): the parts of the
    /// sources' record a run replays are then watched, and not replayed again while nothing
    /// they read changes ([`Vouchers`]).
    pub fn watching() -> KeptAcrossRuns {
        KeptAcrossRuns {
            reading: None,
            vouchers: Arc::new(Vouchers::enabled()),
            agents: Arc::new(AgentSettingsKept::enabled()),
            later: Arc::default(),
        }
    }

    /// [`KeptAcrossRuns::watching`], for a holder that answers spawns: a run leaves a group's
    /// bookkeeping after its compose until [`KeptAcrossRuns::finish_later`] ([`Later`]).
    pub fn answering() -> KeptAcrossRuns {
        KeptAcrossRuns {
            later: Arc::new(Later::deferring()),
            ..KeptAcrossRuns::watching()
        }
    }

    /// Does the bookkeeping the runs left ([`KeptAcrossRuns::answering`]), releasing their
    /// groups' locks.
    pub fn finish_later(&self) {
        self.later.finish();
    }

    /// The kept reading, when it was made for `layout` and is the one `proof` records: what
    /// `proof` replays (all of it, or the items a plan uses) then says whether the files still
    /// hold it.
    fn recorded_by(&self, layout: &Layout, proof: &Proof) -> Option<(&Sources, &[SourceNote])> {
        let kept = self.reading.as_ref()?;
        let recorded = proof.recorded();
        let same = kept.layout.same_but_handed(layout)
            && recorded.notes == kept.notes
            && recorded.digest == kept.digest;
        same.then_some((&kept.sources, kept.notes.as_slice()))
    }

    fn keep(&mut self, layout: &Layout, sources: Sources, notes: Vec<SourceNote>) {
        let layout = layout.without_handed();
        self.reading = Some(KeptReading {
            layout,
            digest: sources.digest(),
            sources,
            notes,
        });
    }
}

/// [`compose_with_progress`], using and keeping in `kept` the shared sources it reads
/// ([`KeptAcrossRuns`]).
pub fn compose_keeping(
    layout: &Layout,
    selection: &Selection,
    options: &ComposeOptions,
    progress: &dyn Progress,
    kept: &mut KeptAcrossRuns,
) -> Result<ComposeReport, Error> {
    let groups = selection.groups(layout)?;
    progress.start(groups.len());
    let verdicts = GroupVerdicts::new(layout, &options.settings);
    let agents = kept.agents.clone();
    let later = kept.later.clone();
    let run = Run::new(layout, options, &verdicts, progress, &agents, &later);
    let mut outcomes = Outcomes::new(groups.len());
    let proof = (run.load_sources_record()).map(|proof| proof.vouched_by(kept.vouchers.clone()));
    if let Some(proof) = &proof {
        run.with_sources(proof)
            .answer_from_records(&groups, &mut outcomes);
        if outcomes.all_done() && !proof.stale() {
            let warnings = source_warnings(&proof.recorded().notes);
            return Ok(run.report(&groups, outcomes, warnings));
        }
    }
    if let Some(proof) = &proof
        && let Some((sources, notes)) = kept.recorded_by(layout, proof)
    {
        // The kept reading is the one the record names: its digest is the record's.
        debug_assert_eq!(proof.recorded().digest, sources.digest());
        verdicts.know_sources_digest(Some(proof.recorded().digest));
        let run = run.with_sources(sources);
        // One group (a spawn): composed once the items its plan uses are vouched for.
        if let [index] = *outcomes.not_done()
            && !options.dry_run
            && let Some(outcome) = run.compose_alone_kept(&groups[index], proof)
        {
            outcomes.set(index, outcome);
            progress.done(&groups[index]);
            return Ok(run.report(&groups, outcomes, source_warnings(notes)));
        }
        // Else, the whole reading vouched for.
        if proof.holds_for(None) && !proof.stale() {
            run.look_and_compose(&groups, &mut outcomes);
            return Ok(run.report(&groups, outcomes, source_warnings(notes)));
        }
    }
    // Read anew, the sources may not be the kept ones.
    verdicts.know_sources_digest(None);
    let log = HostLog::new();
    let (sources, notes) = read_sources_logged(layout, &log)?;
    let run = run.with_sources(&sources);
    run.look_and_compose(&groups, &mut outcomes);
    run.record_sources(proof.as_ref(), &notes, &log, &outcomes);
    let warnings = source_warnings(&notes);
    let report = run.report(&groups, outcomes, warnings);
    kept.keep(layout, sources, notes);
    Ok(report)
}

/// Composes one group: lock, read config, plan, diff, apply.
pub fn compose_group(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &ComposeOptions,
) -> Result<GroupReport, GroupError> {
    let verdicts = GroupVerdicts::new(layout, &options.settings);
    let agents = AgentSettingsKept::default();
    let later = Later::default();
    let run = Run::new(layout, options, &verdicts, &(), &agents, &later);
    run.with_sources(sources).compose_one(group)
}

/// What one compose run shares for every group: the deployment, the options, the one cache of
/// verdicts, where its progress goes, and what it knows of the shared sources (`S`: nothing
/// yet, `()`; their record, `&Proof`; or the sources read, `&Sources`).
struct Run<'a, S> {
    layout: &'a Layout,
    options: &'a ComposeOptions,
    /// The run's verdicts: one cache for the whole run, whether the shared sources are known
    /// by their record or read (a verdict's key holds their digest either way).
    verdicts: &'a GroupVerdicts,
    progress: &'a dyn Progress,
    /// What the agents' settings files did, kept across runs by the caller.
    agents: &'a AgentSettingsKept,
    /// Where a group's bookkeeping goes once it is composed: done at once, or left until the
    /// caller has answered ([`Later`]).
    later: &'a Later,
    sources: S,
}

impl<'a> Run<'a, ()> {
    /// A run that knows nothing of the shared sources yet.
    fn new(
        layout: &'a Layout,
        options: &'a ComposeOptions,
        verdicts: &'a GroupVerdicts,
        progress: &'a dyn Progress,
        agents: &'a AgentSettingsKept,
        later: &'a Later,
    ) -> Self {
        Run {
            layout,
            options,
            verdicts,
            progress,
            agents,
            later,
            sources: (),
        }
    }
}

impl<'a, S> Run<'a, S> {
    /// The same run, knowing `sources` of the shared sources.
    fn with_sources<T>(&self, sources: T) -> Run<'a, T> {
        Run {
            layout: self.layout,
            options: self.options,
            verdicts: self.verdicts,
            progress: self.progress,
            agents: self.agents,
            later: self.later,
            sources,
        }
    }

    /// The shared sources' record made by this binary for this layout, when it is whole and
    /// no run holding the deployment-wide lock left temps.
    fn load_sources_record(&self) -> Option<Proof> {
        let leftovers = |lock: &str| self.verdicts.journal_pending(self.layout, lock);
        crate::input::sources::record::load(self.layout, leftovers)
    }

    /// The run's report from each group's outcome (every group is answered, looked at or
    /// composed by now).
    fn report(
        &self,
        groups: &[String],
        outcomes: Outcomes,
        warnings: Vec<WarningReport>,
    ) -> ComposeReport {
        let reports = (groups.iter().zip(outcomes.0))
            .map(|(group, outcome)| {
                let outcome = outcome.expect("every group is answered, looked at or composed");
                match outcome.map(with_guarantee) {
                    Ok(report) => report,
                    Err(err) => {
                        tracing::error!(group, "{}", crate::error::chain_text(&err));
                        GroupReport::failed(group, &err)
                    }
                }
            })
            .collect();
        let options = self.options;
        ComposeReport::new(
            options.dry_run,
            options.settings.delivery,
            reports,
            warnings,
        )
    }
}

/// Each group's outcome, in the order of the run's groups: `None` until the group is
/// answered by its record, looked at or composed.
struct Outcomes(Vec<Option<Result<GroupReport, GroupError>>>);

impl Outcomes {
    /// No outcome yet for any of `groups` groups.
    fn new(groups: usize) -> Outcomes {
        Outcomes((0..groups).map(|_| None).collect())
    }

    fn set(&mut self, index: usize, outcome: Result<GroupReport, GroupError>) {
        self.0[index] = Some(outcome);
    }

    /// Whether every group has its outcome.
    fn all_done(&self) -> bool {
        self.0.iter().all(Option::is_some)
    }

    /// The indexes of the groups without an outcome yet.
    fn not_done(&self) -> Vec<usize> {
        (0..self.0.len()).filter(|&i| self.0[i].is_none()).collect()
    }

    /// Whether some group is reported (composed, or found right), not failed.
    fn any_reported(&self) -> bool {
        (self.0.iter()).any(|outcome| matches!(outcome, Some(Ok(_))))
    }
}

/// The verdicts of a compose run (and of check, which reads compose's records back): each
/// group's record keeps, with its look, the report of the group found unchanged ([`Found`]).
pub type GroupVerdicts = Verdicts<Found>;

/// A group's record, `<state>/verdicts/<group>` ([`crate::disk::state::Record`]).
pub type GroupRecord = VerdictRecord<Found>;

/// The report of a group found unchanged, as a record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    unchanged: Vec<String>,
    warnings: Vec<(Code, String)>,
    provider: Provider,
    delivery: Delivery,
    budget: u64,
    dropped: Vec<(String, u64)>,
    spawn_digest: String,
    own_config: bool,
}

impl Found {
    /// What a record keeps of `report`: only of a group found unchanged.
    fn of(report: &GroupReport) -> Option<Found> {
        let target = report.target?;
        let spawn_digest = report.spawn_digest.clone()?;
        let own_config = report.own_config?;
        // Unchanged: nothing created, replaced, removed, rescued or cleaned, and no error.
        (report.status == Status::Unchanged).then(|| Found {
            unchanged: report.unchanged.clone(),
            warnings: (report.warnings.iter())
                .map(|w| (w.code, w.message.clone()))
                .collect(),
            provider: target.provider,
            delivery: target.delivery,
            budget: target.budget,
            dropped: (report.dropped.iter())
                .map(|d| (d.section.clone(), d.bytes))
                .collect(),
            spawn_digest,
            own_config,
        })
    }

    /// The report of `group` as the record keeps it, with its `delivered` verdict.
    fn report(self, group: &str, delivered: Delivered) -> GroupReport {
        let target = Target {
            provider: self.provider,
            delivery: self.delivery,
            file: self.provider.entry_point(),
            budget: self.budget,
        };
        let mut report = GroupReport::unchanged(
            group,
            self.unchanged,
            self.warnings
                .into_iter()
                .map(|(code, message)| WarningReport { code, message })
                .collect(),
            target,
            self.dropped
                .into_iter()
                .map(|(section, bytes)| crate::plan::delivery::Dropped { section, bytes })
                .collect(),
        );
        report.set_delivered(delivered);
        report.spawn_digest = Some(self.spawn_digest);
        report.own_config = Some(self.own_config);
        report
    }
}

/// `unrecorded` with the look that found its group unchanged: its `reads` and its `report`
/// (a report of a group found otherwise is not kept).
fn with_look(
    unrecorded: Unrecorded<Found>,
    reads: Vec<Read>,
    report: &GroupReport,
) -> Unrecorded<Found> {
    match Found::of(report) {
        Some(found) => unrecorded.with_look(reads, found),
        None => unrecorded,
    }
}

/// What a run knows of the shared sources when it asks a group's record: their record
/// ([`Proof`]: before the sources are read) or the sources read.
trait SharedSources: Copy {
    /// [`Verdicts::look_key`] for a group whose agent's settings files do `agent`.
    fn look_key(self, verdicts: &GroupVerdicts, agent: &AgentSettings) -> String;

    /// [`SharedSources::look_key`] for agent settings known by their evaluations
    /// ([`crate::plan::delivery::verdicts::RecordedAgent::evaluations`]).
    fn look_key_of_evaluations(self, verdicts: &GroupVerdicts, evaluations: &str) -> String;

    /// Whether what the reading of the shared sources read for a plan made from the
    /// container-side items `uses` (`None`: all) still finds the same.
    fn hold_for(self, uses: Option<&[String]>) -> bool;
}

impl SharedSources for &Proof {
    fn look_key(self, verdicts: &GroupVerdicts, agent: &AgentSettings) -> String {
        verdicts.look_key_of_digest(&self.recorded().digest, agent)
    }

    fn look_key_of_evaluations(self, verdicts: &GroupVerdicts, evaluations: &str) -> String {
        verdicts.look_key_of_evaluations(None, Some(&self.recorded().digest), evaluations)
    }

    fn hold_for(self, uses: Option<&[String]>) -> bool {
        self.holds_for(uses)
    }
}

impl SharedSources for &Sources {
    fn look_key(self, verdicts: &GroupVerdicts, agent: &AgentSettings) -> String {
        verdicts.look_key(self, agent)
    }

    fn look_key_of_evaluations(self, verdicts: &GroupVerdicts, evaluations: &str) -> String {
        verdicts.look_key_of_evaluations(Some(self), None, evaluations)
    }

    /// Read by this run: what they hold is in the look's key (their digest).
    fn hold_for(self, _uses: Option<&[String]>) -> bool {
        true
    }
}

/// What a group's record says, asked before the group is looked at ([`Run::ask_record`]).
enum RecordSays {
    /// The group is as its record's last look found it: its report.
    Answered(Box<GroupReport>),
    /// No record (a group never composed); the group's folder, opened and not read yet.
    Nothing(SafeDir),
    /// The record does not answer; the group's folder when it was opened and not used up by
    /// replaying the look's reads.
    Unanswered(Option<SafeDir>),
}

/// Asking a group's record, whatever the run knows of the shared sources.
impl<S: SharedSources> Run<'_, S> {
    /// What `group`'s record says: its report as the record's last look found it, when
    /// nothing that look read (its folders, through the same reads: [`crate::disk::reads`]) nor
    /// anything else its plan depends on (the look's key: [`Verdicts::look_key`]) has changed
    /// since: no plan, diff or load. Not for a group whose config is the one the runner last
    /// handed over (read outside its folder, unseen by the look), nor one an interrupted run
    /// left temps for. A config handed to this run (`--config`, a `clawmd serve` request) is
    /// part of every record key of the run (the layout is: [`Verdicts::look_key`]), so the
    /// record of a look made under another config does not answer.
    fn ask_record(&self, group: &str) -> RecordSays {
        let layout = self.layout;
        if (layout.group_config == GroupConfigSource::Handed
            && !layout.given_configs.contains_key(group))
            || !self.handed_config_kept(group)
            || self.verdicts.journal_pending(layout, group)
        {
            return RecordSays::Unanswered(None);
        }
        // A missing group (or one that is not a folder) is reported by the look that follows.
        let Ok(dir) = open_group(&layout.group_dir(group)) else {
            return RecordSays::Unanswered(None);
        };
        let (delivered, look) = match self.verdicts.recorded(layout, group) {
            RecordAnswer::Look { delivered, look } => (delivered, look),
            RecordAnswer::Nothing => return RecordSays::Nothing(dir),
            RecordAnswer::Other => return RecordSays::Unanswered(Some(dir)),
        };
        if !self.has_look_key(&dir, group, &look) {
            return RecordSays::Unanswered(Some(dir));
        }
        if !self.look_holds(dir, group, &look) {
            return RecordSays::Unanswered(None);
        }
        RecordSays::Answered(Box::new(look.into_found().report(group, *delivered)))
    }

    /// Whether the config handed for `group`, if any, is the one kept for it (a deployment
    /// whose configs are handed keeps it under the group's lock with the documents made from
    /// it: [`Run::observe_locked`]). A group whose kept config is another is composed under
    /// its lock, which keeps it, even when its documents are right.
    fn handed_config_kept(&self, group: &str) -> bool {
        let layout = self.layout;
        match layout.given_configs.get(group) {
            Some(handed) if layout.group_config == GroupConfigSource::Handed => {
                crate::disk::deployment::kept_config_holds(layout, group, handed)
            }
            _ => true,
        }
    }

    /// Whether `look` was made under this run's look key: a look that found no `.claude` in
    /// the group folder (`dir`), in a deployment that mounts no `~/.claude`, under the key
    /// without settings files of the agent's own (the look's read of `.claude`, replayed,
    /// says there is still none); else under the key of what the agent's settings files do
    /// now.
    fn has_look_key(&self, dir: &SafeDir, group: &str, look: &RecordedLook<Found>) -> bool {
        let keyed =
            |agent: &AgentSettings| self.sources.look_key(self.verdicts, agent) == look.key();
        let no_settings_folder = Read {
            root: Root::Group,
            dir: String::new(),
            name: ".claude".to_owned(),
            seen: Seen::Kind(None),
        };
        if self.layout.claude_home.is_none()
            && look.reads().contains(&no_settings_folder)
            && keyed(&AgentSettings::default())
        {
            return true;
        }
        match self.recorded_agent_holds(group, look) {
            // A look whose settings files are worth reading again is made again (once).
            Some(settled_since) => !settled_since || self.options.dry_run,
            None => agent_settings(self.layout, dir, group, &self.options.settings, self.agents)
                .is_ok_and(|found| keyed(&found.agent)),
        }
    }

    /// Whether the agent's settings `look` kept (the view they were read through and its
    /// reads) are found again, every read finding what it found, and give the look's key:
    /// then they are the same, unread. `Some(true)`: a file was found by its bytes though its
    /// identity would now do
    /// ([`MountedFs::holds_fresh`](crate::runtime::mounted::MountedFs::holds_fresh)).
    fn recorded_agent_holds(&self, group: &str, look: &RecordedLook<Found>) -> Option<bool> {
        let agent = look.agent()?;
        let key = self
            .sources
            .look_key_of_evaluations(self.verdicts, &agent.evaluations);
        if key != look.key() {
            return None;
        }
        let mounts = agent.mounts.clone();
        let fs = crate::runtime::view::view_of_table(self.layout, group, mounts, &agent.reads);
        fs.ok()?.holds_fresh(&agent.reads)
    }

    /// Whether every read of `look` finds again what it found: in the group's folders (the
    /// group folder `dir`, used up, and its bind folder), and in the shared sources for the
    /// items its plan was made from. A look that found a file by its bytes though its identity
    /// would now do is made again (once), so that the runs to come do not read that file
    /// again; not by a dry run.
    fn look_holds(&self, dir: SafeDir, group: &str, look: &RecordedLook<Found>) -> bool {
        let bind = || self.verdicts.bind_dir(self.layout, group);
        reads_found(dir, bind, look.reads())
            .is_some_and(|settled_since| !settled_since || self.options.dry_run)
            && self.sources.hold_for(look.uses())
    }
}

/// Answering from the records, before the shared sources are read.
impl Run<'_, &Proof> {
    /// Every group its own record answers, in parallel, without reading the shared sources:
    /// the reads of the sources' record that the group depends on are replayed instead (each
    /// once per run, [`Proof::holds_for`]).
    fn answer_from_records(&self, groups: &[String], outcomes: &mut Outcomes) {
        let answers = parallel_map(groups, |group| {
            let answer = self.answered_by_record(group);
            if answer.is_some() {
                self.progress.done(group);
            }
            answer
        });
        for (index, answer) in answers.into_iter().enumerate() {
            if let Some(report) = answer {
                outcomes.set(index, Ok(report));
            }
        }
    }

    /// The report of `group` when its record answers ([`Run::ask_record`]).
    fn answered_by_record(&self, group: &str) -> Option<GroupReport> {
        checked_group_dir(self.layout, group).ok()?;
        match self.ask_record(group) {
            RecordSays::Answered(report) => Some(*report),
            RecordSays::Nothing(_) | RecordSays::Unanswered(_) => None,
        }
    }
}

/// What a first look at a group, without its lock, comes to ([`Run::first_look`]).
enum FirstLook {
    /// Nothing more to do: the group is right (or this is a dry run): its report.
    Done(Box<GroupReport>),
    /// The group failed in a way another run cannot have caused (or this is a dry run).
    Failed(GroupError),
    /// There are changes to make, or a failure that may come from another run changing the
    /// group right now: look again under the lock.
    NeedsLock,
}

/// Looking at the groups without their locks, once the shared sources are read.
impl Run<'_, &Sources> {
    /// The groups without an outcome yet, looked at and composed where they need it: one
    /// group alone (a spawn) by [`Run::compose_alone`], several by a first look at each
    /// ([`Run::first_looks`]) and then those that need it under their locks
    /// ([`Run::compose_pending`]).
    fn look_and_compose(&self, groups: &[String], outcomes: &mut Outcomes) {
        if let [index] = *outcomes.not_done()
            && !self.options.dry_run
        {
            let group = &groups[index];
            outcomes.set(index, self.compose_alone(group));
            self.progress.done(group);
            return;
        }
        let pending = self.first_looks(groups, outcomes);
        self.compose_pending(groups, &pending, outcomes);
    }

    /// One group alone, at a spawn: its record asked, then, when its lock is free at once,
    /// the group looked at once, under the lock — reported when it is right, composed when it
    /// is not — rather than looked at without the lock and again under it. When another run
    /// holds the lock, as [`Run::compose_one`].
    fn compose_alone(&self, group: &str) -> Result<GroupReport, GroupError> {
        let group_path = checked_group_dir(self.layout, group)?;
        if let RecordSays::Answered(report) = self.ask_record(group) {
            return Ok(*report);
        }
        match state::lock_group(self.layout, group, LockWait::IF_FREE) {
            Ok(lock) => self.compose_under(group, &group_path, lock),
            Err(_) => self.compose_one(group),
        }
    }

    /// One group alone (a spawn) on the shared sources a caller kept ([`KeptAcrossRuns`]),
    /// which `proof`, their record, names: composed as [`Run::compose_alone`] does, once
    /// `proof` vouches for the items its plan uses (replaying their reads, not every item's),
    /// and before any step is applied. `None`, with no step applied (the observation may have
    /// made the folders the steps write in and the write-ahead record of its fragments, as a
    /// run stopped before its apply leaves them), when it does not (an
    /// item the plan uses changed since it was kept), when the group's plan could not be made
    /// (the error is reported by a run that reads the sources), or when another run holds the
    /// group's lock, or left temps to remove: the caller reads the sources and composes again.
    /// The group's record was asked by the caller ([`Run::answer_from_records`]).
    fn compose_alone_kept(
        &self,
        group: &str,
        proof: &Proof,
    ) -> Option<Result<GroupReport, GroupError>> {
        let group_path = checked_group_dir(self.layout, group).ok()?;
        let lock = state::lock_group(self.layout, group, LockWait::IF_FREE).ok()?;
        // Temps an interrupted run left are removed, and reported, by the run that reads the
        // sources: no step is applied before the items are vouched for.
        if state::may_have_leftovers(self.layout, group) {
            return None;
        }
        let (journal, cleaned, seen) = self.observe_locked(group, &group_path, false).ok()?;
        if !proof.holds_for(seen.plan.uses.as_deref()) || proof.stale() {
            tracing::debug!(
                group,
                "the kept shared sources do not hold for the group's plan"
            );
            // Nothing was made under the journal yet: settling it only empties it.
            journal.settle().ok()?;
            return None;
        }
        tracing::debug!(group, "composed from the kept shared sources");
        Some(self.finish_under(group, (journal, cleaned, seen), lock))
    }

    /// A first look, in parallel and without their locks, at the groups without an outcome
    /// yet: a group already right is reported as it is. The others, left to compose under
    /// their locks, are returned (by index).
    fn first_looks(&self, groups: &[String], outcomes: &mut Outcomes) -> Vec<usize> {
        let unanswered = outcomes.not_done();
        let looks = parallel_map(&unanswered, |&index| {
            let group = &groups[index];
            let look = self.first_look(group);
            if !matches!(look, FirstLook::NeedsLock) {
                self.progress.done(group);
            }
            look
        });
        let mut pending = Vec::new();
        for (index, look) in unanswered.into_iter().zip(looks) {
            match look {
                FirstLook::Done(report) => outcomes.set(index, Ok(*report)),
                FirstLook::Failed(err) => outcomes.set(index, Err(err)),
                FirstLook::NeedsLock => pending.push(index),
            }
        }
        pending
    }

    /// Composes `group`: a first look without the lock, then, when it needs it, under the lock.
    fn compose_one(&self, group: &str) -> Result<GroupReport, GroupError> {
        match self.first_look(group) {
            FirstLook::Done(report) => Ok(*report),
            FirstLook::Failed(err) => Err(err),
            FirstLook::NeedsLock => self.compose_locked(group),
        }
    }

    /// A first look without the lock: a group that is already right (the common case at every
    /// spawn) is reported unchanged without taking the lock or writing anything, by its record
    /// when the record answers ([`Run::ask_record`]). Anything else is looked at again under
    /// the lock, since another run may be changing it.
    fn first_look(&self, group: &str) -> FirstLook {
        let group_path = match checked_group_dir(self.layout, group) {
            Ok(path) => path,
            Err(err) => return FirstLook::Failed(err),
        };
        let dry_run = self.options.dry_run;
        let opened = match self.ask_record(group) {
            RecordSays::Answered(report) => return FirstLook::Done(report),
            // A group with no record (never composed) is composed under its lock at once.
            RecordSays::Nothing(_) if !dry_run => return FirstLook::NeedsLock,
            RecordSays::Nothing(dir) => Some(dir),
            RecordSays::Unanswered(dir) => dir,
        };
        // The group folder asking the record opened, unless replaying its look used it up.
        let settings = &self.options.settings;
        let seen = match opened {
            Some(dir) => observe_opened(self.layout, self.sources, dir, settings, None),
            None => observe(self.layout, self.sources, &group_path, settings, None),
        };
        // A dry run reports no group midway through another run's compose.
        let seen = if dry_run {
            let on_wait = |lock: &Path| self.progress.waiting_for_lock(group, lock);
            let wait = LockWait::up_to(self.options.lock_timeout, &on_wait);
            let (layout, sources) = (self.layout, self.sources);
            settled(layout, sources, group, &group_path, settings, seen, wait)
        } else {
            seen
        };
        match seen {
            Ok(first) if dry_run || (first.is_up_to_date() && self.handed_config_kept(group)) => {
                self.report_first_look(group, &first)
            }
            Err(err) if dry_run || matches!(err, GroupError::Missing { .. }) => {
                FirstLook::Failed(err)
            }
            Ok(_) | Err(_) => FirstLook::NeedsLock,
        }
    }

    /// The report of a group a first look found up to date (or looked at for a dry run); the
    /// group's record is written with that look when the group is up to date, not by a dry
    /// run, and only when the group's lock is free at once.
    fn report_first_look(&self, group: &str, first: &Observation) -> FirstLook {
        match self.report_looked(group, first, None) {
            Ok(report) => FirstLook::Done(Box::new(report)),
            Err(err) => FirstLook::Failed(err),
        }
    }

    /// The report of a group looked at and found up to date (or looked at for a dry run),
    /// with its look recorded when it is up to date and not by a dry run: at once when the
    /// group's `lock` is held, else only when the lock is free at once.
    fn report_looked(
        &self,
        group: &str,
        first: &Observation,
        lock: Option<&fsops::GroupLock>,
    ) -> Result<GroupReport, GroupError> {
        let report = GroupReport::from_steps(group, &first.steps, &first.plan, &self.layout.recipe)
            .with_cleaned(first.leftover_names());
        let (report, unrecorded) = self.delivered(first, report);
        let report = with_spawn(self.layout, first, report)?;
        if self.options.dry_run || !first.is_up_to_date() {
            return Ok(report);
        }
        let look = unrecorded.map(|unrecorded| with_look(unrecorded, first.reads.reads(), &report));
        // Fragments found as planned but not recorded (written before clawmd kept the
        // record): recorded now, so that a later change replaces them unkept.
        let fragments_unrecorded =
            first.fragments.is_some() && written::is_stale(first.written.as_ref(), &first.plan);
        if look.is_none() && !fragments_unrecorded {
            return Ok(report);
        }
        let record = || {
            if let Some(look) = look {
                self.verdicts.record(self.layout, look);
            }
            if fragments_unrecorded {
                written::record(self.layout, group, &first.plan, first.written.as_ref());
            }
        };
        match lock {
            Some(_) => record(),
            None => state::with_free_lock(self.layout, group, record),
        }
        Ok(report)
    }
}

/// Takes the group's lock, telling `progress` when another run holds it for more than a
/// moment ([`LockWait::up_to`]). A timeout reports the whole wait.
fn lock_group(
    layout: &Layout,
    group: &str,
    timeout: Duration,
    progress: &dyn Progress,
) -> Result<fsops::GroupLock, GroupError> {
    let on_wait = |lock: &Path| progress.waiting_for_lock(group, lock);
    let wait = LockWait::up_to(timeout, &on_wait);
    state::lock_group(layout, group, wait)
}

/// Composing under the lock.
impl Run<'_, &Sources> {
    /// The groups a first look left, composed under their locks: one alone durably file by
    /// file, several in batches whose syncs are shared ([`Run::compose_batches`]).
    fn compose_pending(&self, groups: &[String], pending: &[usize], outcomes: &mut Outcomes) {
        if let [index] = *pending {
            outcomes.set(index, self.compose_locked(&groups[index]));
            self.progress.done(&groups[index]);
            return;
        }
        // Two batches in flight (when the descriptors allow it) share the limit.
        let limit = open_file_limit();
        let pipelined = limit >= PIPELINED_LIMIT;
        let share = if pipelined { limit / 2 } else { limit };
        let batches: Vec<&[usize]> = pending.chunks(batch_groups(share)).collect();
        let names =
            |batch: &[usize]| -> Vec<&str> { batch.iter().map(|&i| groups[i].as_str()).collect() };
        self.compose_batches(
            batches.iter().map(|b| names(b)).collect(),
            pipelined,
            |number, composed| {
                for (&index, outcome) in batches[number].iter().zip(composed) {
                    outcomes.set(index, outcome);
                    self.progress.done(&groups[index]);
                }
            },
        );
    }

    /// Composes `group` under its lock: observe, apply, and record the verdict.
    fn compose_locked(&self, group: &str) -> Result<GroupReport, GroupError> {
        let group_path = checked_group_dir(self.layout, group)?;
        let lock = lock_group(self.layout, group, self.options.lock_timeout, self.progress)?;
        self.compose_under(group, &group_path, lock)
    }

    /// Composes `group` holding its `lock`: observe; a group found right is reported, its look
    /// recorded ([`Run::report_looked`]); else apply, and record the verdict.
    fn compose_under(
        &self,
        group: &str,
        group_path: &Path,
        lock: fsops::GroupLock,
    ) -> Result<GroupReport, GroupError> {
        let observed = self.observe_locked(group, group_path, false)?;
        self.finish_under(group, observed, lock)
    }

    /// [`Run::compose_under`] once the group is observed under its `lock`: the group reported
    /// as found, or its steps applied and its verdict recorded.
    fn finish_under(
        &self,
        group: &str,
        (journal, cleaned, seen): (std::sync::Arc<TempJournal>, Vec<String>, Observation),
        lock: fsops::GroupLock,
    ) -> Result<GroupReport, GroupError> {
        if cleaned.is_empty() && seen.is_up_to_date() {
            let report = self.report_looked(group, &seen, Some(&lock));
            self.bookkeeping(group, None, journal, lock)?;
            return report;
        }
        let applied = apply(seen.dirs(), &seen.steps, state::durability());
        let delivered = applied.map_err(GroupError::from).and_then(|()| {
            let report =
                GroupReport::from_steps(group, &seen.steps, &seen.plan, &self.layout.recipe)
                    .with_cleaned(cleaned);
            self.delivered_spawned(&seen, report)
        });
        let (report, unrecorded) = match delivered {
            Ok(delivered) => delivered,
            Err(err) => {
                // The group's failure is what is reported; a journal left unsettled keeps its
                // entries, and the next run under the lock removes what they name.
                let _ = journal.settle();
                return Err(err);
            }
        };
        let written = seen.written.as_ref();
        written::record(self.layout, &report.group, &seen.plan, written);
        self.bookkeeping(group, unrecorded, journal, lock)?;
        Ok(report)
    }

    /// What is left of `group`'s compose under its `lock`: its verdict recorded and its journal
    /// settled now, or, in a run that answers first ([`Later`]), left for after the answer with
    /// the handed config kept too (the run kept it before observing otherwise,
    /// [`Run::observe_locked`]); the lock is released once it is done.
    fn bookkeeping(
        &self,
        group: &str,
        unrecorded: Option<Unrecorded<Found>>,
        journal: Arc<TempJournal>,
        lock: fsops::GroupLock,
    ) -> Result<(), GroupError> {
        if self.later.is_deferring() {
            self.later.leave(later::Bookkeeping {
                layout: self.layout.clone(),
                group: group.to_owned(),
                records: self.verdicts.records(),
                unrecorded,
                journal,
                lock,
            });
            return Ok(());
        }
        if let Some(unrecorded) = unrecorded {
            self.verdicts.record(self.layout, unrecorded);
        }
        journal.settle()?;
        drop(lock);
        Ok(())
    }

    /// Under the group's lock: the journal of the temps this run makes, after removing the
    /// temps an interrupted run recorded in it and left (and nothing else), named as the
    /// report names them; then the group observed with that journal. `batched`: the group is
    /// composed in a batch, whose `syncfs` makes the folders it creates durable.
    fn observe_locked(
        &self,
        group: &str,
        group_path: &Path,
        batched: bool,
    ) -> Result<(std::sync::Arc<TempJournal>, Vec<String>, Observation), GroupError> {
        let layout = self.layout;
        let journal = state::journal(layout, group)?;
        if batched {
            journal.defer_folder_syncs();
        }
        let mut cleaned = Vec::new();
        if state::may_have_leftovers(layout, group) {
            for leftover in state::leftovers(layout, group)? {
                if leftover.remove()? {
                    cleaned.push(state::describe_leftover(&leftover, group_path));
                }
            }
        }
        // The config the runner handed, kept under the lock (its temp in the group's
        // journal), so the kept config is the one the documents the last compose wrote were
        // made from, whichever of two spawns of the group handed its config last. A run that
        // answers first keeps it after its answer, still under the lock
        // ([`Run::finish_under`]).
        if batched || !self.later.is_deferring() {
            crate::disk::deployment::keep_handed_config(layout, group, &journal)?;
        }
        let settings = &self.options.settings;
        let mut seen = observe(layout, self.sources, group_path, settings, Some(&journal))?;
        if seen.steps.iter().any(writes_a_fragment) {
            // A `.claude-fragments` found missing and made again may be the old one moved
            // aside, to come back before this run is done: what the record vouches for stays
            // vouched for until this run's own writes are in place.
            let recorded = (seen.written.take()).or_else(|| written::read(layout, group));
            seen.written = written::record_intent(layout, group, &seen.plan, recorded);
        }
        Ok((journal, cleaned, seen))
    }

    /// [`Run::delivered`] and [`with_spawn`] under the group's lock, once its steps are
    /// applied, and the group's record written at once, with the verdict and no look. The
    /// files this run wrote cannot be kept by their identity yet ([`crate::disk::reads::SETTLED`]),
    /// so a look made now would be made again by the next run that finds them settled: that
    /// run, which observes the group anyway, records the look ([`Run::first_look`]).
    fn delivered_recorded(
        &self,
        seen: &Observation,
        report: GroupReport,
    ) -> Result<GroupReport, GroupError> {
        let (report, unrecorded) = self.delivered_spawned(seen, report)?;
        if let Some(unrecorded) = unrecorded {
            self.verdicts.record(self.layout, unrecorded);
        }
        written::record(
            self.layout,
            &report.group,
            &seen.plan,
            seen.written.as_ref(),
        );
        Ok(report)
    }

    /// [`Run::delivered`] and [`with_spawn`]: the report, with the record to write when the
    /// group's record does not hold the verdict yet.
    fn delivered_spawned(
        &self,
        seen: &Observation,
        report: GroupReport,
    ) -> Result<(GroupReport, Option<Unrecorded<Found>>), GroupError> {
        let (report, unrecorded) = self.delivered(seen, report);
        Ok((with_spawn(self.layout, seen, report)?, unrecorded))
    }

    /// Adds to `report` what reaches the agent of the group composed as `seen.plan`: the
    /// verdict kept for its inputs ([`Verdicts`]), else worked out, with the record to write
    /// when its group's record does not hold it yet.
    fn delivered(
        &self,
        seen: &Observation,
        mut report: GroupReport,
    ) -> (GroupReport, Option<Unrecorded<Found>>) {
        let (layout, plan, settings) = (self.layout, &seen.plan, &self.options.settings);
        let found = match agent_settings(layout, &seen.dir, &report.group, settings, self.agents) {
            Ok(found) => found,
            Err(err) => {
                let unreadable =
                    settings_unreadable(layout, plan, self.sources, self.options, &err);
                report.set_delivered(unreadable);
                return (report, None);
            }
        };
        let agent = &found.agent;
        let (delivered, unrecorded) =
            (self.verdicts).delivered(layout, &report.group, plan, self.sources, settings, agent);
        report.set_delivered(delivered);
        // The view the settings were read through, and its reads, kept with the look: a
        // later run that finds them again has the same settings without reading them.
        let unrecorded = unrecorded.map(|unrecorded| match &found.view {
            Some(view) => {
                unrecorded.with_agent_view(agent, view.mounts.clone(), view.reads.clone())
            }
            None => unrecorded,
        });
        (report, unrecorded)
    }
}

/// Whether `step` writes in `.claude-fragments`.
fn writes_a_fragment(step: &Step) -> bool {
    matches!(step, Step::Write { path, .. } if path.place == crate::plan::Place::Fragments)
}

/// How many groups a batch composes at most: each holds its lock, up to four folders and its
/// temp journal open while the batch runs (6 descriptors, 7 with a rescue folder), and a batch
/// costs four `syncfs` calls, so 128 groups keep both small (0.03 syncs per group).
const BATCH_GROUPS: usize = 128;

/// The descriptors a group of a batch holds while the batch runs: its lock, its folder,
/// `.claude-fragments`, its bind and managed folders in the state, its temp journal and, when
/// a hand edit is kept, its rescue folder.
const DESCRIPTORS_PER_GROUP: u64 = 7;

/// The most descriptors one worker thread holds open for a moment (a group folder, its
/// fragments, its lock, a file being read through its `O_PATH` handle, a folder listed), with
/// room to spare.
const DESCRIPTORS_PER_THREAD: u64 = 16;

/// The descriptors kept for everything but a batch's groups: stdio, the workers' own opens.
const DESCRIPTORS_KEPT: u64 = 16 + 8 * DESCRIPTORS_PER_THREAD;

/// The descriptor limit from which two batches are in flight: room for two full batches and
/// two sets of workers.
const PIPELINED_LIMIT: u64 = 2 * (DESCRIPTORS_KEPT + BATCH_GROUPS as u64 * DESCRIPTORS_PER_GROUP);

/// The process's soft limit on open files (`RLIMIT_NOFILE`; the binary raises it to the hard
/// limit at start).
fn open_file_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

/// How many groups a batch composes at once within `limit` open files: at most
/// [`BATCH_GROUPS`], fewer when the descriptors they hold would not fit beside
/// [`DESCRIPTORS_KEPT`], at least one (under a limit that low, a batch of one is a group
/// composed alone).
fn batch_groups(limit: u64) -> usize {
    let spare = limit.saturating_sub(DESCRIPTORS_KEPT) / DESCRIPTORS_PER_GROUP;
    spare.clamp(1, BATCH_GROUPS as u64) as usize
}

/// A group of a batch, locked, observed and staged.
/// Fields are dropped in order: the observation (whose folders share the journal), then the
/// journal (settled on drop, under the lock), then the lock.
struct Work {
    seen: Observation,
    staged: Staged,
    /// The filesystems of its folders (the state folder may be on another one).
    devices: Vec<u64>,
    cleaned: Vec<String>,
    journal: std::sync::Arc<TempJournal>,
    _lock: fsops::GroupLock,
}

/// A batch locked, observed and staged ([`Run::stage`]): its groups' works, and which of
/// its groups another run held the lock of.
struct StagedBatch {
    busy: Vec<bool>,
    works: Vec<Result<Work, GroupError>>,
}

/// Composing groups in batches.
impl Run<'_, &Sources> {
    /// Composes `batches` in order, giving each one's results to `done` with its number. The
    /// next batch is locked, observed and staged while the one before is made durable and put
    /// in place (its `syncfs` calls wait for the disk, and its renames run one group after
    /// another): every group's phases still follow each other, each after its own batch's
    /// sync. Not `pipelined` (a descriptor limit too low for two batches and their workers),
    /// or with crash injection (so that the order of steps stays the same from run to run):
    /// one batch after the other.
    fn compose_batches(
        &self,
        batches: Vec<Vec<&str>>,
        pipelined: bool,
        mut done: impl FnMut(usize, Vec<Result<GroupReport, GroupError>>),
    ) {
        if !pipelined || fsops::crash_injection_enabled() {
            for (number, groups) in batches.iter().enumerate() {
                done(number, self.finish(groups, self.stage(groups)));
            }
            return;
        }
        std::thread::scope(|scope| {
            let mut next = batches
                .first()
                .map(|groups| scope.spawn(|| self.stage(groups)));
            for (number, groups) in batches.iter().enumerate() {
                let staged = match next.take().map(|handle| handle.join()) {
                    Some(Ok(staged)) => staged,
                    Some(Err(panic)) => std::panic::resume_unwind(panic),
                    None => break,
                };
                next = batches
                    .get(number + 1)
                    .map(|groups| scope.spawn(|| self.stage(groups)));
                done(number, self.finish(groups, staged));
            }
        });
    }

    /// Locks, observes and stages `groups` (in parallel): every file and link each needs is
    /// written under a temp name, not synced. A lock another run holds is not waited for
    /// while this batch holds others (two runs taking locks in different orders would wait
    /// for each other): that group is composed on its own once the batch is done.
    fn stage(&self, groups: &[&str]) -> StagedBatch {
        let looked: Vec<Option<Result<Work, GroupError>>> =
            parallel_map(groups, |group| self.stage_group(group).transpose());
        StagedBatch {
            busy: looked.iter().map(Option::is_none).collect(),
            works: looked.into_iter().flatten().collect(),
        }
    }

    /// One group of a batch locked, observed and staged (`None`: another run holds its lock).
    fn stage_group(&self, group: &str) -> Result<Option<Work>, GroupError> {
        let layout = self.layout;
        let group_path = checked_group_dir(layout, group)?;
        let lock = match state::lock_group(layout, group, LockWait::IF_FREE) {
            Ok(lock) => lock,
            Err(GroupError::Fs(FsError::LockTimeout { .. })) => return Ok(None),
            Err(err) => return Err(err),
        };
        let (journal, cleaned, seen) = self.observe_locked(group, &group_path, true)?;
        let mut devices = vec![seen.dir.device()?];
        if let Some(bind) = &seen.bind {
            let device = bind.device()?;
            if !devices.contains(&device) {
                devices.push(device);
            }
        }
        let staged = stage(seen.dirs(), &seen.steps, false)?;
        Ok(Some(Work {
            _lock: lock,
            journal,
            cleaned,
            seen,
            staged,
            devices,
        }))
    }

    /// Composes the staged `groups` durably ([`put_in_place`]), then works out what reaches
    /// each agent and records it, each group still under its lock; the groups another run
    /// held the lock of are composed on their own once the batch's locks are released.
    fn finish(&self, groups: &[&str], batch: StagedBatch) -> Vec<Result<GroupReport, GroupError>> {
        let StagedBatch { busy, mut works } = batch;
        put_in_place(&mut works);
        // What reaches each agent is worked out on every core (the loader reads each group's
        // composed memory), each group still under its lock.
        let composed: Vec<(&str, Result<Work, GroupError>)> = groups
            .iter()
            .zip(&busy)
            .filter(|(_, busy)| !**busy)
            .map(|(group, _)| *group)
            .zip(works)
            .collect();
        let mut done = parallel_map_owned(composed, |(group, work)| {
            let w = work?;
            let report =
                GroupReport::from_steps(group, &w.seen.steps, &w.seen.plan, &self.layout.recipe)
                    .with_cleaned(w.cleaned);
            let report = self.delivered_recorded(&w.seen, report);
            let settled = w.journal.settle();
            let report = report?;
            settled?;
            Ok(report)
        })
        .into_iter();
        // The batch's locks are released (its works dropped): the busy groups, one at a time.
        groups
            .iter()
            .zip(busy)
            .map(|(group, busy)| match busy {
                true => self.compose_locked(group),
                false => done
                    .next()
                    .expect("one result per group composed in the batch"),
            })
            .collect()
    }
}

/// Puts the staged `works` of a batch in place durably with four `syncfs` calls per
/// filesystem for the whole batch instead of an fsync per file and per folder:
///
/// 1. (staged: every file and link written under a temp name) one `syncfs`: all their
///    data is durable;
/// 2. rescues and everything an entry point imports are renamed (linked) in place;
///    `syncfs`;
/// 3. the entry points are renamed in place; `syncfs`;
/// 4. what they no longer import is removed; `syncfs`; only then are the groups reported.
///
/// Each phase of every group happens after the previous phase of every group is durable,
/// so the order a crash can reveal is the order of [`apply`] for each group. A group that
/// fails stops there (its temps removed); the others go on.
fn put_in_place(works: &mut [Result<Work, GroupError>]) {
    // A batch whose groups were all found right under their locks has nothing to make
    // durable.
    let writes = works.iter().any(|work| {
        work.as_ref()
            .is_ok_and(|w| !w.cleaned.is_empty() || !w.seen.all_kept())
    });
    let sync = |works: &mut [Result<Work, GroupError>]| {
        if writes {
            sync_batch(works);
        }
    };
    sync(works);
    phase(works, Staged::place_imported);
    sync(works);
    phase(works, Staged::place_entry_points);
    sync(works);
    phase(works, Staged::remove_stale);
    sync(works);
}

/// Recording the shared sources.
impl Run<'_, &Sources> {
    /// The sources as read (with their `notes`, through the reads in `log`), for the runs to
    /// come, unless their record (`proof`) says the same from the same reads; not by a dry
    /// run, nor by one that reported no group (it writes nothing).
    fn record_sources(
        &self,
        proof: Option<&Proof>,
        notes: &[SourceNote],
        log: &HostLog,
        outcomes: &Outcomes,
    ) {
        if self.options.dry_run || !outcomes.any_reported() {
            return;
        }
        let Some(reads) = log.kept() else {
            return;
        };
        if !proof.is_some_and(|proof| proof.says(self.sources, notes, &reads)) {
            crate::input::sources::record::record(self.layout, self.sources, notes, reads);
        }
    }
}

/// Applies `work` to every item on a few threads (groups are independent and each takes its own
/// lock), returning the results in the items' order. Sequential for small inputs and under
/// crash injection, where the step numbering must be deterministic.
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    parallel_map_owned(items.iter().collect(), work)
}

/// [`parallel_map`] on items that move to the worker that takes them (a group's folders and
/// lock, which are not shared between threads).
fn parallel_map_owned<T: Send, R: Send>(items: Vec<T>, work: impl Fn(T) -> R + Sync) -> Vec<R> {
    if items.len() < 32 || fsops::crash_injection_enabled() {
        return items.into_iter().map(work).collect();
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get().min(8))
        .min(
            open_file_limit()
                .div_ceil(DESCRIPTORS_PER_THREAD * 2)
                .max(1) as usize,
        );
    let count = items.len();
    let items: std::sync::Mutex<Vec<Option<T>>> =
        std::sync::Mutex::new(items.into_iter().map(Some).collect());
    let take = |index: usize| {
        let mut items = items.lock().unwrap_or_else(|p| p.into_inner());
        items.get_mut(index).and_then(Option::take)
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if index >= count {
                            break;
                        }
                        if let Some(item) = take(index) {
                            done.push((index, work(item)));
                        }
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a compose worker panicked"))
            .collect()
    });
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}

/// A composed group's verdict with what its backend's guard guarantees (its guard files are
/// in its plan; `clawmd mounts` lists their binds).
fn with_guarantee(mut report: GroupReport) -> GroupReport {
    let provider = report.target.as_ref().map(|t| t.provider);
    if let (Some(provider), Some(delivered)) = (provider, report.delivered.as_mut()) {
        delivered.guarantee = guard::guarantee(provider);
    }
    report
}

/// The report of the group observed as `seen` with its `spawn_digest` and, when it changed,
/// when a running container sees the change ([`crate::runtime::mounts::spawn`]: from which binds'
/// sources its steps wrote or removed).
fn with_spawn(
    layout: &Layout,
    seen: &Observation,
    mut report: GroupReport,
) -> Result<GroupReport, GroupError> {
    let spawn = crate::runtime::mounts::spawn(layout, &report.group, seen)?;
    if report.status == Status::Changed {
        let group = report.group.as_str();
        let restart = seen.steps.iter().any(|step| match step {
            Step::Write { path, .. } | Step::Remove { path, .. } => {
                spawn.needs_restart(&path.host_path(layout, group))
            }
            Step::Keep { .. }
            | Step::Shadowed { .. }
            | Step::LeftAlone { .. }
            | Step::Foreign { .. }
            | Step::Rescue { .. } => false,
        });
        // Every change a creation (a first compose): no container could bind what was not
        // there; one started before has none of it.
        let created_only = seen.steps.iter().all(|step| match step {
            Step::Write { before, .. } => before.is_none(),
            Step::Remove { .. } | Step::Rescue { .. } => false,
            Step::Keep { .. }
            | Step::Shadowed { .. }
            | Step::LeftAlone { .. }
            | Step::Foreign { .. } => true,
        });
        report.running_container = Some(match (restart, created_only) {
            (true, true) => SeenWhen::StartAfter,
            (true, false) => SeenWhen::AfterRestart,
            (false, _) => SeenWhen::NextSession,
        });
    }
    report.spawn_digest = Some(spawn.digest);
    report.own_config = Some(spawn.own_config);
    Ok(report)
}

/// Runs one phase on every group of the batch still going; a group that fails stops.
fn phase(
    works: &mut [Result<Work, GroupError>],
    step: impl Fn(&mut Staged, Dirs<'_>, &[Step]) -> Result<(), FsError>,
) {
    for work in works.iter_mut() {
        let Ok(w) = work else { continue };
        let Work { seen, staged, .. } = w;
        if let Err(err) = step(staged, seen.dirs(), &seen.steps) {
            *work = Err(err.into());
        }
    }
}

/// One `syncfs` per filesystem the batch's groups (and their bind folders) are on; every
/// folder of the batch is then durable. A group on a filesystem whose sync fails fails (its
/// data may not be durable).
fn sync_batch(works: &mut [Result<Work, GroupError>]) {
    let mut synced: Vec<(u64, Result<(), String>)> = Vec::new();
    for work in works.iter_mut() {
        let Ok(w) = work else { continue };
        let mut failed = None;
        for (index, device) in w.devices.iter().enumerate() {
            let outcome = match synced.iter().find(|(known, _)| known == device) {
                Some((_, outcome)) => outcome.clone(),
                None => {
                    let dir = match index {
                        0 => &w.seen.dir,
                        _ => w.seen.bind.as_ref().unwrap_or(&w.seen.dir),
                    };
                    let outcome = dir
                        .sync_filesystem()
                        .map_err(|err| crate::error::chain_text(&err));
                    synced.push((*device, outcome.clone()));
                    outcome
                }
            };
            if let Err(message) = outcome {
                failed = Some(message);
            }
        }
        match failed {
            None => w.seen.dirs().mark_synced(),
            Some(message) => {
                let path = w.seen.dir.path().to_owned();
                *work = Err(GroupError::from(FsError::Io {
                    op: "sync the filesystem of",
                    path,
                    source: std::io::Error::other(message),
                }));
            }
        }
    }
}

/// What the settings files of the agent of the group seen in `seen` do to its memory: none
/// when the group has no `.claude` entry and the deployment mounts no `~/.claude` for it (one
/// `fstatat`, the common case), else read in its container's view.
fn agent_settings(
    layout: &Layout,
    dir: &SafeDir,
    group: &str,
    settings: &DeliverySettings,
    kept: &AgentSettingsKept,
) -> Result<AgentFound, GroupError> {
    if layout.claude_home.is_none() && dir.kind(".claude")?.is_none() {
        return Ok(AgentFound {
            agent: AgentSettings::default(),
            view: None,
        });
    }
    let view = ViewOptions {
        approve_external: settings.approve_external,
        claude_version: settings.claude_version,
        delivery: settings.delivery,
        provider: settings.provider,
        ..ViewOptions::default()
    };
    crate::runtime::view::agent_settings_kept(layout, dir, group, &view, kept)
}

/// The verdict when the agent's settings files cannot be read: the plan's own, never
/// complete, saying why.
fn settings_unreadable(
    layout: &Layout,
    plan: &GroupPlan,
    sources: &Sources,
    options: &ComposeOptions,
    err: &GroupError,
) -> Delivered {
    let mut delivered = verify(layout, plan, sources, &options.settings);
    delivered.undecided.push(format!(
        "the agent's settings files could not be read ({}): what they do to its memory is undecided",
        crate::error::chain_text(err)
    ));
    delivered.complete = false;
    delivered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::delivery::Delivery;
    use crate::report::ComposeReport;
    use std::fs;
    use std::path::Path;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A deployment of 60 groups (enough for the parallel first look): most share one config,
    /// and among them the local memories differ: missing, empty, blank, plain notes, CRLF,
    /// frontmatter, control characters, a section's own text, huge (over Claude Code's size
    /// warning), and ones that interact with the load (imports that do not load, that load
    /// another composed file, in code, `paths:` frontmatter, a comment left open); some enable
    /// other skills; some are flat (Codex) with their own local memory; one has no
    /// `container.json`.
    fn deployment(root: &Path) -> Vec<String> {
        write(&root.join("container/CLAUDE.md"), "# base\nShared rules.\n");
        write(
            &root.join("container/skills/web/instructions.md"),
            "WEB GUIDE\n",
        );
        write(
            &root.join("container/skills/db/instructions.md"),
            "DB GUIDE\n",
        );
        let shared =
            r#"{"skills": "all", "mcpServers": {"s": {"command": "x", "instructions": "use s"}}}"#;
        let mut groups = Vec::new();
        for n in 0..60 {
            let group = format!("g{n:02}");
            let dir = root.join("groups").join(&group);
            fs::create_dir_all(&dir).unwrap();
            let config = match n % 10 {
                7 => r#"{"skills": ["web"]}"#,
                8 => r#"{"skills": ["db"], "provider": "codex"}"#,
                _ => shared,
            };
            if n != 59 {
                write(&dir.join("container.json"), config);
            }
            let local = match n % 15 {
                0 => None,
                1 => Some(String::new()),
                2 => Some(format!("notes of {group}\n")),
                3 => Some("@./missing.md\n".to_owned()),
                4 => Some("<!-- left open\n".to_owned()),
                5 => Some(format!("notes of {group}\r\nwith CRLF\r\n")),
                6 => Some(format!("---\ntitle: t\n---\nnotes of {group}\n")),
                7 => Some("WEB GUIDE\nShared rules.\n".to_owned()),
                8 => Some(format!("control \u{1} and \u{0} in {group}\n")),
                9 => Some(format!("{}{group}\n", "x".repeat(60_000))),
                10 => Some("@./CLAUDE.md\nsee above\n".to_owned()),
                11 => Some("```\n@./in-code.md\n```\n".to_owned()),
                12 => Some("see @./.claude-shared.md\n".to_owned()),
                13 => Some("---\npaths: src/**\n---\nconditional\n".to_owned()),
                _ => Some(" \n\t\n".to_owned()),
            };
            if let Some(local) = local {
                write(&dir.join("CLAUDE.local.md"), &local);
            }
            groups.push(group);
        }
        groups
    }

    /// What a group gets alone: its own observation, its agent's settings files and
    /// [`verify_with`](crate::plan::delivery::verify::verify_with), nothing kept or recorded.
    fn alone(layout: &Layout, options: &ComposeOptions, group: &str) -> GroupReport {
        let (sources, _) = crate::disk::deployment::read_sources(layout).unwrap();
        let seen = observe(
            layout,
            &sources,
            &layout.group_dir(group),
            &options.settings,
            None,
        )
        .unwrap();
        let agent = agent_settings(
            layout,
            &seen.dir,
            group,
            &options.settings,
            &AgentSettingsKept::default(),
        )
        .unwrap()
        .agent;
        let mut expected = GroupReport::from_steps(group, &[], &seen.plan, &layout.recipe);
        expected.set_delivered(crate::plan::delivery::verify::verify_with(
            layout,
            &seen.plan,
            &sources,
            &options.settings,
            &agent,
        ));
        // A Codex group's verdict also carries its guard's guarantee.
        let provider = expected.target.as_ref().map(|t| t.provider);
        if let Some(delivered) = expected.delivered.as_mut() {
            delivered.guarantee = provider.and_then(guard::guarantee);
        }
        expected
    }

    /// The verdicts and digests of a run, kept between groups of the run and recorded between
    /// runs, are the ones each group gets alone; also after the agents change their local
    /// memories and settings files between runs, and after records are damaged.
    #[test]
    fn kept_and_recorded_verdicts_are_what_each_group_gets_alone() {
        for delivery in Delivery::ALL {
            for approve_external in [false, true] {
                let root = tempfile::tempdir().unwrap();
                let groups = deployment(root.path());
                let layout = Layout::under_root(root.path());
                let options = ComposeOptions {
                    settings: DeliverySettings {
                        approve_external,
                        ..DeliverySettings::with_delivery(delivery)
                    },
                    ..ComposeOptions::default()
                };
                let records = layout
                    .state_dir
                    .join(crate::plan::delivery::verdicts::VERDICTS);
                // 1: composes (batches); 2: the no-op (first looks, records read back);
                // 3: after the agents changed things; 4: the no-op again; 5: records damaged.
                for run in 1..=5 {
                    match run {
                        3 => {
                            for (n, group) in groups.iter().enumerate() {
                                let dir = root.path().join("groups").join(group);
                                match n % 4 {
                                    0 => write(&dir.join("CLAUDE.local.md"), "@./CLAUDE.md\n"),
                                    1 => write(
                                        &dir.join(".claude/settings.json"),
                                        r#"{"claudeMdExcludes": ["**"]}"#,
                                    ),
                                    2 => write(
                                        &dir.join(".claude/settings.local.json"),
                                        r#"{"env": {"CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1"}}"#,
                                    ),
                                    _ => write(&dir.join("CLAUDE.local.md"), &format!("new {n}\n")),
                                }
                            }
                        }
                        5 => {
                            for (n, group) in groups.iter().enumerate() {
                                let record = records.join(group);
                                let Ok(mut bytes) = fs::read(&record) else {
                                    continue;
                                };
                                match n % 3 {
                                    0 => bytes.truncate(bytes.len() / 2),
                                    1 => bytes[40] ^= 1,
                                    _ => bytes[0] ^= 1,
                                }
                                fs::write(&record, bytes).unwrap();
                            }
                        }
                        _ => {}
                    }
                    let report = compose(&layout, &Selection::All, &options).unwrap();
                    let mut digests = std::collections::BTreeSet::new();
                    for (group, got) in groups.iter().zip(&report.groups) {
                        assert_eq!(&got.group, group);
                        assert!(got.error.is_none(), "{delivery} {group}: {got:?}");
                        let expected = alone(&layout, &options, group);
                        assert_eq!(
                            got.delivered, expected.delivered,
                            "{delivery} {group} {run}"
                        );
                        assert_eq!(
                            got.memory_digest, expected.memory_digest,
                            "{delivery} {group} {run}"
                        );
                        digests.insert(got.memory_digest.clone());
                    }
                    // The groups do differ: the verdicts are not all one.
                    assert!(digests.len() >= 12, "{delivery}: {digests:?}");
                    // Every group composed has its record (no temp left beside them).
                    let recorded: Vec<_> = fs::read_dir(&records)
                        .unwrap()
                        .map(|e| e.unwrap().file_name().into_string().unwrap())
                        .collect();
                    assert!(
                        recorded.iter().all(|name| groups.contains(name)),
                        "{recorded:?}"
                    );
                    assert_eq!(recorded.len(), groups.len(), "{delivery} {run}");
                }
            }
        }
    }

    /// A record is read back when its key is the group's (here one planted with a verdict
    /// no load gives), and only then: once the agent changes its local memory, or its
    /// settings files, the verdict is worked out again.
    #[test]
    fn a_record_is_used_exactly_while_its_inputs_hold() {
        let root = tempfile::tempdir().unwrap();
        let groups = deployment(root.path());
        let layout = Layout::under_root(root.path());
        let options = ComposeOptions::default();
        compose(&layout, &Selection::All, &options).unwrap();
        let group = &groups[2];
        let record = layout
            .state_dir
            .join(crate::plan::delivery::verdicts::VERDICTS)
            .join(group);
        let planted = |record: &Path| {
            // The record's body: the verdict, and the look that found the group as planned.
            let (key, mut json) =
                crate::disk::state::record_json::<GroupRecord>(fs::read(record).unwrap()).unwrap();
            let mut delivered: Delivered =
                serde_json::from_value(json["delivered"].clone()).unwrap();
            delivered.missing = vec!["planted".to_owned()];
            json["delivered"] = serde_json::to_value(&delivered).unwrap();
            let planted = crate::disk::state::record_file::<GroupRecord>(&key, json).unwrap();
            fs::write(record, planted).unwrap();
        };
        let missing_of = |report: &ComposeReport| {
            let got = report.groups.iter().find(|g| &g.group == group).unwrap();
            got.delivered.as_ref().unwrap().missing.clone()
        };
        planted(&record);
        let report = compose(&layout, &Selection::All, &options).unwrap();
        assert_eq!(missing_of(&report), ["planted"], "the record is read back");
        let dir = root.path().join("groups").join(group);
        for change in 0..2 {
            planted(&record);
            match change {
                0 => write(&dir.join("CLAUDE.local.md"), "changed by the agent\n"),
                _ => write(
                    &dir.join(".claude/settings.json"),
                    r#"{"claudeMdExcludes": []}"#,
                ),
            }
            let report = compose(&layout, &Selection::All, &options).unwrap();
            let expected = alone(&layout, &options, group);
            assert_eq!(
                missing_of(&report),
                expected.delivered.unwrap().missing,
                "{change}"
            );
        }
    }
}
