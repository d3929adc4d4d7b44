//! `compose`: bring one group, or all, to the state its `container.json` describes.
//!
//! For each group: take the group's lock, [`observe`](crate::deployment::observe) it (read its config, compute the
//! [`plan`](crate::plan) and [`diff`](crate::reconcile::diff) it against the disk) and apply the
//! difference. Groups are independent: a failing group is reported and left as it was, the
//! others are composed.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::delivery::DeliverySettings;
use crate::delivery::GroupPlan;
use crate::delivery::guard;
use crate::delivery::verdicts::{Recorded, Unrecorded, VerdictRecord, Verdicts};
use crate::delivery::verify::{AgentSettings, Delivered, verify};
use crate::deployment::{
    Observation, Selection, checked_group_dir, observe, open_group, read_sources_logged,
    reads_found, source_warnings,
};
use crate::error::{Error, GroupError};
use crate::fsops::{self, FsError, SafeDir, TempJournal};
use crate::layout::{GroupConfigSource, Layout};
use crate::progress::Progress;
use crate::reads::{Read, Root, Seen};
use crate::reconcile::{Dirs, Staged, Step, apply, stage};
use crate::report::{Code, ComposeReport, GroupReport, SeenWhen, Status, WarningReport};
use crate::sources::Sources;
use crate::sources::host_reads::HostLog;
use crate::sources::record::Proof;
use crate::state;
use crate::target::{Delivery, Provider, Target};
use crate::view::ViewOptions;

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

/// [`compose`], telling `progress` how far it is and when it waits for a lock.
pub fn compose_with_progress(
    layout: &Layout,
    selection: &Selection,
    options: &ComposeOptions,
    progress: &dyn Progress,
) -> Result<ComposeReport, Error> {
    let groups = selection.groups(layout)?;
    progress.start(groups.len());
    // With the shared sources' record, first every group its own record answers (in
    // parallel), without reading the sources: the record's reads that group depends on are
    // replayed instead (each once per run, [`Proof::holds_for`]).
    let verdicts = GroupVerdicts::new(layout, &options.settings);
    let leftovers = |lock: &str| verdicts.journal_pending(layout, lock);
    let proof = crate::sources::record::load(layout, leftovers);
    let mut results: Vec<Look> = match &proof {
        Some(proof) => {
            let verdicts = verdicts.knowing_sources(proof.recorded().digest);
            parallel_map(&groups, |group| {
                let shared = Shared::Recorded(proof);
                let look = answered_by_record(layout, shared, group, options, &verdicts);
                if look.is_some() {
                    progress.done(group);
                }
                look
            })
        }
        None => groups.iter().map(|_| None).collect(),
    };
    if let Some(proof) = &proof
        && results.iter().all(Option::is_some)
        && !proof.stale()
    {
        let warnings = source_warnings(&proof.recorded().notes);
        return Ok(report(options, &groups, results, warnings));
    }
    let log = HostLog::new();
    let (sources, notes) = read_sources_logged(layout, &log)?;
    let verdicts = GroupVerdicts::new(layout, &options.settings);
    // Then a look at every other group without its lock (in parallel): a group already right
    // is reported as it is. The others are composed under their locks: one alone durably file
    // by file, several in batches whose syncs are shared ([`Batch::compose_all`]).
    let unanswered: Vec<usize> = (0..groups.len())
        .filter(|&i| results[i].is_none())
        .collect();
    let looks = parallel_map(&unanswered, |&index| {
        let group = &groups[index];
        let look = first_look(layout, &sources, group, options, &verdicts);
        if look.is_some() {
            progress.done(group);
        }
        look
    });
    let mut pending = Vec::new();
    for (index, look) in unanswered.into_iter().zip(looks) {
        match look {
            Some(result) => results[index] = Some(result),
            None => pending.push(index),
        }
    }
    if let [index] = pending[..] {
        results[index] = Some(compose_locked(
            layout,
            &sources,
            &groups[index],
            options,
            &verdicts,
            progress,
        ));
        progress.done(&groups[index]);
    } else {
        // Two batches in flight (when the descriptors allow it) share the limit.
        let limit = open_file_limit();
        let pipelined = limit >= PIPELINED_LIMIT;
        let share = if pipelined { limit / 2 } else { limit };
        let batches: Vec<&[usize]> = pending.chunks(batch_groups(share)).collect();
        let names =
            |batch: &[usize]| -> Vec<&str> { batch.iter().map(|&i| groups[i].as_str()).collect() };
        let batch = Batch {
            layout,
            sources: &sources,
            options,
            verdicts: &verdicts,
            progress,
        };
        batch.compose_all(
            batches.iter().map(|b| names(b)).collect(),
            pipelined,
            |number, composed| {
                for (&index, result) in batches[number].iter().zip(composed) {
                    results[index] = Some(result);
                    progress.done(&groups[index]);
                }
            },
        );
    }
    // The sources as read, for the runs to come, unless the record says the same from the
    // same reads (not by a dry run, nor by one that composed no group: it writes nothing).
    if let Some(reads) = log.kept()
        && !proof
            .as_ref()
            .is_some_and(|proof| proof.says(&sources, &notes, &reads))
        && !options.dry_run
        && results.iter().any(|result| matches!(result, Some(Ok(_))))
    {
        crate::sources::record::record(layout, &sources, &notes, reads);
    }
    Ok(report(options, &groups, results, source_warnings(&notes)))
}

/// The run's report from each group's result (every group is answered, looked at or
/// composed by now).
fn report(
    options: &ComposeOptions,
    groups: &[String],
    results: Vec<Look>,
    warnings: Vec<WarningReport>,
) -> ComposeReport {
    let reports = groups
        .iter()
        .zip(results)
        .map(|(group, result)| {
            match result
                .expect("every group is looked at or composed")
                .map(with_guarantee)
            {
                Ok(report) => report,
                Err(err) => {
                    tracing::error!(group, "{err}");
                    GroupReport::failed(group, &err)
                }
            }
        })
        .collect();
    ComposeReport::new(
        options.dry_run,
        options.settings.delivery,
        reports,
        warnings,
    )
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
/// when a running container sees the change ([`crate::mounts::spawn`]: from which binds'
/// sources its steps wrote or removed).
fn with_spawn(
    layout: &Layout,
    seen: &Observation,
    mut report: GroupReport,
) -> Result<GroupReport, GroupError> {
    let spawn = crate::mounts::spawn(layout, &report.group, seen)?;
    if report.status == Status::Changed {
        let group = report.group.as_str();
        let restart = seen.steps.iter().any(|step| match step {
            Step::Write { path, .. } | Step::Remove { path, .. } => {
                spawn.needs_restart(&path.host_path(layout, group))
            }
            Step::Keep { .. } | Step::Shadowed { .. } | Step::Rescue { .. } => false,
        });
        report.running_container = Some(match restart {
            true => SeenWhen::AfterRestart,
            false => SeenWhen::NextSession,
        });
    }
    report.spawn_digest = Some(spawn.digest);
    Ok(report)
}

/// Composes one group: lock, read config, plan, diff, apply.
pub fn compose_group(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &ComposeOptions,
) -> Result<GroupReport, GroupError> {
    compose_one(
        layout,
        sources,
        group,
        options,
        &GroupVerdicts::new(layout, &options.settings),
    )
}

fn compose_one(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &ComposeOptions,
    verdicts: &GroupVerdicts,
) -> Result<GroupReport, GroupError> {
    match first_look(layout, sources, group, options, verdicts) {
        Some(result) => result,
        None => compose_locked(layout, sources, group, options, verdicts, &()),
    }
}

/// The outcome of looking at a group without its lock: `Some` when there is nothing more to
/// do (the group is right, this is a dry run, or it failed in a way another run cannot have
/// caused); `None` when there are changes to make, or a failure that may come from another run
/// changing the group right now: look again under the lock.
type Look = Option<Result<GroupReport, GroupError>>;

/// A first look without the lock: a group that is already right (the common case at every
/// spawn) is reported unchanged without taking the lock or writing anything. Anything else is
/// looked at again under the lock, since another run may be changing it.
fn first_look(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &ComposeOptions,
    verdicts: &GroupVerdicts,
) -> Look {
    let group_path = match checked_group_dir(layout, group) {
        Ok(path) => path,
        Err(err) => return Some(Err(err)),
    };
    match recorded(layout, Shared::Read(sources), group, options, verdicts) {
        Recorded::Found { delivered, found } => return Some(Ok(found.report(group, *delivered))),
        // A group with no record (never composed) is composed under its lock at once.
        Recorded::Nothing if !options.dry_run => return None,
        Recorded::Nothing | Recorded::Other => {}
    }
    match observe(layout, sources, &group_path, &options.settings, None) {
        Ok(first) if options.dry_run || first.is_up_to_date() => {
            let report = GroupReport::from_steps(group, &first.steps, &first.plan)
                .with_cleaned(first.leftover_names());
            let (report, unrecorded) =
                delivered(verdicts, layout, sources, &first, options, report);
            let report = with_spawn(layout, &first, report);
            if let (Ok(report), Some(unrecorded)) = (&report, unrecorded)
                && !options.dry_run
                && first.is_up_to_date()
            {
                let unrecorded = with_look(unrecorded, first.reads.reads(), report);
                record_unlocked(layout, verdicts, unrecorded);
            }
            Some(report)
        }
        Err(err) if options.dry_run || matches!(err, GroupError::Missing { .. }) => Some(Err(err)),
        Ok(_) | Err(_) => None,
    }
}

/// What a run knows of the shared sources when it asks a group's record.
#[derive(Clone, Copy)]
enum Shared<'a> {
    /// They were read.
    Read(&'a Sources),
    /// Their record, whose digest the run's verdicts know ([`Verdicts::knowing_sources`]).
    Recorded(&'a Proof),
}

/// The report of a group its record answers ([`recorded`]).
fn answered_by_record(
    layout: &Layout,
    shared: Shared<'_>,
    group: &str,
    options: &ComposeOptions,
    verdicts: &GroupVerdicts,
) -> Look {
    checked_group_dir(layout, group).ok()?;
    match recorded(layout, shared, group, options, verdicts) {
        Recorded::Found { delivered, found } => Some(Ok(found.report(group, *delivered))),
        Recorded::Nothing | Recorded::Other => None,
    }
}

/// What the group's record says: its report as the record's last look found it, when nothing that look read
/// (its folders, through the same reads: [`crate::reads`]) nor anything else its plan depends
/// on (the record's key: [`Verdicts::look_key`]) has changed since: no plan, diff or load. Not
/// for a group whose config the runner hands over (read outside its folder), nor one an
/// interrupted run left temps for.
fn recorded(
    layout: &Layout,
    shared: Shared<'_>,
    group: &str,
    options: &ComposeOptions,
    verdicts: &GroupVerdicts,
) -> Recorded<Found> {
    if layout.group_config == GroupConfigSource::Handed || verdicts.journal_pending(layout, group) {
        return Recorded::Other;
    }
    // A missing group (or one that is not a folder) is reported by the look that follows.
    let Ok(dir) = open_group(&layout.group_dir(group)) else {
        return Recorded::Other;
    };
    // A look that found no `.claude` in the group folder, in a deployment that mounts no
    // `~/.claude`: the key without settings files of the agent's own (the look's read of
    // `.claude`, replayed, says there is still none); else what the agent's settings files do
    // now.
    let look_key = |agent: &AgentSettings| match shared {
        Shared::Read(sources) => Some(verdicts.look_key(sources, agent)),
        Shared::Recorded(_) => verdicts.known_look_key(agent),
    };
    let keyed = |recorded: &str, reads: &[Read]| {
        let no_settings = AgentSettings::default();
        let none = Read {
            root: Root::Group,
            dir: String::new(),
            name: ".claude".to_owned(),
            seen: Seen::Kind(None),
        };
        (layout.claude_home.is_none()
            && reads.contains(&none)
            && look_key(&no_settings).as_deref() == Some(recorded))
            || open_group(&layout.group_dir(group))
                .and_then(|dir| agent_settings(layout, &dir, group, &options.settings))
                .is_ok_and(|agent| look_key(&agent).as_deref() == Some(recorded))
    };
    // A look that found a file by its bytes though its identity would now do is made again
    // (once), so that the runs to come do not read that file again; not by a dry run.
    verdicts.recorded_report(layout, group, keyed, |reads, uses| {
        reads_found(dir, || verdicts.bind_dir(layout, group), reads)
            .is_some_and(|settled_since| !settled_since || options.dry_run)
            && match shared {
                Shared::Read(_) => true,
                Shared::Recorded(proof) => proof.holds_for(uses),
            }
    })
}

/// The verdicts of a compose run (and of check, which reads compose's records back): each
/// group's record keeps, with its look, the report of the group found unchanged ([`Found`]).
pub type GroupVerdicts = Verdicts<Found>;

/// A group's record, `<state>/verdicts/<group>` ([`crate::state::Record`]).
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
}

impl Found {
    fn of(report: &GroupReport) -> Option<Found> {
        let target = report.target?;
        let spawn_digest = report.spawn_digest.clone()?;
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
        })
    }

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
                .map(|(section, bytes)| crate::delivery::Dropped { section, bytes })
                .collect(),
        );
        report.set_delivered(delivered);
        report.spawn_digest = Some(self.spawn_digest);
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

/// How long a run waits for a group's lock before it says that it is waiting.
const LOCK_NOTICE_AFTER: Duration = Duration::from_millis(500);

/// Takes the group's lock, telling `progress` when another run holds it for more than a
/// moment. A timeout reports the whole wait.
fn lock_group(
    layout: &Layout,
    group: &str,
    timeout: Duration,
    progress: &dyn Progress,
) -> Result<fsops::GroupLock, GroupError> {
    let path = layout.lock_file(group);
    match fsops::lock(&path, timeout.min(LOCK_NOTICE_AFTER)) {
        Err(FsError::LockTimeout { .. }) if timeout > LOCK_NOTICE_AFTER => {
            progress.waiting_for_lock(group, &path);
            fsops::lock(&path, timeout - LOCK_NOTICE_AFTER).map_err(|err| match err {
                FsError::LockTimeout { path, waited } => FsError::LockTimeout {
                    path,
                    waited: waited + LOCK_NOTICE_AFTER,
                }
                .into(),
                other => other.into(),
            })
        }
        other => Ok(other?),
    }
}

fn compose_locked(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &ComposeOptions,
    verdicts: &GroupVerdicts,
    progress: &dyn Progress,
) -> Result<GroupReport, GroupError> {
    let group_path = checked_group_dir(layout, group)?;
    let _lock = lock_group(layout, group, options.lock_timeout, progress)?;
    let (journal, cleaned, seen) =
        observe_locked(layout, sources, group, &group_path, options, false)?;
    let applied = apply(seen.dirs(), &seen.steps);
    let report = applied.map_err(GroupError::from).and_then(|()| {
        let report = GroupReport::from_steps(group, &seen.steps, &seen.plan).with_cleaned(cleaned);
        delivered_recorded(verdicts, layout, sources, &seen, options, report)
    });
    let settled = journal.settle();
    let report = report?;
    settled?;
    Ok(report)
}

/// Under the group's lock: the journal of the temps this run makes, after removing the temps
/// an interrupted run recorded in it and left (and nothing else), named as the report names
/// them; then the group observed with that journal. `batched`: the group is composed in a
/// batch, whose `syncfs` makes the folders it creates durable.
fn observe_locked(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    group_path: &Path,
    options: &ComposeOptions,
    batched: bool,
) -> Result<(std::sync::Arc<TempJournal>, Vec<String>, Observation), GroupError> {
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
    let seen = observe(
        layout,
        sources,
        group_path,
        &options.settings,
        Some(&journal),
    )?;
    Ok((journal, cleaned, seen))
}

/// [`delivered`] and [`with_spawn`] under the group's lock, once its steps are applied: the
/// group's record is written at once, with the verdict and no look. The files this run wrote
/// cannot be kept by their identity yet ([`crate::reads::SETTLED`]), so a look made now would
/// be made again by the next run that finds them settled: that run, which observes the group
/// anyway, records the look ([`first_look`]).
fn delivered_recorded(
    verdicts: &GroupVerdicts,
    layout: &Layout,
    sources: &Sources,
    seen: &Observation,
    options: &ComposeOptions,
    report: GroupReport,
) -> Result<GroupReport, GroupError> {
    let (report, unrecorded) = delivered(verdicts, layout, sources, seen, options, report);
    let report = with_spawn(layout, seen, report)?;
    if let Some(unrecorded) = unrecorded {
        verdicts.record(layout, unrecorded);
    }
    Ok(report)
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

/// What every batch of a run shares.
struct Batch<'a> {
    layout: &'a Layout,
    sources: &'a Sources,
    options: &'a ComposeOptions,
    verdicts: &'a GroupVerdicts,
    progress: &'a dyn Progress,
}

/// A batch locked, observed and staged ([`Batch::stage`]): its groups' works, and which of
/// its groups another run held the lock of.
struct StagedBatch {
    busy: Vec<bool>,
    works: Vec<Result<Work, GroupError>>,
}

impl Batch<'_> {
    /// Composes `batches` in order, giving each one's results to `done` with its number. The
    /// next batch is locked, observed and staged while the one before is made durable and put
    /// in place (its `syncfs` calls wait for the disk, and its renames run one group after
    /// another): every group's phases still follow each other, each after its own batch's
    /// sync. Not `pipelined` (a descriptor limit too low for two batches and their workers),
    /// or with crash injection (so that the order of steps stays the same from run to run):
    /// one batch after the other.
    fn compose_all(
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
        let Batch {
            layout,
            sources,
            options,
            ..
        } = *self;
        let looked: Vec<Option<Result<Work, GroupError>>> = parallel_map(groups, |group| {
            let work = || {
                let group_path = checked_group_dir(layout, group)?;
                let lock = match fsops::lock(&layout.lock_file(group), Duration::ZERO) {
                    Ok(lock) => lock,
                    Err(FsError::LockTimeout { .. }) => return Ok(None),
                    Err(err) => return Err(err.into()),
                };
                let (journal, cleaned, seen) =
                    observe_locked(layout, sources, group, &group_path, options, true)?;
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
            };
            work().transpose()
        });
        StagedBatch {
            busy: looked.iter().map(Option::is_none).collect(),
            works: looked.into_iter().flatten().collect(),
        }
    }

    /// Composes the staged `groups` durably with four `syncfs` calls per filesystem for the
    /// whole batch instead of an fsync per file and per folder:
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
    fn finish(&self, groups: &[&str], batch: StagedBatch) -> Vec<Result<GroupReport, GroupError>> {
        let Batch {
            layout,
            sources,
            options,
            verdicts,
            progress,
        } = *self;
        let StagedBatch { busy, mut works } = batch;
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
        sync(&mut works);
        phase(&mut works, Staged::place_imported);
        sync(&mut works);
        phase(&mut works, Staged::place_entry_points);
        sync(&mut works);
        phase(&mut works, Staged::remove_stale);
        sync(&mut works);
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
                GroupReport::from_steps(group, &w.seen.steps, &w.seen.plan).with_cleaned(w.cleaned);
            let report = delivered_recorded(verdicts, layout, sources, &w.seen, options, report);
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
                true => compose_locked(layout, sources, group, options, verdicts, progress),
                false => done
                    .next()
                    .expect("one result per group composed in the batch"),
            })
            .collect()
    }
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
                    let outcome = dir.sync_filesystem().map_err(|err| err.to_string());
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

/// Adds to `report` what reaches the agent of the group composed as `seen.plan`: the
/// verdict kept for its inputs ([`Verdicts`]), else worked out, with the record to write when
/// its group's record does not hold it yet.
fn delivered(
    verdicts: &GroupVerdicts,
    layout: &Layout,
    sources: &Sources,
    seen: &Observation,
    options: &ComposeOptions,
    mut report: GroupReport,
) -> (GroupReport, Option<Unrecorded<Found>>) {
    let plan = &seen.plan;
    let settings = &options.settings;
    let agent = match agent_settings(layout, &seen.dir, &report.group, settings) {
        Ok(agent) => agent,
        Err(err) => {
            report.set_delivered(settings_unreadable(layout, plan, sources, options, &err));
            return (report, None);
        }
    };
    let (delivered, unrecorded) =
        verdicts.delivered(layout, &report.group, plan, sources, settings, &agent);
    report.set_delivered(delivered);
    (report, unrecorded)
}

/// Writes the record of a verdict worked out for a group found up to date without its lock:
/// only when its lock is free at once (another run holding it records its own).
fn record_unlocked(layout: &Layout, verdicts: &GroupVerdicts, unrecorded: Unrecorded<Found>) {
    let group = unrecorded.group().to_owned();
    state::with_free_lock(layout, &group, || verdicts.record(layout, unrecorded));
}

/// What the settings files of the agent of the group seen in `seen` do to its memory: none
/// when the group has no `.claude` entry and the deployment mounts no `~/.claude` for it (one
/// `fstatat`, the common case), else read in its container's view.
fn agent_settings(
    layout: &Layout,
    dir: &SafeDir,
    group: &str,
    settings: &DeliverySettings,
) -> Result<AgentSettings, GroupError> {
    if layout.claude_home.is_none() && dir.kind(".claude")?.is_none() {
        return Ok(AgentSettings::default());
    }
    let view = ViewOptions {
        approve_external: settings.approve_external,
        claude_version: settings.claude_version,
        delivery: settings.delivery,
        provider: settings.provider,
        ..ViewOptions::default()
    };
    crate::view::agent_settings(layout, group, &view)
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
        "the agent's settings files could not be read ({err}): what they do to its memory is undecided"
    ));
    delivered.complete = false;
    delivered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::Delivery;
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
    /// [`verify_with`](crate::delivery::verify::verify_with), nothing kept or recorded.
    fn alone(layout: &Layout, options: &ComposeOptions, group: &str) -> GroupReport {
        let (sources, _) = crate::deployment::read_sources(layout).unwrap();
        let seen = observe(
            layout,
            &sources,
            &layout.group_dir(group),
            &options.settings,
            None,
        )
        .unwrap();
        let agent = agent_settings(layout, &seen.dir, group, &options.settings).unwrap();
        let mut expected = GroupReport::from_steps(group, &[], &seen.plan);
        expected.set_delivered(crate::delivery::verify::verify_with(
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
                let records = layout.state_dir.join(crate::delivery::verdicts::VERDICTS);
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
            .join(crate::delivery::verdicts::VERDICTS)
            .join(group);
        let planted = |record: &Path| {
            // The record's body: the verdict, and the look that found the group as planned.
            let (key, mut json) =
                crate::state::record_json::<GroupRecord>(fs::read(record).unwrap()).unwrap();
            let mut delivered: Delivered =
                serde_json::from_value(json["delivered"].clone()).unwrap();
            delivered.missing = vec!["planted".to_owned()];
            json["delivered"] = serde_json::to_value(&delivered).unwrap();
            let planted = crate::state::record_file::<GroupRecord>(&key, json).unwrap();
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
